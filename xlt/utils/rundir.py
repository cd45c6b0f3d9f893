"""Run directories that describe themselves, and the locks that keep two processes out of one.

A run directory holds ``config.json`` (the resolved configuration, the command line, library
versions, git revision and input checksums), ``metrics.jsonl`` (one JSON object per line, appended
with a single ``write`` so a line is never torn) and checkpoints. Running the same command again on
the directory resumes it; a different configuration is refused rather than mixed in.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator, Optional

from xlt import __version__
from xlt.utils import log
from xlt.utils.errors import PathLike, XltError
from xlt.utils.outputs import atomic_output, cannot_write, write_json
from xlt.utils.shapes import ListOf, require_fields
from xlt.utils.textio import read_json


def environment(device: Optional[Any] = None) -> dict[str, Any]:
    """Versions, revision and processor: enough to tell two runs' software apart, and why two runs of
    the same software on the same inputs differ. A CPU run is bit-reproducible on one kind of CPU
    only: another kind takes other floating-point kernels (AVX-512 or AVX2 vector code, oneDNN and
    MKL paths), so its results differ in the last digits and, through training, beyond them.
    ``device``, the torch device the work ran on (``--device auto`` resolved), is recorded with it."""
    import numpy
    import torch

    return {
        "xlt": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        # the GPUs this process could see, whether or not its work ran on one ("device" says)
        "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        if torch.cuda.is_available() else [],
        **({"device": str(device)} if device is not None else {}),
        "numpy": numpy.__version__,
        "platform": platform.platform(),
        "cpu": cpu_model(),
        # the vector code torch's own kernels run: the CPU's best, or what ATEN_CPU_CAPABILITY forced
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "git_revision": git_revision(),
    }


def cpu_model() -> str:
    """The processor's name as the OS gives it, with its family and model numbers (a virtual
    machine may name only the brand, "AMD EPYC"): Linux's /proc/cpuinfo; elsewhere, or without a
    name there, the architecture (``platform.processor()`` or ``platform.machine()``)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break   # the first processor's block is enough
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or platform.machine()
    numbers = [f"{key} {fields[key]}" for key in ("cpu family", "model") if fields.get(key)]
    return f"{name} ({', '.join(numbers)})" if numbers and fields.get("model name") else name


def git_revision() -> Optional[str]:
    """The xlt checkout's commit (with ``-dirty`` when modified), or None outside a checkout."""
    root = Path(__file__).resolve().parents[2]
    try:
        rev = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return rev.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.TimeoutExpired):
        return None


def command_line() -> list[str]:
    return ["xlt" if os.path.basename(sys.argv[0]) in ("xlt", "__main__.py") else sys.argv[0], *sys.argv[1:]]


@contextlib.contextmanager
def exclusive_lock(path: PathLike, what: str = "run directory", wait: Optional[str] = None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if needed). Held by another process: an
    XltError, or with ``wait`` (a log line saying what is awaited) wait for it.

    The kernel drops the lock when the process dies, so a killed run never leaves a stale lock.
    """
    path = os.fspath(path)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if wait is None:
                raise XltError(f"another process is using this {what}", os.path.dirname(path) or path) from None
            log.info(wait)
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())   # who holds it, for a person looking
        except OSError as e:
            raise cannot_write(path, e) from None
        yield
    finally:
        os.close(fd)


def held_elsewhere(path: PathLike) -> bool:
    """Whether another process holds :func:`exclusive_lock` on ``path`` now. A probe: it takes the lock
    and drops it at once, so a process asking in that instant finds it busy, as with any holder."""
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)   # which drops the lock
    return False


class MetricsLog:
    """``metrics.jsonl``: one JSON object per line, each appended with one ``write`` call."""

    def __init__(self, path: PathLike):
        self.path = os.fspath(path)

    def append(self, record: dict[str, Any]) -> None:
        line = (json.dumps(record, sort_keys=False) + "\n").encode("utf-8")
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                end = os.fstat(fd).st_size
                try:
                    written = os.write(fd, line)
                    while written < len(line):  # a full disk takes part of the line; the rest says why
                        written += os.write(fd, line[written:])
                except OSError:
                    os.ftruncate(fd, end)  # no torn line for a reader, or the resume, to trip on
                    raise
            finally:
                os.close(fd)
        except OSError as e:
            raise cannot_write(self.path, e) from None

    def records(self) -> list[dict[str, Any]]:
        """The records; a last line torn by a kill (no newline, not JSON) is dropped, since the resume
        writes it again; any other line that is not a JSON object is an error naming it."""
        if not os.path.exists(self.path):
            return []
        with open(self.path, encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
        out = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                if number == len(lines):
                    continue
                record = None
            if not isinstance(record, dict):
                raise XltError("not a JSON record (an object per line)", self.path, number)
            out.append(record)
        return out

    def truncate_after(self, step: int) -> None:
        """Drop records past ``step``: a resumed run rewrites them, so none is counted twice."""
        records = self.records()
        kept = [r for r in records if r.get("step", 0) <= step]
        if len(kept) == len(records):
            return
        with atomic_output(self.path) as f:
            for r in kept:
                f.write(json.dumps(r) + "\n")


def read_run_description(path: PathLike) -> dict[str, Any]:
    """A run directory's ``config.json`` with the shape its readers rely on (its settings an object,
    its inputs an object or null, its resumes a list of objects), or one error line naming it."""
    return require_fields(read_json(path, "run description"), {"config": dict}, path, "a run description",
                          optional={"inputs": (dict, None), "resumes": ListOf(dict)})


def check_same_config(run_dir: PathLike, resolved: dict[str, Any], mutable: tuple[str, ...] = (),
                      defaults: Optional[dict[str, Any]] = None) -> bool:
    """Compare with an existing run's ``config.json``; return True if there is one to resume.

    A setting the earlier run's description lacks (one added to xlt since) counts as its value in
    ``defaults``: a run started before the setting existed computed exactly that.

    Raises:
        XltError: when the directory holds a run with different settings (only ``mutable`` keys,
            such as the number of steps, may change between invocations).
    """
    path = os.path.join(os.fspath(run_dir), "config.json")
    if not os.path.exists(path):
        return False
    previous = {**(defaults or {}), **read_run_description(path)["config"]}
    differing = sorted(k for k in set(previous) | set(resolved)
                       if k not in mutable and previous.get(k) != resolved.get(k))
    if differing:
        shown = ", ".join(f"{k}: {previous.get(k)!r} -> {resolved.get(k)!r}" for k in differing[:3])
        raise XltError(f"run directory holds a run with other settings ({shown}); use a new directory", path)
    return True


def write_run_description(run_dir: PathLike, resolved: dict[str, Any], inputs: dict[str, Any],
                          resumed_at: Optional[dict[str, int]] = None, processes: int = 1,
                          device: Optional[Any] = None) -> None:
    """Write ``config.json``: the resolved config, the command line, versions, the number of processes
    (torchrun's: per-process settings such as the batch size multiply by it) and input checksums;
    for a resumed run (``resumed_at``, e.g. ``{"step": 7}``) see :func:`record_resume`."""
    path = os.path.join(os.fspath(run_dir), "config.json")
    if resumed_at is not None and os.path.exists(path):
        record_resume(run_dir, resumed_at, resolved, inputs, device)
    else:
        write_json(path, {"config": resolved, "command": command_line(), "environment": environment(device),
                          "processes": processes, "inputs": inputs})


def record_resume(run_dir: PathLike, at: dict[str, int], resolved: Optional[dict[str, Any]] = None,
                  inputs: Optional[dict[str, Any]] = None, device: Optional[Any] = None) -> None:
    """Add this attempt to ``config.json``'s ``resumes`` (where it picked up, its command, environment
    and the settings it changed), keeping the command and environment the run started with: a run
    carried on from another machine or CPU kind is bit-reproducible on neither, and says so."""
    path = os.path.join(os.fspath(run_dir), "config.json")
    description = read_run_description(path)
    before = description["config"]
    resolved = before if resolved is None else resolved
    # a key the description lacks is a setting added to xlt since, at its default (the resume was let
    # through on that): not a change
    changed = {k: [before[k], v] for k, v in resolved.items() if k in before and before[k] != v}
    resume = {**at, "command": command_line(), "environment": environment(device), "changed": changed}
    description.update(config=resolved, resumes=description.get("resumes", []) + [resume])
    if inputs is not None:
        description["inputs"] = inputs
    write_json(path, description)
