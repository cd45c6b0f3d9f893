"""Table 1's rows and their cells, read from a pipeline's result files: what the real pairs' table
(:mod:`xlt.report.table1`) and Fake-English's (:mod:`xlt.report.table1_fake`) both show."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from xlt.report.noise import SE_MULTIPLE, SINGLE_SEED_SD, SINGLE_SEED_SD_ENGLISH, Noise, Spread
from xlt.report.render import Cell
from xlt.report.sources import (BASELINES_FORMAT, FINETUNE_FORMAT, Reading, baseline_score, finetune_score, load_json,
                                missing_reason, unigram_fit)
from xlt.report.table1_findings import BASELINES, CONTROL, TASKS, Values

SOURCE = "en"

NOISE = (f"± = sample std over the n fine-tuning seeds of a cell (n > 1 only). A finding holds or fails only where "
         f"its margin is more than {SE_MULTIPLE:g} standard errors from its threshold (SE of a difference: "
         "sqrt(sd_a²/n_a + sd_b²/n_b)); closer, it is inconclusive and prints both. A one-seed cell has no spread: "
         f"it is taken to vary as far as one seed moved between two CPU kinds where that was measured (NER: "
         f"{SINGLE_SEED_SD['ner']:g} zero-shot, {SINGLE_SEED_SD_ENGLISH['ner']:g} English F1), and otherwise leaves "
         "its comparisons without a noise estimate (inconclusive).")


@dataclass
class Row:
    key: str                # directory under RESULTS_DIR, and the row's name in the findings
    label: str
    paper: dict[str, Any] = field(default_factory=dict)   # task -> {lang: number, "avg": number}; {}: none
    baseline: bool = False  # read from `xlt baselines` outputs instead of fine-tuning results


def table_rows(paper_rows: dict[str, dict[str, Any]]) -> list[Row]:
    """The paper's ten rows in its order, with the two references after Default."""
    rows = [Row(key, row["label"], row) for key, row in paper_rows.items()]
    at = [r.key for r in rows].index("default") + 1 if "default" in paper_rows else 0
    references = [Row(CONTROL, "No pretraining"), Row(BASELINES, "Best trivial baseline", baseline=True)]
    return rows[:at] + references + rows[at:]


def read_cells(results_dir: str, row: Row, task: str, lang: str) -> tuple[Reading, Reading]:
    """One row's scores on the en-``lang`` pair's target and English test sets (one read of its file)."""
    pair_dir = os.path.join(results_dir, row.key, f"en-{lang}")
    reason = missing_reason(pair_dir)
    if reason:
        return Reading(gap=reason), Reading(gap=reason)
    if row.baseline:
        path, fmt, score = os.path.join(pair_dir, f"{task}.json"), BASELINES_FORMAT, baseline_score
    else:
        path, fmt, score = os.path.join(pair_dir, task, "results.json"), FINETUNE_FORMAT, finetune_score
    loaded = load_json(path, fmt)
    return score(path, lang, loaded=loaded), score(path, SOURCE, loaded=loaded)


def collect(results_dir: str, rows: Sequence[Row], languages: Sequence[str]) -> tuple[Values, dict, Values, dict]:
    """Every (row, task, language) score and the Reading behind each (gaps and notes): the target
    language's test scores, then the English test scores of the en-<language> pairs' models."""
    values: Values = {}
    english: Values = {}
    readings: dict = {}
    english_readings: dict = {}
    for row in rows:
        values[row.key], english[row.key] = {}, {}
        for task, _ in TASKS:
            values[row.key][task], english[row.key][task] = {}, {}
            for lang in languages:
                target, source = read_cells(results_dir, row, task, lang)
                readings[row.key, task, lang], english_readings[row.key, task, lang] = target, source
                values[row.key][task][lang], english[row.key][task][lang] = target.value, source.value
    return values, readings, english, english_readings


def freezing(readings: dict, cell: tuple[str, str, str]) -> Optional[tuple[dict, dict]]:
    """(the cell's, the control's) ``encoder_parameters`` when the cell's fine-tuning froze more of
    them than the control's of the same task and pair; None otherwise or when either is not recorded."""
    row, task, lang = cell
    control = readings.get((CONTROL, task, lang))
    if row in (CONTROL, BASELINES) or not readings[cell].extra or not control or not control.extra:
        return None
    mine, theirs = readings[cell].extra.get("encoder_parameters", {}), control.extra.get("encoder_parameters", {})
    if isinstance(mine.get("frozen"), int) and isinstance(theirs.get("frozen"), int) and mine["frozen"] > theirs["frozen"]:
        return mine, theirs
    return None


def frozen_more(english_readings: dict) -> dict:
    """The English cells whose fine-tuning froze more encoder parameters than the control's (:func:`freezing`),
    each with its pretraining run's English fit (:class:`EnglishScores`); each run's metrics read once."""
    fits: dict[str, Any] = {}
    out = {}
    for cell, reading in english_readings.items():
        if freezing(english_readings, cell):
            model = reading.extra.get("model")
            if isinstance(model, str) and model not in fits:
                fits[model] = unigram_fit(model, SOURCE)
            out[cell] = fits.get(model) if isinstance(model, str) else None
    return out


def freezing_note(readings: dict, cell: tuple[str, str, str]) -> Optional[str]:
    """The English table's note on a cell fine-tuned with more frozen than the control."""
    both = freezing(readings, cell)
    if both is None:
        return None
    mine, theirs = (f"{p.get('trained', 0) / 1e6:.2f}M of {(p.get('trained', 0) + p['frozen']) / 1e6:.2f}M" for p in both)
    return (f"fine-tuned with its language-specific layers frozen (trained {mine} encoder parameters; "
            f"the control {theirs})")


def baseline_names(english_readings: dict) -> dict[str, list[str]]:
    """Task -> the names of the best trivial baselines behind the baseline row's English cells."""
    return {task: sorted({r.extra["baseline"] for (row, t, _), r in english_readings.items()
                          if row == BASELINES and t == task and r.extra})
            for task, _ in TASKS}


def spread(reading: Reading) -> Optional[Spread]:
    """The seeds behind a fine-tuning cell (None: a baseline, or no score)."""
    extra = reading.extra or {}
    n = extra.get("n_seeds")
    if reading.value is None or isinstance(n, bool) or not isinstance(n, int) or n < 1:
        return None
    sd = extra.get("std")
    return Spread(float(sd) if isinstance(sd, (int, float)) and not isinstance(sd, bool) else None, n)


def noise_of(readings: dict, single_seed_sd: dict[str, float]) -> Noise:
    """The seed spreads of a table's cells, as :mod:`xlt.report.noise` reads them."""
    return Noise({cell: s for cell, reading in readings.items() if (s := spread(reading)) is not None},
                 dict(single_seed_sd))


def value_cell(reading: Reading, paper: Optional[float] = None, note: Optional[str] = None) -> Cell:
    """A table cell of a reading: its value, and its seeds' std and number (shown as mean ± std where
    more than one seed ran)."""
    s = spread(reading)
    return Cell(value=reading.value, paper=paper, gap=reading.gap, note=note,
                std=s.sd if s else None, n=s.n if s else None)
