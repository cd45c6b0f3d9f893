"""Wu et al. (2020) Table 1 from a pipeline's fine-tuning results, beside the paper's numbers.

Layout read (what ``make reproduce-table1`` writes)::

    RESULTS_DIR/<row>/en-<lang>/<task>/results.json    xlt finetune output (task: xnli, ner, parse)
    RESULTS_DIR/<row>/en-<lang>/missing.json           {"reason": ...}: a cell that cannot be run

Each cell is the target language's TEST score, mean of the best two grid points over seeds (the
paper's "average of the best two sets of hyper-parameters"). The Δ column is the mean over the
languages, as in the paper; when a language is missing it is the mean over those present, marked,
and the paper's Δ beside it is recomputed over the same languages so the two stay comparable.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, Sequence

from xlt.report import paper as paper_numbers
from xlt.report.findings import Inconclusive, Verdict, check, decide
from xlt.report.render import Cell, ReportTable
from xlt.report.sources import Reading, finetune_score, missing_reason

TASKS = (("xnli", "XNLI (acc)"), ("ner", "NER (F1)"), ("parse", "Parsing (LAS)"))
# Scores of a model that learned nothing: three balanced XNLI classes; no NER span or labelled arc.
CHANCE = {"xnli": 100.0 / 3, "ner": 0.0, "parse": 0.0}
# Below this margin over chance, Default itself does not transfer on a task and comparisons of rows
# on that task are noise: claims are checked on the other tasks.
MIN_MARGIN = 5.0
# "Within a few points" (No anchors vs Default; the paper's gaps are 1.1, 2.5 and 0.9).
FEW_POINTS = 3.0
AVERAGE = "Δ"

# values[row][task][lang] -> score or None
Values = dict[str, dict[str, dict[str, Optional[float]]]]


def collect(results_dir: str, rows: Sequence[str], languages: Sequence[str]) -> tuple[Values, dict]:
    """Every (row, task, language) score, and the Reading behind each (gaps and notes)."""
    values: Values = {}
    readings: dict = {}
    for row in rows:
        values[row] = {}
        for task, _ in TASKS:
            values[row][task] = {}
            for lang in languages:
                pair_dir = os.path.join(results_dir, row, f"en-{lang}")
                reason = missing_reason(pair_dir)
                if reason:
                    reading = Reading(gap=reason)
                else:
                    reading = finetune_score(os.path.join(pair_dir, task, "results.json"), lang)
                readings[row, task, lang] = reading
                values[row][task][lang] = reading.value
    return values, readings


def paper_values(data: dict, languages: Sequence[str]) -> Values:
    return {row: {task: {lang: cells[task].get(lang) for lang in languages} for task, _ in TASKS}
            for row, cells in paper_numbers.table1_rows(data).items()}


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


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


def build(results_dir: str, languages: Sequence[str], numbers: Optional[dict] = None) -> ReportTable:
    """Table 1 (all ten rows, in the paper's order) with findings."""
    data = numbers or paper_numbers.load()
    paper_rows = paper_numbers.table1_rows(data)
    rows = list(paper_rows)
    values, readings = collect(results_dir, rows, languages)
    table = ReportTable(name="table1", title="Wu et al. (2020) Table 1: zero-shot transfer from English",
                        stub="Model", groups=[(title, [*languages, AVERAGE]) for _, title in TASKS],
                        source=paper_numbers.describe(data["wu2020_table1"]["source"]))
    for row in rows:
        cells = []
        for task, _ in TASKS:
            paper_task = paper_rows[row][task]
            for lang in languages:
                r = readings[row, task, lang]
                cells.append(Cell(value=r.value, paper=paper_task.get(lang), gap=r.gap, note=r.note))
            cells.append(average_cell(values[row][task], paper_task, languages))
        table.add_row(paper_rows[row]["label"], cells)
    table.remarks = [f"Test scores: {', '.join(t for t, _ in TASKS)} = accuracy, span F1, LAS; mean of the best "
                     f"two fine-tuning settings over seeds (one setting: that setting). {AVERAGE} = mean over "
                     "languages, as the paper's column."]
    table.findings = findings(values, paper_values(data, languages))
    return table


# ---- findings -------------------------------------------------------------------------------------
def task_mean(values: Values, row: str, task: str, languages: Optional[Sequence[str]] = None) -> float:
    """Mean over the languages (given, or all with a score) of one row and task."""
    cells = values.get(row, {}).get(task, {})
    langs = [l for l in (languages or cells) if cells.get(l) is not None]
    if not langs:
        raise Inconclusive(f"{row} has no {task} score")
    return mean([cells[l] for l in langs])


def common(values: Values, task: str, *rows: str) -> list[str]:
    """Languages where every row has a score (comparisons use the same languages on both sides)."""
    sets = [{l for l, v in values.get(r, {}).get(task, {}).items() if v is not None} for r in rows]
    langs = sorted(set.intersection(*sets))
    if not langs:
        raise Inconclusive(f"no language has {task} scores for all of {', '.join(rows)}")
    return langs


@dataclass
class Usable:
    """The tasks on which Default transfers (margin over chance), and a note on those left out."""

    margins: dict[str, float]
    skipped: str

    def tasks(self) -> list[str]:
        return list(self.margins)

    def detail(self, text: str) -> str:
        return text + (f" ({self.skipped})" if self.skipped else "")


def transfers(values: Values, needs_all: bool = False) -> Usable:
    """The tasks where Default's score is at least MIN_MARGIN over chance: on the others every row
    is near chance and differences are noise, so a claim is checked on the usable tasks only (all of
    them with ``needs_all``); Inconclusive when none (or not all) are usable."""
    margins = {task: task_mean(values, "default", task) - CHANCE[task] for task, _ in TASKS}
    weak = [f"{task} {m:+.1f}" for task, m in margins.items() if m < MIN_MARGIN]
    skipped = f"left out: Default within {MIN_MARGIN:g} points of chance on {', '.join(weak)}" if weak else ""
    usable = {task: m for task, m in margins.items() if m >= MIN_MARGIN}
    if not usable or (needs_all and weak):
        raise Inconclusive(f"Default is within {MIN_MARGIN:g} points of chance ({', '.join(weak)}), so "
                           "differences between rows are noise")
    return Usable(usable, skipped)


def no_anchors_close(values: Values) -> Verdict:
    usable = transfers(values)
    gaps = {}
    for task in usable.tasks():
        langs = common(values, task, "default", "no-anchors")
        gaps[task] = task_mean(values, "no-anchors", task, langs) - task_mean(values, "default", task, langs)
    detail = ", ".join(f"{t} {g:+.1f}" for t, g in gaps.items())
    return decide(all(g >= -FEW_POINTS for g in gaps.values()), usable.detail(f"No anchors - Default: {detail}"))


def sep_emb_l16_collapses(values: Values) -> Verdict:
    usable = transfers(values)
    lost = {}
    for task in usable.tasks():
        langs = common(values, task, "default", "sep-emb+l1-6")
        default = task_mean(values, "default", task, langs)
        # Default's margin over the same languages: dividing by its margin over all of its languages
        # would misjudge a row that lacks some of them.
        lost[task] = (default - task_mean(values, "sep-emb+l1-6", task, langs)) / (default - CHANCE[task])
    detail = ", ".join(f"{t} {100 * f:.0f}%" for t, f in lost.items())
    return decide(all(f >= 0.5 for f in lost.values()),
                  usable.detail(f"share of Default's margin over chance lost: {detail}"))


def deeper_separation_hurts(values: Values) -> Verdict:
    usable = transfers(values)
    chains = (("sep-l1-3", "sep-l1-6"), ("sep-emb", "sep-emb+l1-3", "sep-emb+l1-6"))
    broken = []
    for task in usable.tasks():
        for chain in chains:
            langs = common(values, task, *chain)
            means = [task_mean(values, row, task, langs) for row in chain]
            if any(a <= b for a, b in zip(means, means[1:])):
                broken.append(f"{task}: " + ", ".join(f"{r} {m:.1f}" for r, m in zip(chain, means)) + " (not decreasing)")
    return decide(not broken, usable.detail("; ".join(broken) or "every chain decreases on every task"))


def extra_anchors_help(values: Values) -> Verdict:
    usable = transfers(values)
    diffs = []
    for task in usable.tasks():
        langs = common(values, task, "extra-anchors", "default-anchors")
        diffs.append(task_mean(values, "extra-anchors", task, langs) - task_mean(values, "default-anchors", task, langs))
    gain = mean(diffs)
    return decide(gain > 0, usable.detail(f"Extra anchors - Default anchors, mean over tasks: {gain:+.2f}"))


def domain_hurts_ner_most(values: Values) -> Verdict:
    transfers(values, needs_all=True)
    drops = {}
    for task, _ in TASKS:
        langs = common(values, task, "default", "wiki-cc")
        drops[task] = task_mean(values, "default", task, langs) - task_mean(values, "wiki-cc", task, langs)
    detail = ", ".join(f"{t} {d:+.1f}" for t, d in drops.items())
    return decide(drops["ner"] > max(drops["xnli"], drops["parse"]), f"Default - Wiki-CC: {detail}")


CLAIMS = (
    (f"No anchors stays within {FEW_POINTS:g} points of Default on every task (§4.2).", no_anchors_close),
    ("Sep Emb + L1-6 falls towards chance: it loses at least half of Default's margin over chance on "
     "every task (§4.3).", sep_emb_l16_collapses),
    ("Separating more bottom layers hurts more: Sep L1-3 > Sep L1-6 and Sep Emb > Sep Emb + L1-3 > "
     "Sep Emb + L1-6 on every task (§4.3).", deeper_separation_hurts),
    ("More anchors help: Extra anchors beat Default anchors on the mean over tasks (§4.2).",
     extra_anchors_help),
    ("Domain mismatch (Wiki-CC) costs NER more than XNLI and parsing (§4.1).", domain_hurts_ner_most),
)


def findings(ours: Values, paper: Values) -> list:
    return [check(claim, rule, ours, paper) for claim, rule in CLAIMS]

