"""The tracking records that ``xlt track`` appends (``records.jsonl``), read into one curve per run,
measure, language and layer, for ``xlt report dynamics``.

A line is one measure of one snapshot (docs/dynamics.md names the fields); fields this module does
not know are ignored, so ``xlt track`` can add some without breaking the report. The random
encoder's own records (snapshot ``random``, step null) give a curve's bound where a step's record
carries none. Kept free of numpy and matplotlib: ``xlt report dynamics --help`` imports
:class:`EmergenceRule` from here.
"""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from xlt.utils import log
from xlt.utils.errors import XltError, require_file
from xlt.utils.typed import help_field

RANDOM = "random"   # the snapshot name of the random (untrained) encoder's records
# The measures xlt track writes, in the order the report lists them (and breaks ties in): the
# language model first, then alignment from the embeddings up, then transfer. Others go last, by name.
MEASURES = ("dev_ppl", "cka", "word_p1", "word_mrr", "sentence_p1", "lang_id", "ner_f1")


@dataclass
class EmergenceRule:
    """When a curve counts as clearly above its random-encoder bound (docs/dynamics.md)."""

    fraction: float = help_field("A clear margin over the bound is at least this fraction of the largest margin the "
                                 "curve reaches.", metavar="X", default=0.2)
    floor: float = help_field("A clear margin is also at least this fraction of the measure's own magnitude (the largest |value| "
                              "or |bound| of the curve), so that noise around the bound never counts.",
                              metavar="X", default=0.02)
    persist: int = help_field("Snapshots in a row that must be clear (2: the snapshot and the next; a blip is not "
                              "emergence).", metavar="N", default=2)

    def __post_init__(self) -> None:
        if not 0 < self.fraction < 1:
            raise XltError(f"--fraction must lie between 0 and 1, got {self.fraction}")
        if not 0 <= self.floor < 1:
            raise XltError(f"--floor must lie in [0, 1), got {self.floor}")
        if self.persist < 1:
            raise XltError(f"--persist must be at least 1, got {self.persist}")


@dataclass
class Point:
    snapshot: str
    step: int
    value: float
    bound: Optional[float]   # the record's own bound; Curve.bound_at falls back on the random snapshot


@dataclass
class Curve:
    """One measure of one run (for one language and one layer) against pretraining step."""

    measure: str
    lang: Optional[str]
    layer: Optional[int]
    higher_is_better: bool
    points: list[Point] = field(default_factory=list)   # sorted by step once read
    random: Optional[float] = None                      # the value of the random snapshot's record

    def bound_at(self, point: Point) -> Optional[float]:
        return point.bound if point.bound is not None else self.random

    def bounds(self) -> list[float]:
        """The bound of each point that has one (the random snapshot's value only where a point lacks its own:
        dev_ppl's random encoder is not its bound, the unigram perplexity is)."""
        return [b for b in (self.bound_at(p) for p in self.points) if b is not None]


@dataclass
class Run:
    run: str                 # the run directory as given to xlt track: the run's identity
    label: str               # its display name
    curves: list[Curve] = field(default_factory=list)


# Field -> (types accepted, may be null). bool is an int to Python, hence the checks in _field.
_REQUIRED = {"run": (str, False), "snapshot": (str, False), "step": (int, True), "measure": (str, False),
             "value": ((int, float), True), "higher_is_better": (bool, False)}
_OPTIONAL = {"label": (str, True), "lang": (str, True), "layer": (int, True), "bound": ((int, float), True)}


def _field(record: dict, name: str, types: Any, nullable: bool, required: bool, path: str, lineno: int) -> Any:
    if name not in record:
        if required:
            raise XltError(f"not a tracking record: no {name!r} field", path, lineno)
        return None
    value = record[name]
    if value is None and nullable:
        return None
    numeric = types in (int, (int, float))
    if not isinstance(value, types) or (numeric and isinstance(value, bool)):
        raise XltError(f"not a tracking record: {name!r} is {value!r}", path, lineno)
    return value


def run_key(run: str) -> str:
    """What identifies a run across records: ``runs/x/`` and ``./runs/x`` are one (paths are not resolved:
    the report may run where the runs are not)."""
    return os.path.normpath(run)


def default_label(run: str) -> str:
    """The run directory's last two parts, as xlt track labels a run given no --label."""
    parts = [p for p in run.replace(os.sep, "/").split("/") if p not in ("", ".")]
    return "/".join(parts[-2:]) or run


def _parse(line: str, path: str, lineno: int) -> dict:
    try:
        record = json.loads(line)
    except ValueError as e:
        raise XltError(f"not a JSON line ({e})", path, lineno) from None
    if not isinstance(record, dict):
        raise XltError("not a tracking record: a JSON object per line expected", path, lineno)
    parsed = {name: _field(record, name, t, null, True, path, lineno) for name, (t, null) in _REQUIRED.items()}
    parsed.update({name: _field(record, name, t, null, False, path, lineno) for name, (t, null) in _OPTIONAL.items()})
    if parsed["snapshot"] == RANDOM:
        parsed["step"] = None
    elif parsed["step"] is None or parsed["step"] < 0:
        raise XltError(f"not a tracking record: snapshot {parsed['snapshot']!r} has step {parsed['step']!r}",
                       path, lineno)
    if parsed["value"] is not None and not math.isfinite(parsed["value"]):
        parsed["value"] = None   # a failed measure (NaN) is a gap in the curve, as null is
    if parsed["bound"] is not None and not math.isfinite(parsed["bound"]):
        parsed["bound"] = None
    if parsed["label"] is None:
        parsed["label"] = default_label(parsed["run"])
    return parsed


def _lines(path: str) -> Iterator[tuple[int, str]]:
    """The numbered non-blank lines of a records file. A last line without its newline is one xlt track is
    appending right now (or a full disk cut): left out when it is not whole JSON yet, never an error, so
    that the report can run while tracking does."""
    require_file(path, "records file")
    if path == "-":
        data = sys.stdin.buffer.read()
    else:
        with open(path, "rb") as f:
            data = f.read()
    lines = data.split(b"\n")
    unfinished = lines.pop()   # b"" when the file ends with its newline
    for lineno, raw in enumerate(lines, start=1):
        if raw.strip():
            yield lineno, _decode(raw, path, lineno)
    if unfinished.strip():
        text = _decode(unfinished, path, len(lines) + 1)
        try:
            json.loads(text)
        except ValueError:
            log.info(f"xlt report dynamics: {path}:{len(lines) + 1}: an unfinished last line (being written?) "
                     "is left out")
            return
        yield len(lines) + 1, text


def _decode(raw: bytes, path: str, lineno: int) -> str:
    try:
        return raw.decode("utf-8").rstrip("\r")
    except UnicodeDecodeError as e:
        raise XltError(f"not valid UTF-8 (byte {e.start + 1} of the line)", path, lineno) from None


def read_records(paths: list[str]) -> list[Run]:
    """Every record of ``paths`` (in order), as runs (in order of first appearance) of curves.

    A record repeating an earlier one's run, snapshot, measure, lang and layer replaces it (a snapshot
    evaluated again); the count is said once on stderr.
    """
    if not paths:
        raise XltError("no records file given (--records FILE)")
    latest: dict[tuple, tuple[dict, str, int]] = {}
    duplicates, first_duplicate = 0, ""
    for path in paths:
        for lineno, line in _lines(path):
            record = _parse(line, path, lineno)
            key = (run_key(record["run"]), record["snapshot"], record["measure"], record["lang"], record["layer"])
            if key in latest:
                duplicates += 1
                first_duplicate = first_duplicate or f"{path}:{lineno}"
                del latest[key]   # re-inserted below: the last record's place is the order that counts
            latest[key] = (record, path, lineno)
    if not latest:
        raise XltError("no tracking records in " + ", ".join(paths) + " (has xlt track run?)")
    if duplicates:
        log.info(f"xlt report dynamics: {duplicates} record(s) repeat an earlier one's run, snapshot, measure, lang "
                 f"and layer (first at {first_duplicate}); the last of each is kept")
    return _runs(latest, paths)


def _runs(latest: dict[tuple, tuple[dict, str, int]], paths: list[str]) -> list[Run]:
    runs: dict[str, Run] = {}
    curves: dict[tuple, Curve] = {}
    steps: dict[tuple, str] = {}   # (curve key, step) -> the snapshot holding it
    # Runs in order of their first record, files as given: the user's order of --records is the legend's.
    first_seen = sorted(latest.values(), key=lambda item: (paths.index(item[1]), item[2]))
    for record, path, lineno in first_seen:
        run = runs.setdefault(run_key(record["run"]), Run(record["run"], record["label"]))
        run.label = record["label"]   # the last record's: a run tracked again under a new --label takes it
        key = (run.run, record["measure"], record["lang"], record["layer"])
        curve = curves.get(key)
        if curve is None:
            curve = curves[key] = Curve(record["measure"], record["lang"], record["layer"], record["higher_is_better"])
            run.curves.append(curve)
        elif curve.higher_is_better != record["higher_is_better"]:
            raise XltError(f"{record['measure']} of {record['run']} is higher_is_better "
                           f"{curve.higher_is_better} in an earlier record and {record['higher_is_better']} here",
                           path, lineno)
        if record["value"] is None:
            continue
        if record["snapshot"] == RANDOM:
            curve.random = float(record["value"])
            continue
        other = steps.setdefault((key, record["step"]), record["snapshot"])
        if other != record["snapshot"]:
            raise XltError(f"snapshots {other!r} and {record['snapshot']!r} of {record['run']} both claim step "
                           f"{record['step']}", path, lineno)
        bound = None if record["bound"] is None else float(record["bound"])
        curve.points.append(Point(record["snapshot"], record["step"], float(record["value"]), bound))
    labels: dict[str, int] = {}
    for run in runs.values():
        labels[run.label] = labels.get(run.label, 0) + 1
    for run in runs.values():
        if labels[run.label] > 1:   # two runs, one label: the legend must still tell them apart
            run.label = f"{run.label} ({run.run})"
        run.curves = [c for c in run.curves if c.points]
        for curve in run.curves:
            curve.points.sort(key=lambda p: p.step)
        run.curves.sort(key=curve_order)
    return [run for run in runs.values() if run.curves]


def curve_order(curve: Curve) -> tuple:
    """Measures in :data:`MEASURES` order, then by language (none first) and layer (none first)."""
    rank = MEASURES.index(curve.measure) if curve.measure in MEASURES else len(MEASURES)
    return (rank, curve.measure, curve.lang is not None, curve.lang or "", curve.layer is not None, curve.layer or 0)
