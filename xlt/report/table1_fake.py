"""Table 1 for the Fake-English pair (K et al. 2020; Dufter & Schütze 2020): English against its
twin whose every character is a new symbol (``xlt fake-english``), so that the two share no token
but have one structure.

The files are the real pairs' (``RESULTS_DIR/<row>/en-fake/...``), but the pair gets a table of its
own: no paper prints these numbers, and a mean over fr and fake would mix two questions. Per task
it gives the zero-shot score on the Fake-English test set, the same model's score on the English
test set (its twin, where fine-tuning was supervised), and the **relative transfer**::

    (zero-shot - best trivial baseline on Fake-English) / (English - best trivial baseline on English)

1 when the model does on Fake-English what it does on English, 0 when it does no better than a
model-free rule. Rows that need shared strings (Default anchors, No anchors) or another corpus
(Wiki-CC) cannot exist here: make records why (``missing.json``), and the table shows it.

The paper's findings are decided on these numbers with the best trivial baseline as the floor:
on Fake-English chance is none (the next word as the head already scores LAS, and an English
entity list finds no Fake-English entity). As for the real pairs, rows whose model did not learn
English are left out of a claim, by name.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, Optional, Sequence

from xlt.report.findings import Finding, Inconclusive, Verdict, check, decide, require
from xlt.report.render import Cell, ReportTable
from xlt.report.table1_cells import Row, baseline_names, collect, freezing_note, frozen_more
from xlt.report.table1_findings import (BASELINES, CONTROL, MIN_MARGIN, TASKS, TIE, EnglishScores, Floor, Values,
                                        deeper_separation_hurts, extra_anchors_help, gated, sep_emb_l16_collapses,
                                        transfers, unlearned)
from xlt.text.fake import FAKE

FLOOR = Floor("the best trivial baseline", BASELINES)
SEPARATED = ("sep-emb", "sep-emb+l1-3", "sep-emb+l1-6", "sep-l1-3", "sep-l1-6")
COLUMNS = ["zero-shot", "English", "relative"]


def score(values: Values, row: str, task: str) -> Optional[float]:
    return values.get(row, {}).get(task, {}).get(FAKE)


def relative_transfer(values: Values, english: Values, row: str, task: str) -> float:
    """The row's relative transfer on ``task``; Inconclusive naming what is missing, or when the row's
    English score is within MIN_MARGIN of the baseline's."""
    target = require(score(values, row, task), f"{row}'s zero-shot {task} score")
    source = require(score(english, row, task), f"{row}'s English {task} score")
    floor_target = require(score(values, BASELINES, task), f"the best trivial baseline on Fake-English {task}")
    floor_source = require(score(english, BASELINES, task), f"the best trivial baseline on English {task}")
    # A smaller English margin makes the ratio noise over noise (XNLI at chance: 34.2 / 33.3 -> 1.0).
    if source - floor_source < MIN_MARGIN:
        raise Inconclusive(f"English {source:.1f} is not {MIN_MARGIN:g} points above the best trivial baseline's "
                           f"{floor_source:.1f}: too little English skill to measure its transfer")
    return (target - floor_target) / (source - floor_source)


# ---- findings ----------------------------------------------------------------------------------------
def pretraining_transfers(english: Values) -> Callable[[Values], Verdict]:
    """Default against both references on every task: whatever it gains over them crossed to a
    language that shares no token with English."""
    def rule(values: Values) -> Verdict:
        margins, parts = {}, []
        for task, _ in TASKS:
            default, control, floor = (score(values, row, task) for row in ("default", CONTROL, BASELINES))
            if None in (default, control, floor):
                parts.append(f"{task}: no Default, No pretraining or baseline score")
                continue
            margins[task] = default - max(control, floor)
            try:
                relative = f"relative transfer {relative_transfer(values, english, 'default', task):.2f}"
            except Inconclusive as reason:
                relative = f"no relative transfer: {reason}"
            parts.append(f"{task}: Default {default:.1f}, No pretraining {control:.1f}, best trivial baseline "
                         f"{floor:.1f} ({margins[task]:+.1f}; {relative})")
        detail = "; ".join(parts)
        if any(m <= -TIE for m in margins.values()):
            return decide(False, detail)
        if len(margins) < len(TASKS) or any(m < TIE for m in margins.values()):
            raise Inconclusive(f"{detail} (a task is missing or within {TIE:g} point: a tie at one seed)")
        return decide(True, detail)
    return rule


def separation_hurts(values: Values) -> Verdict:
    usable = transfers(values, floor=FLOOR)
    parts, broken = [], False
    for task in usable.tasks():
        diffs = {row: score(values, row, task) - score(values, "default", task)
                 for row in SEPARATED if score(values, row, task) is not None}
        if not diffs:
            usable.skipped.append(f"left out: no separated row has a {task} score")
            continue
        broken |= any(d >= 0 for d in diffs.values())
        parts.append(f"{task}: " + ", ".join(f"{row} {d:+.1f}" for row, d in diffs.items()))
    usable.require(parts)
    return decide(not broken, usable.detail("each row - Default: " + "; ".join(parts)))


def claims(english: Values) -> list[tuple[str, Callable[[Values], Verdict], Sequence[str]]]:
    """(claim, rule, the rows whose cells it reads besides Default); ``english``: the English scores."""
    return [
        ("Pretraining transfers without any anchor: Default, whose vocabulary shares no token with English, "
         f"beats the No pretraining control and the best trivial baseline zero-shot by {TIE:g} point or more "
         "on every task (K et al. 2020).", pretraining_transfers(english), ()),
        ("Anchors added by code-switching help: Extra anchors (English words swapped for their twins and back) "
         "beat Default on the mean over tasks (§4.2).", partial(extra_anchors_help, base="default", floor=FLOOR),
         ("extra-anchors",)),
        ("Separated embeddings or layers hurt: every Sep row is below Default on every task (§4.3).",
         separation_hurts, SEPARATED),
        ("More separation hurts more: Sep L1-3 > Sep L1-6 and Sep Emb > Sep Emb + L1-3 > Sep Emb + L1-6 on "
         "every task (§4.3).", partial(deeper_separation_hurts, floor=FLOOR), SEPARATED),
        ("Sep Emb + L1-6 loses at least half of Default's margin over the best trivial baseline on every task "
         "(§4.3).", partial(sep_emb_l16_collapses, floor=FLOOR), ("sep-emb+l1-6",)),
    ]


def findings(values: Values, english: EnglishScores) -> list[Finding]:
    """The claims on the pair's zero-shot scores, without the rows that did not learn English."""
    gaps = unlearned(english)
    return [check(f"Fake-English: {claim}", gated(rule, gaps, rows, english.frozen_more), values, None)
            for claim, rule, rows in claims(english.values)]


# ---- the table ---------------------------------------------------------------------------------------
def relative_cell(values: Values, english: Values, row: Row, task: str, gap: Optional[str]) -> Cell:
    if row.key == BASELINES:
        return Cell()   # 0 by definition
    if gap:
        return Cell(gap=gap)
    try:
        return Cell(value=relative_transfer(values, english, row.key, task), digits=2)
    except Inconclusive as reason:
        return Cell(gap=str(reason))


def build(results_dir: str, rows: Sequence[Row]) -> ReportTable:
    """The pair's table (Table 1's rows) with its findings."""
    values, readings, english, english_readings = collect(results_dir, rows, [FAKE])
    table = ReportTable(name="table1", title="Fake-English (K et al. 2020): zero-shot transfer from English to its "
                        "twin that shares no token with it", stub="Model",
                        groups=[(title, COLUMNS) for _, title in TASKS], part=FAKE, part_column="tested_on")
    for row in rows:
        cells = []
        for task, _ in TASKS:
            target, source = readings[row.key, task, FAKE], english_readings[row.key, task, FAKE]
            note = "; ".join(filter(None, [source.note, freezing_note(english_readings, (row.key, task, FAKE))]))
            cells += [Cell(value=target.value, gap=target.gap, note=target.note),
                      Cell(value=source.value, gap=source.gap, note=note or None),
                      relative_cell(values, english, row, task, target.gap)]
        table.add_row(row.label, cells)
    table.remarks = [
        "Zero-shot: the en-fake model's score on the Fake-English test set (English's, every character mapped, "
        "labels kept); English: the same model on the English test set. relative = (zero-shot - best trivial "
        "baseline) / (English - best trivial baseline), each baseline on its own test set: 1 = as good as on "
        "English, 0 = no better than a model-free rule. No paper prints these numbers."]
    table.findings = findings(values, EnglishScores(english, baseline_names(english_readings),
                                                    frozen_more(english_readings)))
    return table
