"""Seed noise of a table's cells, and verdicts that stand clear of it.

A cell is a mean over fine-tuning seeds (``xlt finetune``'s summary: mean, sample std, n). A finding
compares a linear combination of cells with a threshold: a difference of two rows, a mean over
languages or tasks, a share of a margin. The seeds of different cells are independent runs, so the
combination ``sum_i c_i x_i`` has the standard error::

    SE = sqrt(sum_i c_i^2 sd_i^2 / n_i)      two cells (+1, -1): SE_diff = sqrt(sd_a^2/n_a + sd_b^2/n_b)

**The test**: a comparison is decided (holds, or fails) only where it stands more than 2 SE from its
threshold (about a two-sided 95 % z test; with three seeds a side the SE is itself a rough estimate,
and Student's t would ask for 4.3 SE); closer, it is inconclusive, and the text prints the margin and
the noise. Trivial baselines and chance are exact (no training, no seed). Numbers given without any
noise (the paper's, printed as means of its runs) are compared as they are.

**One seed on a side** gives no spread. A one-seed cell takes the noise floor measured for its
task (:data:`SINGLE_SEED_SD`), and where none is measured its comparisons are inconclusive ("no noise
estimate"), never decided on a guess. The one measurement: the same ``make reproduce-table1`` on two
CPU kinds (AMD EPYC, Intel Xeon with AMX) gave Default's zero-shot French NER 28.6 and 21.8 F1 and its
English NER 46.9 and 48.3 (issue 28). Another CPU kind changes the floating-point path from the first
step on, which perturbs the training as another seed does, so that spread is read as a one-seed
cell's noise: its sd is taken as the whole spread (6.8 zero-shot, 1.4 English). Two draws differ by
sqrt(2) sd on average, so this is the larger reading, as one pair of draws warrants. Parsing and XNLI
have no such measurement: give them seeds (PARSE_SEEDS, XNLI_SEEDS) to decide on them.

**Pretraining seeds.** Fine-tuning seeds of one model say nothing of how far another pretraining
seed of the same row lands (on Fake-English a second seed moved Default's zero-shot NER from 20.0 to
7.6 F1 while its fine-tuning seeds spread by 1). Where some row of a task was pretrained with several
seeds, a pretrained cell is the mean of its models' scores (each a model's mean over its fine-tuning
seeds), and its variance is ``s² / k`` for its k models, where ``s²`` is the variance of one model's
score pooled over the rows that have several (one-way ANOVA's within-group mean square), or the
row's own variance over its models where that is larger: rows do not vary alike (one near zero F1
cannot spread as far as Default), and one row's two seeds are a 1-degree-of-freedom guess, so the
larger of the two is taken. No cell counts less than its models' own fine-tuning noise (one model's
seeds spread 10 F1 apart are noisier than the pool of others' models can say, and two models that
agree by chance are not an exact number). ``s²`` holds the
fine-tuning spread too, as each model's score carries it. One model's cells on two tasks share its
draw, so a combination over tasks counts their covariance: the two tasks' correlation over models,
pooled over the rows with models scored on both (or, where they give it fewer than
:data:`~xlt.report.table1_cells.MIN_CORRELATION_DF` degrees of freedom, the bound that makes the
combination noisier, ±1), times the cells' sds and their share of common models.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

from xlt.report.findings import Inconclusive, Verdict, decide

Cell = tuple[str, str, str]            # (row, task, lang)
Terms = dict[Cell, float]              # cell -> its coefficient in a linear combination
Values = dict[str, dict[str, dict[str, Optional[float]]]]   # values[row][task][lang]

# A one-seed cell's sd per task (see the module docstring): zero-shot cells, then English (source) ones.
SINGLE_SEED_SD = {"ner": 6.8}          # Default en-fr zero-shot NER: 28.6 (AMD EPYC) vs 21.8 (Intel Xeon)
SINGLE_SEED_SD_ENGLISH = {"ner": 1.4}  # the same models' English NER: 46.9 vs 48.3
SE_MULTIPLE = 2.0


@dataclass(frozen=True)
class Spread:
    """A cell's fine-tuning seeds: the sample std of their scores (None for one seed) and how many;
    ``models``: the pretraining seeds the cell is the mean over, and ``pretraining_sd``: one model's
    sd, pooled over the table's rows with several or the row's own where larger (None: not
    measured, fine-tuning noise only)."""

    sd: Optional[float]
    n: int
    models: int = 1
    pretraining_sd: Optional[float] = None
    seeds: tuple[int, ...] = (0,)      # the pretraining seeds of those models


@dataclass
class Noise:
    """The seed spreads of one table's cells. A cell not listed is exact (a trivial baseline).
    ``single_seed_sd``: task -> the sd a one-seed cell is taken to have (a measured floor)."""

    spreads: dict[Cell, Spread] = field(default_factory=dict)
    single_seed_sd: dict[str, float] = field(default_factory=dict)
    # (lang, task, task), tasks sorted -> the correlation of one model's scores on the two tasks, pooled
    correlations: dict[tuple[str, str, str], float] = field(default_factory=dict)
    # rows whose cells on different languages are one fine-tuning's scores (one model evaluated on every
    # target, Liu et al.'s Table 4): a seed that does well on one does well on all
    shared_runs: frozenset[str] = frozenset()

    def variance(self, cell: Cell) -> tuple[Optional[float], str]:
        """(variance of the cell's mean, what it rests on: "" fine-tuning seeds, "floor" the one-seed
        floor, "pretraining" pretraining seeds); None: no estimate."""
        spread = self.spreads.get(cell)
        if spread is None:
            return 0.0, ""
        if spread.pretraining_sd is not None:
            return spread.pretraining_sd ** 2 / spread.models, "pretraining"
        if spread.models > 1 and spread.sd is not None:
            # a mean over models (the control's, never pooled): its sd is over the models, so is n
            return spread.sd ** 2 / spread.models, "pretraining"
        if spread.n >= 2 and spread.sd is not None:
            return spread.sd ** 2 / spread.n, ""
        floor = self.single_seed_sd.get(cell[1])
        return (None, "") if floor is None else (floor ** 2, "floor")

    def covariance(self, a: Cell, b: Cell, sign: float) -> float:
        """The covariance of two cells' means through the models they share: one row and pair on two
        tasks, both counting pretraining seeds (0 otherwise). ``Cov = shared rho s_a s_b / (k_a k_b)``
        for one model's sds s, k models a cell and the tasks' pooled correlation rho; where rho is
        not measured, the bound that makes the combination noisier (``sign``: that of c_a c_b)."""
        if a[0] == b[0] and a[1] == b[1] and a[2] != b[2] and a[0] in self.shared_runs:
            return self._shared_run_covariance(a, b, sign)
        if a[0] != b[0] or a[2] != b[2] or a[1] == b[1]:
            return 0.0
        sa, sb = self.spreads.get(a), self.spreads.get(b)
        if sa is None or sb is None or sa.pretraining_sd is None or sb.pretraining_sd is None:
            return 0.0
        shared = len(set(sa.seeds) & set(sb.seeds))
        rho = self.correlations.get((a[2], *sorted((a[1], b[1]))), math.copysign(1.0, sign))
        return rho * shared * sa.pretraining_sd * sb.pretraining_sd / (sa.models * sb.models)


    def _shared_run_covariance(self, a: Cell, b: Cell, sign: float) -> float:
        """Two languages' cells of one fine-tuning, their correlation not measured: its bound that makes
        the combination noisier, over the seeds both may share (``sqrt(v_a v_b)`` when they have the
        same seeds: a mean over targets is then as noisy as one target, not sqrt(k) times less)."""
        (va, _), (vb, _) = self.variance(a), self.variance(b)
        sa, sb = self.spreads.get(a), self.spreads.get(b)
        if not va or not vb or sa is None or sb is None:
            return 0.0
        return math.copysign(1.0, sign) * math.sqrt(va * vb * min(sa.n, sb.n) / max(sa.n, sb.n))


@dataclass(frozen=True)
class Estimate:
    """A linear combination of cells: its value and standard error (None: a one-seed cell without a
    floor, named in ``blind``); ``exact``: numbers without noise, compared as they are."""

    value: float
    se: Optional[float] = 0.0
    blind: tuple[str, ...] = ()
    floored: bool = False
    exact: bool = False
    pretraining: bool = False     # some cell's noise is its pretraining seeds' (pooled)

    def digits(self, threshold: float = 0.0, digits: int = 1) -> int:
        """``digits`` decimals, or more (up to 3) where the margin over ``threshold`` and 2 SE would
        print alike (a 5.04 margin against 2 SE 4.96 is not "+5.0, 2 SE 5.0", which reads as a tie)."""
        if self.exact or self.se is None:
            return digits
        margin, bound = abs(self.value - threshold), SE_MULTIPLE * self.se
        while digits < 3 and margin != bound and round(margin, digits) == round(bound, digits):
            digits += 1
        return digits

    def noise(self, digits: int = 1) -> str:
        """'' when exact, else the noise the value is judged against."""
        if self.exact:
            return ""
        if self.se is None:
            return f"no noise estimate: one fine-tuning seed for {', '.join(self.blind)}"
        return (f"{SE_MULTIPLE:g} SE {SE_MULTIPLE * self.se:.{digits}f}"
                + (", pretraining seeds counted" if self.pretraining else "")
                + (", one-seed cells at the cross-CPU floor" if self.floored else ""))

    def beside(self, threshold: float = 0.0, digits: int = 1) -> str:
        """The signed value, then the noise after a comma (for text already in parentheses), each with
        the decimals that tell the margin over ``threshold`` from 2 SE (:meth:`digits`)."""
        d = self.digits(threshold, digits)
        return ", ".join(filter(None, [f"{self.value:+.{d}f}", self.noise(d)]))

    def after(self, label: str, threshold: float = 0.0, digits: int = 1) -> str:
        """``label``, the signed value, then the noise in parentheses (decimals as :meth:`beside`)."""
        d = self.digits(threshold, digits)
        noise = self.noise(d)
        return f"{label}{self.value:+.{d}f}" + (f" ({noise})" if noise else "")


def estimate(values: Values, noise: Optional[Noise], terms: Terms, constant: float = 0.0) -> Estimate:
    """``constant + sum(c * values[cell])`` and its SE under ``noise`` (None: exact numbers)."""
    value = constant + sum(c * values[r][t][l] for (r, t, l), c in terms.items())
    if noise is None:
        return Estimate(value, exact=True)
    total, blind, kinds = 0.0, [], set()
    for cell, c in terms.items():
        if c == 0:
            continue
        variance, kind = noise.variance(cell)
        if variance is None:
            blind.append(f"{cell[0]} {cell[1]} {cell[2]}")
            continue
        total += c * c * variance
        kinds.add(kind)
    if blind:
        return Estimate(value, None, tuple(blind))
    # one model's cells on several tasks share its pretraining draw (a mean over tasks, a drop on one
    # task against another's): their covariance counts, as the textbook's sum_ij c_i c_j Cov_ij
    cells = [cell for cell, c in terms.items() if c]
    shared = sum(2 * terms[a] * terms[b] * noise.covariance(a, b, terms[a] * terms[b])
                 for i, a in enumerate(cells) for b in cells[i + 1:])
    total = total + shared if total + shared >= 0 else total   # pairwise correlations not jointly valid
    return Estimate(value, math.sqrt(total), floored="floor" in kinds, pretraining="pretraining" in kinds)


def pooled_sd(groups: Sequence[Sequence[float]]) -> Optional[float]:
    """The sd of one draw pooled over groups (the within-group mean square of a one-way ANOVA: each
    group's squared deviations from its own mean, over the degrees of freedom); None when no group
    has two draws."""
    squares = sum(sum((x - sum(g) / len(g)) ** 2 for x in g) for g in groups if len(g) >= 2)
    freedom = sum(len(g) - 1 for g in groups if len(g) >= 2)
    return math.sqrt(squares / freedom) if freedom else None


def mean_terms(row: str, task: str, langs: Sequence[str], scale: float = 1.0) -> Terms:
    """``scale`` x the mean of ``row`` over ``langs`` as terms."""
    return {(row, task, lang): scale / len(langs) for lang in langs}


def add(*parts: Terms) -> Terms:
    out: Terms = {}
    for terms in parts:
        for cell, c in terms.items():
            out[cell] = out.get(cell, 0.0) + c
    return out


def judge(est: Estimate, threshold: float = 0.0, strict: bool = True) -> Optional[bool]:
    """Whether ``est`` is above ``threshold`` (``strict``: above, else at least) by more than 2 SE
    (True), below it by more (False), or within the noise (None). Exact numbers: as they are. An SE
    of 0 from seeds is no exact number (three seeds at 0.0 F1 agree because F1 cannot go lower), so
    the rule stands: a margin of 0 is within it."""
    margin = est.value - threshold
    if est.exact:
        return margin > 0 if strict else margin >= 0
    if est.se is None:
        return None
    if margin > SE_MULTIPLE * est.se:
        return True
    if margin < -SE_MULTIPLE * est.se:
        return False
    return None


def judge_tied(est: Estimate, tie: float) -> Optional[bool]:
    """:func:`judge` against zero, and undecided (a tie) closer than ``tie`` whatever the noise."""
    return None if abs(est.value) < tie else judge(est)


def settle(parts: Sequence[tuple[str, Optional[bool]]], detail: str) -> Verdict:
    """A claim on every part (task, chain link): fails when one part is refuted beyond the noise,
    holds when every part stands beyond it; otherwise Inconclusive naming the parts within it."""
    if any(p is False for _, p in parts):
        return decide(False, detail)
    if all(p is True for _, p in parts):
        return decide(True, detail)
    within = [name for name, p in parts if p is None]
    what = f": {', '.join(within)}" if len(parts) > 1 else ""
    raise Inconclusive(f"{detail}; not decided, within {SE_MULTIPLE:g} SE of the threshold or without a noise "
                       f"estimate{what}")
