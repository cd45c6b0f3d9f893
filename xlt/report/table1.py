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

from typing import Optional, Sequence

from xlt.report import paper as paper_numbers, table1_fake
from xlt.report.noise import SINGLE_SEED_SD, SINGLE_SEED_SD_ENGLISH
from xlt.report.render import Cell, ReportTable
from xlt.report.table1_cells import (NOISE, SOURCE, Row, baseline_names, collect, freezing_note, frozen_more,
                                     lang_embeddings_remark, noise_of, one_model_remark, table_rows,
                                     value_cell)
# The findings' constants and helpers are part of this module's interface (liu.py and the tests use them).
from xlt.report.table1_findings import (BASELINES, CHANCE, CONTROL, FEW_POINTS, MIN_MARGIN, TASKS,  # noqa: F401
                                        EnglishScores, Values, findings, mean)
from xlt.text.fake import PERMUTED
from xlt.utils.errors import XltError

AVERAGE = "Δ"


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
                cells.append(value_cell(r, note=note))
            cells.append(mean_cell(values[row.key][task], languages))
        table.add_row(row.label, cells)
    table.remarks = ["Column en-L: the English test score of the row's en-L model, fine-tuned and selected on "
                     "English as for its zero-shot cells (the trivial baselines: on the English test file of the "
                     "en-L task data). Fine-tuning is supervised here: the number a model must reach before its "
                     "transfer means anything. The paper prints no English scores."]
    return table


def build(results_dir: str, languages: Sequence[str], numbers: Optional[dict] = None) -> ReportTable:
    """Table 1 (the paper's ten rows in its order, plus the two references) with the English table
    and the findings; the Fake-English pair (``fake`` among ``languages``) in a table of its own
    after them, or alone (:mod:`xlt.report.table1_fake`), with K et al.'s word-order control where
    ``fakeperm`` is among them too."""
    data = numbers or paper_numbers.load()
    rows = table_rows(paper_numbers.table1_rows(data))
    if PERMUTED in languages and table1_fake.FAKE not in languages:
        raise XltError(f"{PERMUTED} is {table1_fake.FAKE}'s word-order control, read beside it: "
                       f"--langs needs {table1_fake.FAKE} too")
    twins = (table1_fake.FAKE, PERMUTED)
    real = [lang for lang in languages if lang not in twins]
    fake = table1_fake.build(results_dir, rows, word_order=PERMUTED in languages) if len(real) < len(languages) else None
    if not real:
        return fake
    table = real_pairs(results_dir, rows, real, data)
    if fake is not None:
        # one level of sections in the files: the Fake-English table's own (word order) follow it
        table.sections += [fake, *fake.sections]
        fake.sections = []
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
                cells.append(value_cell(r, paper=paper_task.get(lang), note=r.note))
            cells.append(average_cell(values[row.key][task], paper_task, languages))
        table.add_row(row.label, cells)
    table.remarks = [f"Test scores: {', '.join(t for t, _ in TASKS)} = accuracy, span F1, LAS; mean of the best "
                     f"two fine-tuning settings over seeds (one setting: that setting). {AVERAGE} = mean over "
                     "languages, as the paper's column.", REFERENCES, NOISE]
    if remark := lang_embeddings_remark(readings, rows):
        table.remarks.append(remark)
    noise = noise_of(readings, SINGLE_SEED_SD)
    if remark := one_model_remark(noise):
        table.remarks.append(remark)
    table.sections = [english_table(rows, english_readings, english_values, languages)]
    english = EnglishScores(english_values, baseline_names(english_readings), frozen_more(english_readings),
                            noise_of(english_readings, SINGLE_SEED_SD_ENGLISH))
    table.findings = findings(values, paper_values(data, languages), english, noise)
    return table
