"""Table 1's numbers as the findings read them: the rows, tasks and floors, the languages two rows
share, and the tasks on which Default transfers enough for rows to be compared
(:mod:`xlt.report.table1_findings` decides the claims on them).

Numbers are ``values[row][task][lang]`` (None where a cell is missing); a comparison of two rows
uses the languages where both have a score, and is inconclusive only when there is none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from xlt.report.findings import Inconclusive, require
from xlt.report.noise import Terms, add, mean_terms

TASKS = (("xnli", "XNLI (acc)"), ("ner", "NER (F1)"), ("parse", "Parsing (LAS)"))
# Scores of a model that learned nothing: three balanced XNLI classes; no NER span or labelled arc.
CHANCE = {"xnli": 100.0 / 3, "ner": 0.0, "parse": 0.0}
# Below this margin over chance, Default itself does not transfer on a task and comparisons of rows
# on that task are noise: claims are checked on the other tasks.
MIN_MARGIN = 5.0
# Closer than this, Default and a reference row (No pretraining, a baseline) are a tie whatever the
# seeds' spread says: a smaller difference is no finding (the spread is tested besides, noise.py).
TIE = 1.0
# "Within a few points" (No anchors vs Default; the paper's gaps are 1.1, 2.5 and 0.9).
FEW_POINTS = 3.0
CONTROL, BASELINES = "control", "baselines"    # the reference rows' keys (their directories)

# values[row][task][lang] -> score or None
Values = dict[str, dict[str, dict[str, Optional[float]]]]


Cell = tuple[str, str, str]   # (row, task, lang)
Fit = tuple[float, float, int]   # an English dev perplexity, the unigram floor, the step


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


def languages(values: Values, task: str) -> list[str]:
    """Every language of the table on ``task`` (with a score or a gap)."""
    return sorted({l for row in values.values() for l in row.get(task, {})})


def only(values: Values, task: str, langs: list[str]) -> str:
    """' (over fr, zh only)' when a comparison leaves some of the table's languages out."""
    return f" (over {', '.join(langs)} only: the other cells are missing)" if len(langs) < len(languages(values, task)) else ""


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


@dataclass
class Usable:
    """The tasks on which Default transfers (margin over the floor), and notes on those left out:
    Default near the floor, or a task some compared row has no score on (not run)."""

    margins: dict[str, float]
    skipped: list[str] = field(default_factory=list)
    floor: Floor = BY_CHANCE

    def tasks(self) -> list[str]:
        return list(self.margins)

    def common(self, values: Values, task: str, *rows: str) -> Optional[list[str]]:
        """:func:`common` of ``rows``, where Default transfers over those languages too; None, with a
        note, otherwise. A task is usable over all of Default's languages, and a comparison over fewer
        (a row without the language where Default transfers) is noise on the rest. The languages a
        comparison leaves out are named."""
        try:
            langs = common(values, task, *rows)
            gate = [lang for lang in langs if lang in common(values, task, "default", *self.floor.rows())]
        except Inconclusive as reason:
            self.skipped.append(f"left out: {reason}")
            return None
        margin = (task_mean(values, "default", task, gate) - self.floor.value(values, task, gate)) if gate else None
        if margin is None or margin < MIN_MARGIN:
            why = (f"no Default score beside {self.floor.name}" if margin is None else
                   f"Default less than {MIN_MARGIN:g} points above {self.floor.name}")
            self.skipped.append(f"left out: {why} on {task} over {', '.join(langs)}"
                                + ("" if margin is None else f" ({figure(margin, MIN_MARGIN)})")
                                + f", the languages {', '.join(rows)} have")
            return None
        self.name_left_out(values, task, langs, rows)
        return langs

    def name_left_out(self, values: Values, task: str, langs: Sequence[str], rows: Sequence[str]) -> None:
        """Note the table's languages that a comparison of ``rows`` over ``langs`` leaves out."""
        if len(langs) < len(every := languages(values, task)):
            note = (f"{task} over {', '.join(langs)} only ({', '.join(sorted(set(every) - set(langs)))}: a cell of "
                    f"{', '.join(rows)} missing or left out)")
            self.skipped += [note] if note not in self.skipped else []

    def require(self, compared: Sequence[Any]) -> None:
        """Inconclusive when a rule found nothing to compare on any usable task."""
        if not compared:
            raise Inconclusive("; ".join(self.skipped) or "nothing to compare")

    def detail(self, text: str) -> str:
        return text + (f" ({'; '.join(self.skipped)})" if self.skipped else "")


def figure(x: float, threshold: float, digits: int = 1, sign: str = "+") -> str:
    """``x`` with ``digits`` decimals, or more (up to 3) where that would print it as the
    ``threshold`` it was judged against from one side (4.96 "below 5" is not "+5.0")."""
    while digits < 3 and round(x, digits) == threshold != x:
        digits += 1
    return f"{x:{sign}.{digits}f}"


def usable_tasks(margins: dict[str, float], reference: str, needs_all: bool = False,
                 missing: Sequence[str] = (), floor: Floor = BY_CHANCE) -> Usable:
    """The tasks where Default's margin over ``reference`` is at least MIN_MARGIN: on the others every
    row is near the reference and differences are noise, so a claim is checked on the usable tasks
    only (all of them with ``needs_all``); Inconclusive when none (or not all) are usable. ``missing``:
    tasks without the scores for a margin (not run), left out with a note."""
    weak = [f"{task} {figure(m, MIN_MARGIN)}" for task, m in margins.items() if m < MIN_MARGIN]
    skipped = [f"left out: Default less than {MIN_MARGIN:g} points above {reference} on {', '.join(weak)}"] if weak else []
    skipped += [f"left out: no {', '.join(missing)} results"] if missing else []
    usable = {task: m for task, m in margins.items() if m >= MIN_MARGIN}
    if needs_all and missing:
        raise Inconclusive(f"no {', '.join(missing)} results")
    if not usable or (needs_all and weak):
        raise Inconclusive(f"Default is less than {MIN_MARGIN:g} points above {reference} ({', '.join(weak)}), so "
                           "differences between rows are noise" + (f" ({skipped[-1]})" if missing else ""))
    return Usable(usable, skipped, floor)



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
    return usable_tasks(margins, floor.name, needs_all, missing, floor)


def row_terms(task: str, langs: list[str], *rows: tuple[float, str]) -> Terms:
    """sum of coefficient x the row's mean over ``langs`` (one task) as terms."""
    return add(*(mean_terms(row, task, langs, c) for c, row in rows))


def relative_transfer(values: Values, english: Values, row: str, task: str, lang: str) -> float:
    """``row``'s relative transfer into ``lang`` on ``task``: (zero-shot - best trivial baseline on ``lang``) /
    (English - best trivial baseline on English), each baseline the BASELINES row's; Inconclusive naming
    what is missing, or when the row's English score is within MIN_MARGIN of the baseline's."""
    def score(numbers: Values, of: str) -> Optional[float]:
        return numbers.get(of, {}).get(task, {}).get(lang)

    target = require(score(values, row), f"{row}'s zero-shot {task} score")
    source = require(score(english, row), f"{row}'s English {task} score")
    floor_target = require(score(values, BASELINES), f"the best trivial baseline's {lang} {task} score")
    floor_source = require(score(english, BASELINES), f"the best trivial baseline's English {task} score")
    # A smaller English margin makes the ratio noise over noise (XNLI at chance: 34.2 / 33.3 -> 1.0).
    if source - floor_source < MIN_MARGIN:
        raise Inconclusive(f"English {source:.1f} is not {MIN_MARGIN:g} points above the best trivial baseline's "
                           f"{floor_source:.1f}: too little English skill to measure its transfer")
    return (target - floor_target) / (source - floor_source)
