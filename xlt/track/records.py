"""``TRACKDIR/records.jsonl``: one JSON object per (run, snapshot, measure, lang, layer), appended.

The format is shared with ``xlt report dynamics`` (docs/cron.md lists the fields): ``run`` (as given),
``label``, ``snapshot`` (``step-N`` or ``random``), ``step`` (null for random), ``measure``, ``lang``,
``layer`` (0 = embeddings, null where none), ``value``, ``bound`` (the random encoder's value of the
same measure, language and layer; dev_ppl: the unigram perplexity; null where none), ``higher_is_better``,
``seconds`` (what computing the measure took) and ``run_id`` (which run at that path; null for a
transformers Trainer's folders and for records written before it existed). The random encoder's own records carry no bound
but dev_ppl's unigram one.

Writers never rewrite the file: the records of one (snapshot, measure) go out in ONE ``write`` on a
descriptor opened with O_APPEND, so concurrent trackers never interleave and a killed one leaves a
measure either whole or absent (which the next invocation computes).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from typing import Iterable, Optional

from xlt.utils.errors import XltError
from xlt.utils.shapes import require_fields
from xlt.utils.outputs import cannot_write

RECORDS = "records.jsonl"


@dataclass
class Record:
    run: str
    label: str
    snapshot: str
    step: Optional[int]
    measure: str
    lang: Optional[str]
    layer: Optional[int]
    value: Optional[float]
    bound: Optional[float]
    higher_is_better: bool
    seconds: float
    run_id: Optional[str] = None   # the run's identity (run_files.run_identity): another run at the same path differs


def run_key(run: str) -> str:
    """What identifies a run across invocations given other spellings of its path."""
    return os.path.realpath(run)


def _finite(value: Optional[float]) -> Optional[float]:
    # JSON has no NaN: a value that does not exist (an empty split) is null.
    return None if value is None or not math.isfinite(value) else float(value)


def append_records(path: str, records: Iterable[Record]) -> None:
    """Append ``records`` as whole lines in one write (see the module docstring)."""
    lines = [json.dumps({**asdict(r), "value": _finite(r.value), "bound": _finite(r.bound),
                         "seconds": round(r.seconds, 3)}) + "\n" for r in records]
    if not lines:
        return
    data = "".join(lines).encode("utf-8")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            written = os.write(fd, data)
            if written < len(data):  # a full disk: the rest of the line, so that no reader trips on half of one
                os.write(fd, data[written:])
        finally:
            os.close(fd)
    except OSError as e:
        raise cannot_write(path, e) from None


# What a record is found by (RecordIndex) and what its bound is kept under, with their kinds.
RECORD_KEYS = {"run": str, "snapshot": str, "measure": str}
RECORD_OPTIONAL = {"lang": (str, None), "layer": (int, None), "value": (float, None), "bound": (float, None),
                   "run_id": (str, None)}


def read_records(path: str) -> list[dict]:
    """Every whole record of the file (a line cut by a full disk is skipped: its measure is redone)."""
    if not os.path.exists(path):
        return []
    out = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.endswith("\n"):
                continue  # being written, or cut
            try:
                record = json.loads(line)
            except ValueError:
                continue
            out.append(require_fields(record, RECORD_KEYS, path, "a tracking record", number, RECORD_OPTIONAL))
    return out


class RecordIndex:
    """What the records file says is done: (run, snapshot, measure) and each bound's value."""

    def __init__(self, path: str):
        self.path = path
        self.refresh()

    def refresh(self) -> None:
        self.done: set[tuple[str, str, str]] = set()
        self.bounds: dict[tuple[str, str, Optional[str], Optional[int]], Optional[float]] = {}
        self.run_ids: dict[str, set[str]] = {}
        for r in read_records(self.path):
            key = run_key(r["run"])
            self.done.add((key, r["snapshot"], r["measure"]))
            if r.get("run_id"):
                self.run_ids.setdefault(key, set()).add(r["run_id"])
            if r["snapshot"] == "random":
                self.bounds[key, r["measure"], r.get("lang"), r.get("layer")] = r.get("value")

    def check_run(self, run: str, run_id: Optional[str]) -> None:
        """XltError when the records of ``run``'s path are another run's (one pretrained again there
        since): they would be taken for this one's, snapshot by snapshot name."""
        if run_id is not None and self.run_ids.get(run_key(run), set()) - {run_id}:
            raise XltError(f"its records of {run} are of another run pretrained at that path before (its config.json "
                           "changed since); use a new tracking directory", self.path)

    def is_done(self, run: str, snapshot: str, measure: str) -> bool:
        return (run_key(run), snapshot, measure) in self.done

    def bound(self, run: str, measure: str, lang: Optional[str], layer: Optional[int]) -> Optional[float]:
        return self.bounds.get((run_key(run), measure, lang, layer))
