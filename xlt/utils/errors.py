"""The one error path.

Library code raises :class:`XltError` for anything the user can fix (bad input, missing files,
mismatched vocabularies). The CLI turns it into exactly one line on stderr,
``xlt <cmd>: error: <file>:<line>: <what is wrong>``, and exit status 2; ``--debug`` shows the
traceback instead. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import os
from typing import Optional, Sequence, Union

PathLike = Union[str, "os.PathLike[str]"]

EXIT_USAGE = 2
EXIT_TERMINATED = 143  # 128 + SIGTERM, what a shell reports for a process SIGTERM killed


class XltError(Exception):
    """A user-facing error about one input, optionally at one line of it."""

    def __init__(self, message: str, path: Optional[PathLike] = None, line: Optional[int] = None):
        super().__init__(message)
        self.message = message
        self.path = None if path is None else os.fspath(path)
        self.line = line

    def location(self) -> str:
        if self.path is None:
            return ""
        where = "<stdin>" if self.path == "-" else self.path
        return f"{where}:{self.line}: " if self.line is not None else f"{where}: "

    def __str__(self) -> str:
        return self.location() + self.message


class Terminated(XltError):
    """A long command stopped cleanly on SIGTERM (a preempted or time-limited job) after saving what
    it needs to resume; the CLI prints the message and exits with :data:`EXIT_TERMINATED`."""

    exit_status = EXIT_TERMINATED


def require_file(path: PathLike, what: str = "file") -> str:
    """Return ``path`` as a string, or raise a one-line error if it is not a readable file."""
    path = os.fspath(path)
    if path == "-":
        return path
    if not os.path.exists(path):
        raise XltError(f"no such {what}", path)
    if os.path.isdir(path):
        raise XltError(f"is a directory, expected a {what}", path)
    if not os.access(path, os.R_OK):
        raise XltError(f"cannot read {what}", path)
    return path


def require_distinct(paths: Sequence[PathLike], what: str = "file") -> None:
    """A one-line error naming the first of ``paths`` given twice (the same file by two names too):
    a table would show one result as two columns."""
    seen: dict[str, str] = {}
    for path in map(os.fspath, paths):
        real = os.path.realpath(path)
        if real in seen:
            raise XltError(f"the same {what} is given twice (also as {seen[real]})", path)
        seen[real] = path
