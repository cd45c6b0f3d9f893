"""Findings: a paper's claim, checked on xlt's numbers and on the paper's own.

Each check is a function of one set of numbers (xlt's or the paper's) that returns a
:class:`Verdict`; :func:`check` runs it on both, so a report says whether the claim holds at this
scale *and* shows that the check, as written, holds on the paper's numbers. A claim that the numbers
cannot decide (a missing cell, or a baseline that does not transfer above chance, which makes every
comparison noise) is ``inconclusive`` with the reason, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, TypeVar

HOLDS, FAILS, INCONCLUSIVE = "holds", "does not hold", "inconclusive"
Numbers = TypeVar("Numbers")


@dataclass
class Verdict:
    verdict: str   # HOLDS, FAILS or INCONCLUSIVE
    detail: str    # the numbers behind it


class Inconclusive(Exception):
    """Raised inside a check when its numbers cannot decide the claim."""


@dataclass
class Finding:
    claim: str
    verdict: str
    detail: str
    paper_verdict: str
    paper_detail: str


def decide(condition: bool, detail: str) -> Verdict:
    return Verdict(HOLDS if condition else FAILS, detail)


def require(value: Optional[float], what: str) -> float:
    """The value, or Inconclusive naming what is missing."""
    if value is None:
        raise Inconclusive(f"{what} is missing")
    return value


def check(claim: str, rule: Callable[[Numbers], Verdict], ours: Numbers, paper: Optional[Numbers]) -> Finding:
    """Apply ``rule`` to xlt's numbers and to the paper's (``None``: the paper prints none)."""

    def run(numbers) -> Verdict:
        if numbers is None:
            return Verdict(INCONCLUSIVE, "no numbers in the paper")
        try:
            return rule(numbers)
        except Inconclusive as reason:
            return Verdict(INCONCLUSIVE, f"{reason}")

    mine, theirs = run(ours), run(paper)
    return Finding(claim, mine.verdict, mine.detail, theirs.verdict, theirs.detail)
