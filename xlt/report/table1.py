"""Wu et al. (2020) Table 1 from a pipeline's fine-tuning results, beside the paper's numbers.

Layout read (what ``make reproduce-table1`` writes)::

    RESULTS_DIR/<row>/en-<lang>/<task>/results.json    xlt finetune output (task: xnli, ner, parse)
    RESULTS_DIR/<row>/en-<lang>/missing.json           {"reason": ...}: a cell that cannot be run
    RESULTS_DIR/control/en-<lang>/<task>/results.json  the No pretraining control (xlt finetune output)
    RESULTS_DIR/baselines/en-<lang>/<task>.json        xlt baselines output (tested on en and <lang>)

Each cell is the target language's TEST score, mean of the best two grid points over seeds (the
paper's "average of the best two sets of hyper-parameters"). The Δ column is the mean over the
languages, as in the paper; when a language is missing it is the mean over those present, marked,
and the paper's Δ beside it is recomputed over the same languages so the two stay comparable.

Two reference rows the paper does not have show what pretraining bought: **No pretraining**
(Default's architecture, vocabulary and fine-tuning on an untrained encoder) right after Default,
and the **best trivial baseline** (no model at all), named in a note. A second table gives every
row's ENGLISH test score (the source language, where fine-tuning is supervised), per pair's model.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from xlt.report import paper as paper_numbers
from xlt.report.render import Cell, ReportTable
from xlt.report.sources import (BASELINES_FORMAT, FINETUNE_FORMAT, Reading, baseline_score, finetune_score, load_json,
                                missing_reason, unigram_fit)
# The findings' constants and helpers are part of this module's interface (liu.py and the tests use them).
from xlt.report.table1_findings import (BASELINES, CHANCE, CONTROL, FEW_POINTS, MIN_MARGIN, TASKS,  # noqa: F401
                                        EnglishScores, Values, findings, mean)

AVERAGE = "Δ"
SOURCE = "en"


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


def paper_values(data: dict, languages: Sequence[str]) -> Values:
    return {row: {task: {lang: cells[task].get(lang) for lang in languages} for task, _ in TASKS}
            for row, cells in paper_numbers.table1_rows(data).items()}


def average_cell(ours: dict[str, Optional[float]], paper_row: dict, languages: Sequence[str]) -> Cell:
    """The Δ column: mean over the languages with a score; the paper's over the same languages
    (its printed Δ when those are exactly its own three)."""
    present = [lang for lang in languages if ours.get(lang) is not None]
    if not present:
        return Cell(gap="no language has a score", paper=paper_row.get("avg"))
    paper = None
    if sorted(present) == sorted(k for k in paper_row if k != "avg"):
        paper = paper_row["avg"]
    elif all(paper_row.get(lang) is not None for lang in present):
        paper = mean([paper_row[lang] for lang in present])
    note = f"mean over {', '.join(present)} only (the paper's beside it too)" if len(present) < len(languages) else None
    return Cell(value=mean([ours[lang] for lang in present]), paper=paper, note=note)


def mean_cell(ours: dict[str, Optional[float]], languages: Sequence[str]) -> Cell:
    """The English table's mean over pairs (the paper prints no English scores)."""
    present = [lang for lang in languages if ours.get(lang) is not None]
    if not present:
        return Cell(gap="no pair has a score")
    note = f"mean over {', '.join(f'en-{l}' for l in present)} only" if len(present) < len(languages) else None
    return Cell(value=mean([ours[lang] for lang in present]), note=note)


REFERENCES = ("No pretraining: Default's architecture, vocabulary and fine-tuning on an untrained (randomly "
              "initialised) encoder; the paper has no such row. Best trivial baseline: the best model-free "
              "baseline of `xlt baselines` on each test set, named in a note (XNLI: chance or majority class; "
              "NER: all O or training entities; parsing: next or previous word as the head).")


def english_table(rows: Sequence[Row], readings: dict, values: Values, languages: Sequence[str]) -> ReportTable:
    """Every row's English test score, one column per pair's model."""
    table = ReportTable(name="table1-english", title="English (source) test scores of the same models", stub="Model",
                        groups=[(title, [*(f"en-{l}" for l in languages), "mean"]) for _, title in TASKS], part=SOURCE)
    for row in rows:
        cells = []
        for task, _ in TASKS:
            for lang in languages:
                r = readings[row.key, task, lang]
                note = "; ".join(filter(None, [r.note, freezing_note(readings, (row.key, task, lang))])) or None
                cells.append(Cell(value=r.value, gap=r.gap, note=note))
            cells.append(mean_cell(values[row.key][task], languages))
        table.add_row(row.label, cells)
    table.remarks = ["Column en-L: the English test score of the row's en-L model, fine-tuned and selected on "
                     "English as for its zero-shot cells (the trivial baselines: on the English test file of the "
                     "en-L task data). Fine-tuning is supervised here: the number a model must reach before its "
                     "transfer means anything. The paper prints no English scores."]
    return table


def baseline_names(english_readings: dict) -> dict[str, list[str]]:
    """Task -> the names of the best trivial baselines behind the baseline row's English cells."""
    return {task: sorted({r.extra["baseline"] for (row, t, _), r in english_readings.items()
                          if row == BASELINES and t == task and r.extra})
            for task, _ in TASKS}


def build(results_dir: str, languages: Sequence[str], numbers: Optional[dict] = None) -> ReportTable:
    """Table 1 (the paper's ten rows in its order, plus the two references) with the English table
    and the findings; the Fake-English pair (``fake`` among ``languages``) in a table of its own
    after them, or alone (:mod:`xlt.report.table1_fake`)."""
    from xlt.report import table1_fake   # it builds on this module

    data = numbers or paper_numbers.load()
    rows = table_rows(paper_numbers.table1_rows(data))
    real = [lang for lang in languages if lang != table1_fake.FAKE]
    fake = table1_fake.build(results_dir, rows) if len(real) < len(languages) else None
    if not real:
        return fake
    table = real_pairs(results_dir, rows, real, data)
    if fake is not None:
        table.sections.append(fake)
        table.findings += fake.findings
    return table


def real_pairs(results_dir: str, rows: Sequence[Row], languages: Sequence[str], data: dict) -> ReportTable:
    values, readings, english_values, english_readings = collect(results_dir, rows, languages)
    table = ReportTable(name="table1", title="Wu et al. (2020) Table 1: zero-shot transfer from English",
                        stub="Model", groups=[(title, [*languages, AVERAGE]) for _, title in TASKS],
                        source=paper_numbers.describe(data["wu2020_table1"]["source"]), part="target",
                        part_column="tested_on")
    for row in rows:
        cells = []
        for task, _ in TASKS:
            paper_task = row.paper.get(task, {})
            for lang in languages:
                r = readings[row.key, task, lang]
                cells.append(Cell(value=r.value, paper=paper_task.get(lang), gap=r.gap, note=r.note))
            cells.append(average_cell(values[row.key][task], paper_task, languages))
        table.add_row(row.label, cells)
    table.remarks = [f"Test scores: {', '.join(t for t, _ in TASKS)} = accuracy, span F1, LAS; mean of the best "
                     f"two fine-tuning settings over seeds (one setting: that setting). {AVERAGE} = mean over "
                     "languages, as the paper's column.", REFERENCES]
    table.sections = [english_table(rows, english_readings, english_values, languages)]
    english = EnglishScores(english_values, baseline_names(english_readings), frozen_more(english_readings))
    table.findings = findings(values, paper_values(data, languages), english)
    return table
