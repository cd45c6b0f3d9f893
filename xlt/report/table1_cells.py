"""Table 1's rows and their cells, read from a pipeline's result files: what the real pairs' table
(:mod:`xlt.report.table1`) and Fake-English's (:mod:`xlt.report.table1_fake`) both show."""

from __future__ import annotations

import glob
import itertools
import math
import os
import re
import statistics
from dataclasses import dataclass, field, replace
from typing import Any, Optional, Sequence

from xlt.report.findings import Inconclusive
from xlt.report.noise import SE_MULTIPLE, SINGLE_SEED_SD, SINGLE_SEED_SD_ENGLISH, Noise, Spread, pooled_sd
from xlt.report.render import Cell, ReportTable
from xlt.report.sources import (BASELINES_FORMAT, FINETUNE_FORMAT, Reading, baseline_score, finetune_score,
                                has_lang_embeddings, load_json, missing_reason, unigram_fit)
from xlt.report.table1_findings import BASELINES, CONTROL, TASKS, Values
from xlt.report.table1_scores import relative_transfer

SOURCE = "en"
PAIR_COLUMNS = ["zero-shot", "English", "relative"]   # a pair's table, per task (pair_table)

NOISE = (f"± = sample std over the n fine-tuning seeds of a cell (n > 1 only). A finding holds or fails only where "
         f"its margin is more than {SE_MULTIPLE:g} standard errors from its threshold (SE of a difference: "
         "sqrt(sd_a²/n_a + sd_b²/n_b)); closer, it is inconclusive and prints both. A one-seed cell has no spread: "
         f"it is taken to vary as far as one seed moved between two CPU kinds where that was measured (NER: "
         f"{SINGLE_SEED_SD['ner']:g} zero-shot, {SINGLE_SEED_SD_ENGLISH['ner']:g} English F1), and otherwise leaves "
         "its comparisons without a noise estimate (inconclusive). Where a task has rows pretrained with several "
         "seeds, a pretrained row's cell is the mean of its models (± over them) and its noise is one model's "
         "variance pooled over those rows (or the row's own over its models, where larger), divided by its "
         "number of models, and never less than its models' own fine-tuning noise.")


def one_model_remark(noise: Noise) -> Optional[str]:
    """Which tasks and languages have one model per pretrained row (no pretraining-seed spread in
    their cells' noise), so that a finding on them speaks for these models, not yet for their rows;
    None when every pretrained cell counts one. Per language, as make's PRETRAIN_SEEDS_<L> is."""
    pretrained = {cell[1:] for cell in noise.spreads if cell[0] not in (CONTROL, BASELINES)}
    counted = {cell[1:] for cell, s in noise.spreads.items() if s.pretraining_sd is not None}
    alone = [f"{title} ({', '.join(langs)})" for task, title in TASKS
             if (langs := sorted(lang for t, lang in pretrained - counted if t == task))]
    if not alone:
        return None
    return (f"One pretraining seed per row in {'; '.join(alone)}: the noise a finding there is judged against "
            "counts no other pretraining seed, so it holds or fails for these models, not yet for their rows. "
            "Another pretraining seed can move a cell further than fine-tuning seeds do (Fake-English's Default "
            "at the demo scale: zero-shot NER 19.2 and 28.5 F1 from its two pretraining seeds on an Intel Xeon, "
            "22.2 and 27.1 on AMD EPYC, where each model's three fine-tuning seeds had an sd of 2.3-2.8). More "
            "models: make's PRETRAIN_SEEDS_<L> (every row of the pair) and PRETRAIN_SEED_TASKS (the tasks they "
            "are fine-tuned on), read here as en-<L>-seed<k>.")


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


def pair_dirs(results_dir: str, row: str, lang: str) -> list[tuple[int, str]]:
    """(pretraining seed, directory) of a row's en-``lang`` models: seed 0's ``en-<lang>``, then each
    later seed's ``en-<lang>-seed<k>`` (make/table1.mk's names) in seed order."""
    first = os.path.join(results_dir, row, f"en-{lang}")
    later = [(int(m.group(1)), path) for path in glob.glob(glob.escape(first) + "-seed*")
             if (m := re.fullmatch(re.escape(first) + r"-seed(\d+)", path)) and int(m.group(1)) > 0]
    return [(0, first)] + sorted(later)


def over_models(readings: Sequence[tuple[int, Reading]]) -> Reading:
    """A row's cell from its models (pretraining seed, reading): the mean of their scores, each a
    model's mean over its fine-tuning seeds; ``extra["models"]`` lists them. One scored model: its
    reading (named when it is not seed 0's)."""
    scored = [(seed, r) for seed, r in readings if r.value is not None]
    if not scored:
        return readings[0][1]
    if len(scored) == 1:
        seed, reading = scored[0]
        return reading if seed == 0 else replace(reading, note="; ".join(
            filter(None, [reading.note, f"pretraining seed {seed}'s model only"])),
            extra={**(reading.extra or {}), "pretraining_seed": seed})
    models = [{"seed": seed, "mean": r.value, "std": (r.extra or {}).get("std"), "n": (r.extra or {}).get("n_seeds"),
               "model": (r.extra or {}).get("model")} for seed, r in scored]
    means = [m["mean"] for m in models]
    extra = {**(scored[0][1].extra or {}), "models": models, "std": statistics.stdev(means),
             "n_seeds": sum(m["n"] for m in models if isinstance(m["n"], int))}
    notes = [f"seed {seed}: {r.note}" for seed, r in scored if r.note]
    return Reading(value=statistics.fmean(means), note="; ".join(notes) or None, extra=extra)


def read_cells(results_dir: str, row: Row, task: str, lang: str) -> tuple[Reading, Reading]:
    """One row's scores on the en-``lang`` pair's target and English test sets (one read of each
    file), over the row's pretraining seeds (:func:`over_models`)."""
    pair_dir = os.path.join(results_dir, row.key, f"en-{lang}")
    reason = missing_reason(pair_dir)
    # a gap filled later (CORPUS_cc-ru given after a run without it) has results beside its old reason
    if reason and not os.path.exists(os.path.join(pair_dir, task, "results.json")):
        return Reading(gap=reason), Reading(gap=reason)
    if row.baseline:
        path = os.path.join(pair_dir, f"{task}.json")
        loaded = load_json(path, BASELINES_FORMAT)
        return baseline_score(path, lang, loaded=loaded), baseline_score(path, SOURCE, loaded=loaded)
    targets, sources = [], []
    for seed, directory in pair_dirs(results_dir, row.key, lang):
        path = os.path.join(directory, task, "results.json")
        if seed and not os.path.exists(path):
            continue   # a later seed's model not fine-tuned on this task (PRETRAIN_SEED_TASKS)
        loaded = load_json(path, FINETUNE_FORMAT)
        targets.append((seed, finetune_score(path, lang, loaded=loaded)))
        sources.append((seed, finetune_score(path, SOURCE, loaded=loaded)))
    return over_models(targets), over_models(sources)


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
    each with its pretraining runs' English fit (:class:`EnglishScores`), the worst over a cell's models
    (highest share of the unigram floor); each run's metrics read once."""
    fits: dict[str, Any] = {}
    out = {}
    for cell, reading in english_readings.items():
        if freezing(english_readings, cell):
            # every pretraining seed's model must have learned English: the cell carries the worst fit
            models = model_dirs(reading)
            for model in models:
                if model not in fits:
                    fits[model] = unigram_fit(model, SOURCE)
            known = [fits[model] for model in models if fits[model] is not None]
            out[cell] = max(known, key=lambda fit: fit[0] / fit[1]) if known else None
    return out


def freezing_note(readings: dict, cell: tuple[str, str, str]) -> Optional[str]:
    """The English table's note on a cell fine-tuned with more frozen than the control."""
    both = freezing(readings, cell)
    if both is None:
        return None
    mine, theirs = (f"{p.get('trained', 0) / 1e6:.2f}M of {(p.get('trained', 0) + p['frozen']) / 1e6:.2f}M" for p in both)
    return (f"fine-tuned with its language-specific layers frozen (trained {mine} encoder parameters; "
            f"the control {theirs})")


def model_dirs(reading: Reading) -> list[str]:
    """The pretraining run directories behind a cell (one per model), as its results files name them."""
    extra = reading.extra or {}
    paths = [m.get("model") for m in extra.get("models") or ()] or [extra.get("model")]
    return [p for p in paths if isinstance(p, str)]


def lang_embeddings_remark(readings: dict, rows: Sequence[Row]) -> Optional[str]:
    """Which rows' models were pretrained without XLM's language embeddings (Wu et al.'s models have
    them, so a table without them says so); None when every model read has them or none says."""
    known: dict[str, Optional[bool]] = {}
    without, with_ = set(), set()
    for (row, _, _), reading in readings.items():
        for path in model_dirs(reading):
            if path not in known:
                known[path] = has_lang_embeddings(path)
            if known[path] is not None:
                (with_ if known[path] else without).add(row)
    if not without:
        return None
    what = ("without XLM's language embeddings (the learned per-language vector added to every input position; "
            "Wu et al.'s models have them; `xlt pretrain --no-lang-embeddings`, LANG_EMBEDDINGS_<L> := 0 in make)")
    if not with_:
        return f"Every model here was pretrained {what}."
    labels = [row.label for row in rows if row.key in without]
    mixed = [row.label for row in rows if row.key in without & with_]
    return (f"Pretrained {what}: {', '.join(labels)}; the other rows with them."
            + (f" Models of both kinds in: {', '.join(mixed)}." if mixed else ""))


def baseline_names(english_readings: dict) -> dict[str, list[str]]:
    """Task -> the names of the best trivial baselines behind the baseline row's English cells."""
    return {task: sorted({r.extra["baseline"] for (row, t, _), r in english_readings.items()
                          if row == BASELINES and t == task and r.extra})
            for task, _ in TASKS}


def spread(reading: Reading) -> Optional[Spread]:
    """The seeds behind a fine-tuning cell (None: a baseline, or no score); over several models, the
    sd of their scores. A results file that does not say how many seeds ran is read as one seed's
    (the one-seed floor, or no noise estimate), never as an exact number."""
    extra = reading.extra or {}
    if reading.value is None or "n_seeds" not in extra:   # finetune's readings always carry the key
        return None
    n, sd = extra["n_seeds"], extra.get("std")
    models = len(extra.get("models") or ()) or 1
    seeds = tuple(m["seed"] for m in extra.get("models") or ()) or (extra.get("pretraining_seed", 0),)
    sd = float(sd) if isinstance(sd, (int, float)) and not isinstance(sd, bool) else None
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        n, sd = 1, sd if models > 1 else None   # over several models the sd is theirs, whatever n
    return Spread(sd, n, models=models, seeds=seeds)


def noise_of(readings: dict, single_seed_sd: dict[str, float], pools: Optional[dict[str, str]] = None) -> Noise:
    """The seed spreads of a table's cells, as :mod:`xlt.report.noise` reads them: a task and pair with
    rows of several pretraining seeds gives every pretrained cell of it their pooled sd, or the cell's
    own spread over its models where that is larger (rows do not vary alike: one near zero F1 cannot
    spread as far as Default, and pooling its small spread must not shrink Default's); no cell's noise
    is below its models' fine-tuning noise (:func:`finetuning_sd`). ``pools``:
    languages whose cells are pooled with another's (lang -> that language), e.g. a pair with one
    pretrained row, whose own spread is one row's guess."""
    spreads = {cell: s for cell, reading in readings.items() if (s := spread(reading)) is not None}
    pretrained = [cell for cell in spreads if cell[0] not in (CONTROL, BASELINES)]
    pool = (pools or {}).get
    for task, lang in {(cell[1], pool(cell[2], cell[2])) for cell in pretrained}:
        cells = [cell for cell in pretrained if (cell[1], pool(cell[2], cell[2])) == (task, lang)]
        pooled = pooled_sd([[m["mean"] for m in readings[cell].extra.get("models") or ()] for cell in cells])
        if pooled is None:
            continue
        for cell in cells:
            s = spreads[cell]
            # over several models their own sd, and never less than their fine-tuning noise: counting
            # pretraining seeds (other rows', or two models that happen to agree) never lowers a cell's noise
            own = max(s.sd if s.models > 1 else 0.0, finetuning_sd(readings[cell], s, single_seed_sd.get(task)))
            spreads[cell] = replace(s, pretraining_sd=max(pooled, own))
    return Noise(spreads, dict(single_seed_sd), task_correlations(readings, pools))


def finetuning_sd(reading: Reading, s: Spread, floor: Optional[float]) -> float:
    """The sd one model's score has from its fine-tuning seeds alone (0 where unknown): the root mean
    over the cell's models of each one's variance of its mean (sd²/n, or the one-seed ``floor``²), so
    that k models' mean has the variance sum_i sd_i²/n_i / k² of its fine-tuning draws."""
    models = (reading.extra or {}).get("models") or [{"std": s.sd, "n": s.n}]
    variances = [m["std"] ** 2 / m["n"] if isinstance(m.get("n"), int) and m["n"] >= 2 and
                 isinstance(m.get("std"), (int, float)) else floor ** 2 if floor is not None else None
                 for m in models]
    known = [v for v in variances if v is not None]
    return math.sqrt(sum(known) / len(models)) if known else 0.0


# A pooled correlation is kept from this many degrees of freedom (sum over rows of models - 1) on:
# two models always give +-1, whatever the truth, and a sign drawn by chance would make a combination
# look less noisy than the bound it replaces (one row of two models: a difference over tasks with SE 0).
MIN_CORRELATION_DF = 5


def task_correlations(readings: dict, pools: Optional[dict[str, str]] = None) -> dict[tuple[str, str, str], float]:
    """(lang, task, task) -> the correlation of one model's scores on the two tasks: each pretrained
    row's models scored on both, as deviations from the row's means, pooled over rows (and over the
    languages ``pools`` joins, as :func:`noise_of` does); a pair measured on fewer than
    :data:`MIN_CORRELATION_DF` degrees of freedom is absent (its covariance takes the noisier bound)."""
    pool = (pools or {}).get
    scores: dict[tuple[str, str], dict[str, dict[int, float]]] = {}   # (row, lang) -> task -> seed -> score
    for (row, task, lang), reading in readings.items():
        if row not in (CONTROL, BASELINES) and (models := (reading.extra or {}).get("models")):
            scores.setdefault((row, lang), {})[task] = {m["seed"]: m["mean"] for m in models}
    sums: dict[tuple[str, str, str], list[float]] = {}
    for (row, lang), tasks in scores.items():
        for t1, t2 in itertools.combinations(sorted(tasks), 2):
            common = sorted(set(tasks[t1]) & set(tasks[t2]))
            if len(common) < 2:
                continue
            a, b = [tasks[t1][s] for s in common], [tasks[t2][s] for s in common]
            mean_a, mean_b = statistics.fmean(a), statistics.fmean(b)
            da, db = [x - mean_a for x in a], [y - mean_b for y in b]
            acc = sums.setdefault((pool(lang, lang), t1, t2), [0.0, 0.0, 0.0, 0])
            acc[0] += sum(x * y for x, y in zip(da, db))
            acc[1] += sum(x * x for x in da)
            acc[2] += sum(y * y for y in db)
            acc[3] += len(common) - 1
    pooled = {key: max(-1.0, min(1.0, ab / math.sqrt(aa * bb))) for key, (ab, aa, bb, df) in sums.items()
              if aa > 0 and bb > 0 and df >= MIN_CORRELATION_DF}
    langs = {lang for _, _, lang in readings}
    return {(lang, t1, t2): rho for (joined, t1, t2), rho in pooled.items() for lang in langs if pool(lang, lang) == joined}


def models_note(reading: Reading) -> Optional[str]:
    """Each model's score behind a cell over several pretraining seeds."""
    models = (reading.extra or {}).get("models")
    if not models:
        return None
    return "models by pretraining seed: " + ", ".join(
        f"{m['seed']}: {m['mean']:.1f}" + (f" ± {m['std']:.1f} (n={m['n']})" if m.get("std") is not None else "")
        for m in models)


def value_cell(reading: Reading, paper: Optional[float] = None, note: Optional[str] = None) -> Cell:
    """A table cell of a reading: its value, and its seeds' std and number (shown as mean ± std where
    more than one seed ran; over several models, the std of their scores and each model's)."""
    s = spread(reading)
    note = "; ".join(filter(None, [note, models_note(reading)])) or None
    return Cell(value=reading.value, paper=paper, gap=reading.gap, note=note,
                std=s.sd if s else None, n=s.n if s else None, models=s.models if s and s.models > 1 else None)


def relative_cell(values: Values, english: Values, row: Row, task: str, gap: Optional[str], lang: str) -> Cell:
    """A row's relative transfer into ``lang`` (:func:`~xlt.report.table1_scores.relative_transfer`): blank for
    the baseline row (0 by definition), the zero-shot cell's ``gap`` where it has one, else the reason none."""
    if row.key == BASELINES:
        return Cell()
    if gap:
        return Cell(gap=gap)
    try:
        return Cell(value=relative_transfer(values, english, row.key, task, lang), digits=2)
    except Inconclusive as reason:
        return Cell(gap=str(reason))


def pair_table(title: str, lang: str, rows: Sequence[Row], values: Values, english: Values, readings: dict,
               english_readings: dict) -> ReportTable:
    """One pair's table (Fake-English's, its word-order control's): per task the zero-shot score on
    ``lang``'s test set, the same model's English score and the relative transfer."""
    table = ReportTable(name="table1", title=title, stub="Model", groups=[(t, PAIR_COLUMNS) for _, t in TASKS],
                        part=lang, part_column="tested_on")
    for row in rows:
        cells = []
        for task, _ in TASKS:
            target, source = readings[row.key, task, lang], english_readings[row.key, task, lang]
            note = "; ".join(filter(None, [source.note, freezing_note(english_readings, (row.key, task, lang))]))
            cells += [value_cell(target, note=target.note), value_cell(source, note=note or None),
                      relative_cell(values, english, row, task, target.gap, lang)]
        table.add_row(row.label, cells)
    return table
