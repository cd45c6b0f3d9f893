"""Logging and progress bars on stderr.

Data goes to stdout or ``-o FILE``; everything meant for a person goes to stderr through one rich
console. Progress bars are shown only when stderr is a terminal and ``--quiet`` was not given, so
pipelines and cron jobs get clean logs.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Iterator, Optional, Sequence

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)

console = Console(stderr=True, highlight=False)
_quiet = False


def set_quiet(quiet: bool) -> None:
    global _quiet
    _quiet = quiet


def info(message: str) -> None:
    """A log line on stderr (suppressed by ``--quiet``), never wrapped: one record per line in cron logs."""
    if not _quiet:
        console.print(message, markup=False, soft_wrap=True)


def progress_enabled() -> bool:
    return not _quiet and sys.stderr.isatty()


class _NullTask:
    def advance(self, n: float = 1) -> None:
        pass

    def update(self, **fields) -> None:
        pass


class _Task:
    def __init__(self, progress: Progress, task_id):
        self._progress, self._id = progress, task_id

    def advance(self, n: float = 1) -> None:
        self._progress.advance(self._id, n)

    def update(self, **fields) -> None:
        self._progress.update(self._id, **fields)


@contextlib.contextmanager
def progress(description: str, total: Optional[float] = None, unit: str = "") -> Iterator[_Task | _NullTask]:
    """A rich progress bar on stderr, or a no-op when output is not a terminal."""
    if not progress_enabled():
        yield _NullTask()
        return
    columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn() if total else TextColumn(f"{{task.completed:,.0f}} {unit}"),
               TaskProgressColumn() if total else TextColumn(""), TimeElapsedColumn(), TimeRemainingColumn(),
               TextColumn("{task.fields[status]}")]
    with Progress(*columns, console=console, transient=False) as p:
        tid = p.add_task(description, total=total, status="")
        yield _Task(p, tid)


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]], stderr: bool = False) -> None:
    """A rich table of result figures on stdout (stderr when stdout carries data): the first column
    (row labels) left-aligned, the figures right-aligned."""
    from rich.table import Table

    table = Table(title=title)
    for i, header in enumerate(headers):
        table.add_column(header, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*row)
    Console(stderr=stderr, highlight=False).print(table)
