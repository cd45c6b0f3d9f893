"""The findings of Wu et al.'s Table 1, and what pretraining bought, checked on a table's numbers.

The paper's claims (§4) are checked on xlt's numbers and on the paper's own. Two references that
the paper has no row for are checked on xlt's numbers only: the **No pretraining** control
(Default's architecture, vocabulary and fine-tuning on an untrained encoder; row ``control``) and
the **best trivial baseline** (``xlt baselines``; row ``baselines``), the latter on the English
(source) test sets, where fine-tuning is supervised and must beat it.

Numbers are ``values[row][task][lang]`` (None where a cell is missing); a comparison of two rows
uses the languages where both have a score, and is inconclusive only when there is none. A claim
holds or fails only where its margin stands more than twice its standard error from the threshold
(the fine-tuning seeds' spread, :mod:`xlt.report.noise`); closer, it is inconclusive, with the
margin and the noise in its text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Callable, Optional, Sequence

from xlt.report.findings import Finding, Inconclusive, Verdict, check, decide
from xlt.report.noise import Estimate, Noise, Terms, add, estimate, judge, settle
from xlt.report.sources import LEARNED_SHARE, left_plateau
# The numbers' constants and helpers are part of this module's interface (table1.py, table1_fake.py,
# liu.py and the tests use them from here).
from xlt.report.table1_scores import (BASELINES, BY_CHANCE, CHANCE, CONTROL, FEW_POINTS, MIN_MARGIN,  # noqa: F401
                                      TASKS, TIE, Cell, Fit, Floor, Usable, Values, common, mean, only,
                                      figure, row_terms, task_mean, transfers, usable_tasks)


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
    noise: Optional[Noise] = None   # the English cells' seed spreads (None: exact numbers)


# ---- the paper's claims ----------------------------------------------------------------------------
# Each rule takes ``noise`` (the seeds' spreads, :mod:`xlt.report.noise`; None: exact numbers, the
# paper's) and decides a comparison only where it stands clear of that noise.
def no_anchors_close(values: Values, noise: Optional[Noise] = None) -> Verdict:
    """No anchors within FEW_POINTS of Default, on either side: a gap of +15 is no "stays close"."""
    usable = transfers(values)
    gaps: dict[str, Estimate] = {}
    for task in usable.tasks():
        if (langs := usable.common(values, task, "default", "no-anchors")) is None:
            continue
        gaps[task] = estimate(values, noise, row_terms(task, langs, (1, "no-anchors"), (-1, "default")))
    usable.require(gaps)
    detail = ", ".join(g.after(f"{t} ", threshold=math.copysign(FEW_POINTS, g.value)) for t, g in gaps.items())
    return settle([(t, within(g, FEW_POINTS)) for t, g in gaps.items()],
                  usable.detail(f"No anchors - Default: {detail}"))


def within(gap: Estimate, bound: float) -> Optional[bool]:
    """Whether ``gap`` lies within ``bound`` of zero beyond the noise on both sides (True), beyond it
    outside on one side (False), or either way within the noise (None)."""
    above = judge(gap, -bound, strict=False)                          # gap >= -bound
    below = judge(replace(gap, value=-gap.value), -bound, strict=False)   # gap <= +bound
    return False if False in (above, below) else True if above and below else None


def half_lost(values: Values, noise: Optional[Noise], task: str, langs: list[str], floor: Floor,
              row: str = "sep-emb+l1-6") -> tuple[float, Estimate]:
    """(the share of Default's margin over ``floor`` that ``row`` loses, and the estimate that decides
    whether it is at least half: (Default - row) - (Default - floor) / 2 >= 0)."""
    default = task_mean(values, "default", task, langs)
    # Default's margin over the same languages: dividing by its margin over all of its languages
    # would misjudge a row that lacks some of them.
    margin = default - floor.value(values, task, langs)
    if margin <= 0:   # the callers leave such a task out first; a share of no margin is no number
        raise Inconclusive(f"Default is not above {floor.name} on {task} over {', '.join(langs)}")
    share = (default - task_mean(values, row, task, langs)) / margin
    terms = row_terms(task, langs, (0.5, "default"), (-1, row), *((0.5, r) for r in floor.rows()))
    return share, estimate(values, noise, terms, 0.0 if floor.row else 0.5 * CHANCE[task])


def lost_detail(lost: dict[str, tuple[float, Estimate]]) -> str:
    return ", ".join(f"{t} {figure(100 * f, 50, 0, '')}%" if e.exact else
                     f"{t} {figure(100 * f, 50, 0, '')}% (lost - half the margin: {e.beside()})"
                     for t, (f, e) in lost.items())


def sep_emb_l16_collapses(values: Values, floor: Floor = BY_CHANCE, noise: Optional[Noise] = None) -> Verdict:
    usable = transfers(values, floor=floor)
    lost = {}
    for task in usable.tasks():
        # the task transfers over all of Default's languages; the share is over these only
        if (langs := usable.common(values, task, "default", "sep-emb+l1-6", *floor.rows())) is None:
            continue
        lost[task] = half_lost(values, noise, task, langs, floor)
    usable.require(lost)
    return settle([(t, judge(e, strict=False)) for t, (_, e) in lost.items()],
                  usable.detail(f"share of Default's margin over {floor.name} lost: {lost_detail(lost)}"))


def sep_emb_l16_collapses_vs_control(values: Values, noise: Optional[Noise] = None) -> Verdict:
    """The claim above with the No pretraining control as the floor instead of chance: an untrained
    encoder fine-tuned on English already beats chance (e.g. frequent NER strings), so its score is
    the more honest zero of what pretraining bought."""
    if not any(v is not None for cells in values.get(CONTROL, {}).values() for v in cells.values()):
        raise Inconclusive("no No pretraining (control) results")
    rows = ("default", CONTROL, "sep-emb+l1-6")
    common_langs, missing = {}, []
    for task, _ in TASKS:
        try:
            common_langs[task] = common(values, task, *rows)
        except Inconclusive:
            missing.append(task)
    if not common_langs:
        raise Inconclusive(f"no language has scores for all of {', '.join(rows)} on any task")
    usable = usable_tasks({task: task_mean(values, "default", task, langs) - task_mean(values, CONTROL, task, langs)
                           for task, langs in common_langs.items()}, "No pretraining", missing=missing)
    for task in usable.margins:
        usable.name_left_out(values, task, common_langs[task], rows)
    control = Floor("No pretraining", CONTROL)
    lost = {task: half_lost(values, noise, task, common_langs[task], control) for task in usable.margins}
    return settle([(t, judge(e, strict=False)) for t, (_, e) in lost.items()],
                  usable.detail(f"share of Default's margin over No pretraining lost: {lost_detail(lost)}"))


def near_floor(values: Values, row: str, task: str, langs: list[str], floor: Floor) -> Optional[float]:
    """``row``'s margin over ``floor`` (on the languages both have) where it is under MIN_MARGIN, else
    None. Two rows that both transfer (next to) nothing differ by noise, not by how much they
    separate (Fake-English's Sep Emb rows: 2.0-2.9 F1 over the baseline's 0), so "the more separated
    one is lower" is no finding there, as a task is left out where Default is that close to the floor."""
    if floor.row:
        langs = [l for l in langs if values.get(floor.row, {}).get(task, {}).get(l) is not None]
    if not langs:
        return None
    room = task_mean(values, row, task, langs) - floor.value(values, task, langs)
    return room if room < MIN_MARGIN else None


# The paper's two chains of ever more separation (§4.3)
SEPARATION_CHAINS = (("sep-l1-3", "sep-l1-6"), ("sep-emb", "sep-emb+l1-3", "sep-emb+l1-6"))


def deeper_separation_hurts(values: Values, floor: Floor = BY_CHANCE, noise: Optional[Noise] = None,
                            chains: Sequence[Sequence[str]] = SEPARATION_CHAINS,
                            needed: Sequence[tuple[str, str]] = ()) -> Verdict:
    """Each chain decreasing link by link; ``needed``: links that must be decided on a task for it to
    count (a chain whose new link sits at the floor says no more than its other links)."""
    usable = transfers(values, floor=floor)
    broken, compared, links = [], [], []
    for task in usable.tasks():
        for chain in chains:
            if (langs := usable.common(values, task, *chain)) is None:
                continue
            means = [task_mean(values, row, task, langs) for row in chain]
            steps = [estimate(values, noise, row_terms(task, langs, (1, a), (-1, b))) for a, b in zip(chain, chain[1:])]
            scores = [f"{r} {m:.1f}" for r, m in zip(chain, means)]
            # the signs as the means stand, so a chain that does not decrease does not read as if it did
            text = scores[0] + "".join(f" {'>' if x > y else '<='} {score}"
                                       for x, y, score in zip(means, means[1:], scores[1:]))
            text += "".join(f" ({a} - {b}: {e.beside()})"
                            for a, b, e in zip(chain, chain[1:], steps) if not e.exact)
            compared.append(f"{task}: {text}")
            decided = [judge(e) for e in steps]
            for a, b, verdict in zip(chain, chain[1:], decided):
                # a link decided either way counts; an undecided one between two rows at the floor is no finding
                if verdict is None and None not in (rooms := [near_floor(values, r, task, langs, floor) for r in (a, b)]):
                    usable.skipped.append(f"left out: {task} {a} vs {b} (both under {MIN_MARGIN:g} over {floor.name}: "
                                          f"{rooms[0]:+.1f}, {rooms[1]:+.1f})")
                    if (a, b) in needed:
                        links.append((f"{task} {a} > {b}", None))   # undecided, not dropped
                    continue
                links.append((f"{task} {a} > {b}", verdict))
            if False in decided:
                shown = ", ".join(scores) if noise is None else text   # with noise: each step's margin and 2 SE
                broken.append(f"{task}: {shown} (not decreasing)")
    usable.require(compared)
    if broken:
        return decide(False, usable.detail("; ".join(broken)))
    if not links:
        raise Inconclusive(usable.detail("; ".join(compared) + "; every link is between two rows at the floor, "
                                         "whose difference says nothing about separation"))
    exact = noise is None
    every = exact and len(compared) == len(chains) * len(usable.tasks())
    return settle(links, usable.detail("every chain decreases on every task" if every else "; ".join(compared)))


def extra_anchors_help(values: Values, base: str = "default-anchors", floor: Floor = BY_CHANCE,
                       noise: Optional[Noise] = None) -> Verdict:
    """Extra anchors against ``base``: Default anchors (the paper's), or Default where it has no anchor."""
    usable = transfers(values, floor=floor)
    diffs: dict[str, Terms] = {}
    for task in usable.tasks():
        if (langs := usable.common(values, task, "extra-anchors", base)) is None:
            continue
        diffs[task] = row_terms(task, langs, (1, "extra-anchors"), (-1, base))
    usable.require(diffs)
    each = {t: estimate(values, noise, d) for t, d in diffs.items()}
    gain = estimate(values, noise, add(*({c: w / len(diffs) for c, w in d.items()} for d in diffs.values())))
    listed = ", ".join(e.after(f"{t} ") for t, e in each.items())
    return settle([("the mean over tasks", judge(gain))],
                  usable.detail(f"Extra anchors - {base.replace('-', ' ').capitalize()}, mean over tasks: "
                                f"{gain.after('', digits=2)} ({listed})"))


def domain_hurts_ner_most(values: Values, noise: Optional[Noise] = None) -> Verdict:
    usable = transfers(values, needs_all=True)
    drops = {}
    for task, _ in TASKS:
        if (langs := usable.common(values, task, "default", "wiki-cc")) is None:
            raise Inconclusive(usable.detail(f"no {task} comparison"))
        drops[task] = row_terms(task, langs, (1, "default"), (-1, "wiki-cc"))
    detail = ", ".join(f"{t} {estimate(values, None, d).value:+.1f}" for t, d in drops.items())
    parts = []
    for other in ("xnli", "parse"):
        e = estimate(values, noise, add(drops["ner"], {c: -w for c, w in drops[other].items()}))
        parts.append((f"ner - {other}", judge(e)))
        if not e.exact:
            detail += f"; ner's drop - {other}'s: {e.beside()}"
    return settle(parts, usable.detail(f"Default - Wiki-CC: {detail}"))


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
def pretraining_helps(task: str, noise: Optional[Noise] = None) -> Callable[[Values], Verdict]:
    def rule(values: Values) -> Verdict:
        langs = common(values, task, "default", CONTROL)
        d = estimate(values, noise, row_terms(task, langs, (1, "default"), (-1, CONTROL)))
        default, control = task_mean(values, "default", task, langs), task_mean(values, CONTROL, task, langs)
        return decide_unless_tied(d, f"Default {default:.1f}, No pretraining {control:.1f} "
                                     f"({d.beside()}){only(values, task, langs)}")
    return rule


def beats_baseline_on_english(task: str) -> Callable[[EnglishScores], Verdict]:
    def rule(english: EnglishScores) -> Verdict:
        values = english.values
        langs = common(values, task, "default", BASELINES)
        d = estimate(values, english.noise, row_terms(task, langs, (1, "default"), (-1, BASELINES)))
        tuned, floor = task_mean(values, "default", task, langs), task_mean(values, BASELINES, task, langs)
        names = ", ".join(english.baselines.get(task, [])) or "?"
        return decide_unless_tied(d, f"Default {tuned:.1f}, best trivial baseline {floor:.1f} ({names}; "
                                     f"{d.beside()}) on the English test set of the "
                                     f"{', '.join(f'en-{l}' for l in langs)} model(s)")
    return rule


def decide_unless_tied(difference: Estimate, detail: str) -> Verdict:
    """Holds when Default leads the reference, fails when it trails, by at least TIE points and by
    more than the noise; Inconclusive otherwise, saying which."""
    if abs(difference.value) < TIE:
        raise Inconclusive(f"{detail}: closer than {TIE:g} point ({figure(abs(difference.value), TIE, 2, '')}), a tie")
    return settle([("the difference", judge(difference))], detail)


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


def findings(ours: Values, paper: Values, english: Optional[EnglishScores] = None,
             noise: Optional[Noise] = None) -> list[Finding]:
    """The paper's claims on both sets of numbers, then the checks against the references (xlt only).

    On xlt's numbers the claims skip every cell whose model did not learn English (:func:`unlearned`)
    and decide only beyond ``noise`` (the zero-shot cells' seed spreads; None: exact numbers); the
    paper prints no English scores and no spreads, so its numbers are taken as they are."""
    gaps = unlearned(english) if english else {}
    frozen = english.frozen_more if english else {}
    checked = []
    for claim, rule, rows in CLAIMS:
        theirs = check(claim, rule, paper, None)
        checked.append(replace(check(claim, gated(partial(rule, noise=noise), gaps, rows, frozen), ours, None),
                               paper_verdict=theirs.verdict, paper_detail=theirs.detail))
    checked.append(check(CONTROL_CLAIM, gated(partial(sep_emb_l16_collapses_vs_control, noise=noise), gaps,
                                              ("sep-emb+l1-6",), frozen), ours, None))
    checked += [check(f"Pretraining beats no pretraining on {title}: Default > No pretraining, zero-shot "
                      "(mean over languages).", pretraining_helps(task, noise), ours, None) for task, title in TASKS]
    checked += [check(f"Fine-tuning beats the best trivial baseline on English {title}: Default > the best "
                      "model-free baseline on the English test set.", beats_baseline_on_english(task),
                      english or EnglishScores(), None) for task, title in TASKS]
    return checked
