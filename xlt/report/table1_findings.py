"""The findings of Wu et al.'s Table 1, and what pretraining bought, checked on a table's numbers.

The paper's claims (§4) are checked on xlt's numbers and on the paper's own. Two references that
the paper has no row for are checked on xlt's numbers only: the **No pretraining** control
(Default's architecture, vocabulary and fine-tuning on an untrained encoder; row ``control``) and
the **best trivial baseline** (``xlt baselines``; row ``baselines``), the latter on the English
(source) test sets, where fine-tuning is supervised and must beat it.

Numbers are ``values[row][task][lang]`` (None where a cell is missing); a comparison of two rows
uses the languages where both have a score, and is inconclusive only when there is none.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional, Sequence

from xlt.report.findings import Finding, Inconclusive, Verdict, check, decide
from xlt.report.sources import LEARNED_SHARE, left_plateau

TASKS = (("xnli", "XNLI (acc)"), ("ner", "NER (F1)"), ("parse", "Parsing (LAS)"))
# Scores of a model that learned nothing: three balanced XNLI classes; no NER span or labelled arc.
CHANCE = {"xnli": 100.0 / 3, "ner": 0.0, "parse": 0.0}
# Below this margin over chance, Default itself does not transfer on a task and comparisons of rows
# on that task are noise: claims are checked on the other tasks.
MIN_MARGIN = 5.0
# Closer than this, Default and a reference row (No pretraining, a baseline) are a tie: one seed on
# test sets of about a thousand examples moves scores by about a point.
TIE = 1.0
# "Within a few points" (No anchors vs Default; the paper's gaps are 1.1, 2.5 and 0.9).
FEW_POINTS = 3.0
CONTROL, BASELINES = "control", "baselines"    # the reference rows' keys (their directories)

# values[row][task][lang] -> score or None
Values = dict[str, dict[str, dict[str, Optional[float]]]]


Cell = tuple[str, str, str]   # (row, task, lang)
Fit = tuple[float, float, int]   # an English dev perplexity, the unigram floor, the step


@dataclass
class EnglishScores:
    """The English (source) test scores of every row (one per pair's model), and which baselines
    are the best ones behind the baseline row's cells (task -> names).

    ``frozen_more``: the cells whose fine-tuning froze encoder parameters that the control's trained
    (the separated rows: the paper fine-tunes only their shared layers), each with its pretraining
    run's English fit (None where the run recorded no unigram floor). Fewer trained parameters cap
    their English score, so it is not compared with the control's."""

    values: Values = field(default_factory=dict)
    baselines: dict[str, list[str]] = field(default_factory=dict)
    frozen_more: dict[Cell, Optional[Fit]] = field(default_factory=dict)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


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


def only(values: Values, task: str, langs: list[str]) -> str:
    """' (over fr, zh only)' when a comparison leaves some of the table's languages out."""
    every = {l for row in values.values() for l in row.get(task, {})}
    return f" (over {', '.join(langs)} only: the other cells are missing)" if len(langs) < len(every) else ""


@dataclass
class Usable:
    """The tasks on which Default transfers (margin over a reference), and notes on those left out:
    Default near the reference, or a task some compared row has no score on (not run)."""

    margins: dict[str, float]
    skipped: list[str] = field(default_factory=list)

    def tasks(self) -> list[str]:
        return list(self.margins)

    def common(self, values: Values, task: str, *rows: str) -> Optional[list[str]]:
        """:func:`common`, or None with a note when no language has all of ``rows`` on ``task``."""
        try:
            return common(values, task, *rows)
        except Inconclusive as reason:
            self.skipped.append(f"left out: {reason}")
            return None

    def require(self, compared: Sequence[Any]) -> None:
        """Inconclusive when a rule found nothing to compare on any usable task."""
        if not compared:
            raise Inconclusive("; ".join(self.skipped) or "nothing to compare")

    def detail(self, text: str) -> str:
        return text + (f" ({'; '.join(self.skipped)})" if self.skipped else "")


def usable_tasks(margins: dict[str, float], reference: str, needs_all: bool = False,
                 missing: Sequence[str] = ()) -> Usable:
    """The tasks where Default's margin over ``reference`` is at least MIN_MARGIN: on the others every
    row is near the reference and differences are noise, so a claim is checked on the usable tasks
    only (all of them with ``needs_all``); Inconclusive when none (or not all) are usable. ``missing``:
    tasks without the scores for a margin (not run), left out with a note."""
    weak = [f"{task} {m:+.1f}" for task, m in margins.items() if m < MIN_MARGIN]
    skipped = [f"left out: Default within {MIN_MARGIN:g} points of {reference} on {', '.join(weak)}"] if weak else []
    skipped += [f"left out: no {', '.join(missing)} results"] if missing else []
    usable = {task: m for task, m in margins.items() if m >= MIN_MARGIN}
    if needs_all and missing:
        raise Inconclusive(f"no {', '.join(missing)} results")
    if not usable or (needs_all and weak):
        raise Inconclusive(f"Default is within {MIN_MARGIN:g} points of {reference} ({', '.join(weak)}), so "
                           "differences between rows are noise" + (f" ({skipped[-1]})" if missing else ""))
    return Usable(usable, skipped)


@dataclass(frozen=True)
class Floor:
    """What a row's margin is measured from: chance (the paper's claims), or a reference row of the
    table (the best trivial baseline: on Fake-English chance is no floor, e.g. the next word as the
    head already scores LAS)."""

    name: str
    row: Optional[str] = None

    def rows(self) -> tuple[str, ...]:
        return (self.row,) if self.row else ()

    def value(self, values: Values, task: str, langs: list[str]) -> float:
        return task_mean(values, self.row, task, langs) if self.row else CHANCE[task]


BY_CHANCE = Floor("chance")


def transfers(values: Values, needs_all: bool = False, floor: Floor = BY_CHANCE) -> Usable:
    """The tasks where Default is at least MIN_MARGIN over the floor (see :func:`usable_tasks`); tasks
    without the scores for that margin are left out with a note."""
    margins, missing = {}, []
    for task, _ in TASKS:
        try:
            langs = common(values, task, "default", *floor.rows())
            margins[task] = task_mean(values, "default", task, langs) - floor.value(values, task, langs)
        except Inconclusive:
            missing.append(task)
    if not margins:
        raise Inconclusive(f"default has no score on any task{' beside ' + floor.name if floor.row else ''}")
    return usable_tasks(margins, floor.name, needs_all, missing)


# ---- the paper's claims ----------------------------------------------------------------------------
def no_anchors_close(values: Values) -> Verdict:
    usable = transfers(values)
    gaps = {}
    for task in usable.tasks():
        if (langs := usable.common(values, task, "default", "no-anchors")) is None:
            continue
        gaps[task] = task_mean(values, "no-anchors", task, langs) - task_mean(values, "default", task, langs)
    usable.require(gaps)
    detail = ", ".join(f"{t} {g:+.1f}" for t, g in gaps.items())
    return decide(all(g >= -FEW_POINTS for g in gaps.values()), usable.detail(f"No anchors - Default: {detail}"))


def sep_emb_l16_collapses(values: Values, floor: Floor = BY_CHANCE) -> Verdict:
    usable = transfers(values, floor=floor)
    lost = {}
    for task in usable.tasks():
        if (langs := usable.common(values, task, "default", "sep-emb+l1-6", *floor.rows())) is None:
            continue
        default = task_mean(values, "default", task, langs)
        # Default's margin over the same languages: dividing by its margin over all of its languages
        # would misjudge a row that lacks some of them.
        margin = default - floor.value(values, task, langs)
        lost[task] = (default - task_mean(values, "sep-emb+l1-6", task, langs)) / margin
    usable.require(lost)
    detail = ", ".join(f"{t} {100 * f:.0f}%" for t, f in lost.items())
    return decide(all(f >= 0.5 for f in lost.values()),
                  usable.detail(f"share of Default's margin over {floor.name} lost: {detail}"))


def sep_emb_l16_collapses_vs_control(values: Values) -> Verdict:
    """The claim above with the No pretraining control as the floor instead of chance: an untrained
    encoder fine-tuned on English already beats chance (e.g. frequent NER strings), so its score is
    the more honest zero of what pretraining bought."""
    if not any(v is not None for cells in values.get(CONTROL, {}).values() for v in cells.values()):
        raise Inconclusive("no No pretraining (control) results")
    rows = ("default", CONTROL, "sep-emb+l1-6")
    means, missing = {}, []
    for task, _ in TASKS:
        try:
            langs = common(values, task, *rows)
        except Inconclusive:
            missing.append(task)
            continue
        means[task] = [task_mean(values, row, task, langs) for row in rows]
    if not means:
        raise Inconclusive(f"no language has scores for all of {', '.join(rows)} on any task")
    usable = usable_tasks({task: d - c for task, (d, c, _) in means.items()}, "No pretraining", missing=missing)
    lost = {task: (means[task][0] - means[task][2]) / margin for task, margin in usable.margins.items()}
    detail = ", ".join(f"{t} {100 * f:.0f}%" for t, f in lost.items())
    return decide(all(f >= 0.5 for f in lost.values()),
                  usable.detail(f"share of Default's margin over No pretraining lost: {detail}"))


def deeper_separation_hurts(values: Values, floor: Floor = BY_CHANCE) -> Verdict:
    usable = transfers(values, floor=floor)
    chains = (("sep-l1-3", "sep-l1-6"), ("sep-emb", "sep-emb+l1-3", "sep-emb+l1-6"))
    broken, compared = [], []
    for task in usable.tasks():
        for chain in chains:
            if (langs := usable.common(values, task, *chain)) is None:
                continue
            means = [task_mean(values, row, task, langs) for row in chain]
            scores = [f"{r} {m:.1f}" for r, m in zip(chain, means)]
            compared.append(f"{task}: " + " > ".join(scores))
            if any(a <= b for a, b in zip(means, means[1:])):
                broken.append(f"{task}: " + ", ".join(scores) + " (not decreasing)")
    usable.require(compared)
    if broken:
        return decide(False, usable.detail("; ".join(broken)))
    return decide(True, usable.detail("every chain decreases on every task" if len(compared) == 2 * len(usable.tasks())
                                      else "; ".join(compared)))


def extra_anchors_help(values: Values, base: str = "default-anchors", floor: Floor = BY_CHANCE) -> Verdict:
    """Extra anchors against ``base``: Default anchors (the paper's), or Default where it has no anchor."""
    usable = transfers(values, floor=floor)
    diffs = {}
    for task in usable.tasks():
        if (langs := usable.common(values, task, "extra-anchors", base)) is None:
            continue
        diffs[task] = task_mean(values, "extra-anchors", task, langs) - task_mean(values, base, task, langs)
    usable.require(diffs)
    gain = mean(list(diffs.values()))
    each = ", ".join(f"{t} {d:+.1f}" for t, d in diffs.items())
    return decide(gain > 0, usable.detail(f"Extra anchors - {base.replace('-', ' ').capitalize()}, mean over tasks: "
                                          f"{gain:+.2f} ({each})"))


def domain_hurts_ner_most(values: Values) -> Verdict:
    transfers(values, needs_all=True)
    drops = {}
    for task, _ in TASKS:
        langs = common(values, task, "default", "wiki-cc")
        drops[task] = task_mean(values, "default", task, langs) - task_mean(values, "wiki-cc", task, langs)
    detail = ", ".join(f"{t} {d:+.1f}" for t, d in drops.items())
    return decide(drops["ner"] > max(drops["xnli"], drops["parse"]), f"Default - Wiki-CC: {detail}")


# (claim, rule, the rows whose cells it reads besides Default)
CLAIMS = (
    (f"No anchors stays within {FEW_POINTS:g} points of Default on every task (§4.2).", no_anchors_close,
     ("no-anchors",)),
    ("Sep Emb + L1-6 falls towards chance: it loses at least half of Default's margin over chance on "
     "every task (§4.3).", sep_emb_l16_collapses, ("sep-emb+l1-6",)),
    ("Separating more bottom layers hurts more: Sep L1-3 > Sep L1-6 and Sep Emb > Sep Emb + L1-3 > "
     "Sep Emb + L1-6 on every task (§4.3).", deeper_separation_hurts,
     ("sep-l1-3", "sep-l1-6", "sep-emb", "sep-emb+l1-3", "sep-emb+l1-6")),
    ("More anchors help: Extra anchors beat Default anchors on the mean over tasks (§4.2).",
     extra_anchors_help, ("extra-anchors", "default-anchors")),
    ("Domain mismatch (Wiki-CC) costs NER more than XNLI and parsing (§4.1).", domain_hurts_ner_most, ("wiki-cc",)),
)
CONTROL_CLAIM = ("Sep Emb + L1-6 falls towards no pretraining: it loses at least half of Default's margin over "
                 "the No pretraining control on every task (§4.3, measured from the control instead of chance).")


# ---- what pretraining bought (xlt's numbers only: the paper has neither reference) -----------------
def pretraining_helps(task: str) -> Callable[[Values], Verdict]:
    def rule(values: Values) -> Verdict:
        langs = common(values, task, "default", CONTROL)
        default, control = task_mean(values, "default", task, langs), task_mean(values, CONTROL, task, langs)
        return decide_unless_tied(default - control, f"Default {default:.1f}, No pretraining {control:.1f} "
                                                     f"({default - control:+.1f}){only(values, task, langs)}")
    return rule


def beats_baseline_on_english(task: str) -> Callable[[EnglishScores], Verdict]:
    def rule(english: EnglishScores) -> Verdict:
        values = english.values
        langs = common(values, task, "default", BASELINES)
        tuned, floor = task_mean(values, "default", task, langs), task_mean(values, BASELINES, task, langs)
        names = ", ".join(english.baselines.get(task, [])) or "?"
        return decide_unless_tied(tuned - floor, f"Default {tuned:.1f}, best trivial baseline {floor:.1f} ({names}; "
                                                 f"{tuned - floor:+.1f}) on the English test set of the "
                                                 f"{', '.join(f'en-{l}' for l in langs)} model(s)")
    return rule


def decide_unless_tied(difference: float, detail: str) -> Verdict:
    """Holds when Default leads the reference, fails when it trails, by at least TIE points."""
    if abs(difference) < TIE:
        raise Inconclusive(f"{detail}: closer than {TIE:g} point, a tie at one seed")
    return decide(difference > 0, detail)


# ---- rows that did not learn their source language ---------------------------------------------------
def unlearned(english: EnglishScores) -> dict[Cell, str]:
    """(row, task, lang) -> why: the pretrained rows whose en-lang model did not learn English, so
    that their zero-shot cell cannot show what sharing or anchors do (a model that did not learn
    English transfers nothing whatever its architecture: the demo's Sep Emb rows, docs/reproduce.md).

    A row fine-tuned as the control is (the same parameters trained) must beat the No pretraining
    control by TIE on the English test set of the task. A row whose fine-tuning froze parameters the
    control's trained is judged by its pretraining instead: its English dev perplexity must be below
    LEARNED_SHARE of the unigram floor (by its English score when the run recorded no floor). Rows
    without English scores are not judged."""
    values, out = english.values, {}
    for row, tasks in values.items():
        if row in (CONTROL, BASELINES):
            continue
        for task, cells in tasks.items():
            for lang, score in cells.items():
                fit = english.frozen_more.get((row, task, lang))
                if fit is not None:
                    if not left_plateau(fit):
                        # one reason for the pair's model, whatever the task (gated() names it once)
                        out[(row, task, lang)] = (f"{row} en-{lang} model (English dev perplexity {fit[0]:,.0f}, "
                                                  f"not below {LEARNED_SHARE:g} x the unigram floor's {fit[1]:,.0f})")
                    continue
                floor = values.get(CONTROL, {}).get(task, {}).get(lang)
                if score is not None and floor is not None and score < floor + TIE:
                    out[(row, task, lang)] = f"{row} {task} {lang} (English {score:.1f} vs {floor:.1f})"
    return out


def without_unlearned(values: Values, gaps: dict[tuple[str, str, str], str]) -> Values:
    """``values`` with the cells of :func:`unlearned` blanked (None), so claims skip them."""
    return {row: {task: {lang: None if (row, task, lang) in gaps else v for lang, v in cells.items()}
                  for task, cells in tasks.items()} for row, tasks in values.items()}


def gated(rule: Callable[[Values], Verdict], gaps: dict[Cell, str], rows: Sequence[str],
          frozen_more: Optional[dict[Cell, Optional[Fit]]] = None) -> Callable[[Values], Verdict]:
    """``rule`` on the values without the unlearned cells of ``rows`` (and Default's), naming them,
    and naming the rows of ``rows`` kept on their pretraining's perplexity (``frozen_more``)."""
    gaps = {cell: why for cell, why in gaps.items() if cell[0] in ("default", *rows)}
    kept = sorted({cell[0] for cell, fit in (frozen_more or {}).items()
                   if cell[0] in rows and fit is not None and cell not in gaps})
    notes = []
    if gaps:
        notes.append("left out, English not learned: " + "; ".join(dict.fromkeys(gaps.values())))
    if kept:
        notes.append(f"{', '.join(kept)}: judged learned by English dev perplexity below {LEARNED_SHARE:g} x the "
                     "unigram floor, not by English score (fine-tuned with the language-specific layers frozen)")
    if not notes:
        return rule
    note = "; ".join(notes)

    def run(values: Values) -> Verdict:
        try:
            verdict = rule(without_unlearned(values, gaps))
        except Inconclusive as reason:
            raise Inconclusive(f"{reason} ({note})") from None
        return Verdict(verdict.verdict, f"{verdict.detail} ({note})")
    return run


def findings(ours: Values, paper: Values, english: Optional[EnglishScores] = None) -> list[Finding]:
    """The paper's claims on both sets of numbers, then the checks against the references (xlt only).

    On xlt's numbers the claims skip every cell whose model did not learn English (:func:`unlearned`);
    the paper prints no English scores, so its numbers are taken as they are."""
    gaps = unlearned(english) if english else {}
    frozen = english.frozen_more if english else {}
    checked = []
    for claim, rule, rows in CLAIMS:
        theirs = check(claim, rule, paper, None)
        checked.append(replace(check(claim, gated(rule, gaps, rows, frozen), ours, None),
                               paper_verdict=theirs.verdict, paper_detail=theirs.detail))
    checked.append(check(CONTROL_CLAIM, gated(sep_emb_l16_collapses_vs_control, gaps, ("sep-emb+l1-6",), frozen),
                         ours, None))
    checked += [check(f"Pretraining beats no pretraining on {title}: Default > No pretraining, zero-shot "
                      "(mean over languages).", pretraining_helps(task), ours, None) for task, title in TASKS]
    checked += [check(f"Fine-tuning beats the best trivial baseline on English {title}: Default > the best "
                      "model-free baseline on the English test set.", beats_baseline_on_english(task),
                      english or EnglishScores(), None) for task, title in TASKS]
    return checked
