"""Reading text strictly.

* :func:`read_lines` streams a text file (plain, ``.gz``, ``.xz``, or ``-`` for stdin) line by
  line, decoding strictly as UTF-8 one line at a time, so a bad byte is reported with its line
  number and memory stays constant.
* :func:`read_json` reads a JSON file xlt wrote, a damaged one as the one error line with its line.

Writing outputs safely is :mod:`xlt.utils.outputs`.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import lzma
import os
import sys
from typing import Any, BinaryIO, Iterable, Iterator, Optional, TypeVar

from xlt.utils.errors import PathLike, XltError, require_file


def file_sha256(path: PathLike) -> str:
    """sha256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def open_binary(path: PathLike) -> BinaryIO:
    """Open a possibly compressed file (or stdin for ``-``) for binary reading."""
    path = require_file(path)
    if path == "-":
        return sys.stdin.buffer
    if path.endswith(".gz"):
        return gzip.open(path, "rb")  # type: ignore[return-value]
    if path.endswith(".xz"):
        return lzma.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


def read_lines(path: PathLike) -> Iterator[str]:
    """Yield the lines of a UTF-8 text file without their line ending (``\\n`` or ``\\r\\n``), and
    without the byte-order mark some editors put first (else a CoNLL-U file's first ID reads
    ``\\ufeff1``, and a task file's first word keeps an invisible character).

    Raises:
        XltError: on a missing file, a non-UTF-8 line (with its line number) or a corrupt archive.
    """
    path = os.fspath(path)
    f = open_binary(path)
    lineno = 0
    try:
        for raw in f:
            lineno += 1
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise XltError(f"not valid UTF-8 (byte {e.start + 1} of the line)", path, lineno) from None
            line = line.rstrip("\n")
            if line.endswith("\r"):
                line = line[:-1]
            if lineno == 1 and line.startswith("\ufeff"):
                line = line[1:]
            yield line
    except (EOFError, lzma.LZMAError, gzip.BadGzipFile, OSError) as e:
        raise XltError(f"cannot read compressed input ({e})", path, lineno + 1) from None
    finally:
        if f is not sys.stdin.buffer:
            f.close()


T = TypeVar("T")


def nonempty(items: Iterable[T], path: PathLike) -> Iterator[T]:
    """``items`` as they come, then XltError naming ``path`` if there was none: a filter given an empty
    input says so where the input is named, not at the later stage that finds nothing to learn from
    (its output, written atomically, is then not left behind)."""
    seen = False
    for item in items:
        seen = True
        yield item
    if not seen:
        raise XltError("empty input: no lines", os.fspath(path))


def with_data(lines: Iterable[T], path: PathLike, comments: bool = False) -> Iterator[T]:
    """Output ``lines`` (str, or bytes blocks) as they come, then XltError naming ``path`` if there
    was none, or none held data (every one blank, or with ``comments`` a CoNLL-U ``#`` line): a converted file with no sentence in it would
    fail only at the stage that reads it, far from the input at fault."""
    seen = False
    for line in nonempty(lines, path):
        seen = seen or bool(line.strip()) and not (comments and line.startswith("#"))
        yield line
    if not seen:
        raise XltError("empty input: no sentence (every line is blank" + (" or a comment)" if comments else ")"),
                       os.fspath(path))


def read_numbered_lines(path: PathLike) -> Iterator[tuple[int, str]]:
    """Like :func:`read_lines`, with 1-based line numbers for error messages."""
    return enumerate(read_lines(path), start=1)


def read_text(path: PathLike) -> str:
    """A whole UTF-8 file; a non-UTF-8 byte is an XltError naming its line, as :func:`read_lines` words it."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line_start = raw.rfind(b"\n", 0, e.start) + 1   # the byte within its line
        raise XltError(f"not valid UTF-8 (byte {e.start - line_start + 1} of the line)", path,
                       raw.count(b"\n", 0, e.start) + 1) from None


def read_json(path: PathLike, what: str = "JSON file", format: Optional[str] = None) -> Any:
    """Read a JSON file (usually one xlt wrote), as a one-line error when missing or unreadable.

    With ``format``, the file must be an object whose ``"format"`` key equals it.
    """
    path = require_file(path, what)
    text = read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise XltError(f"not a valid {what} ({e.msg}, column {e.colno})", path, e.lineno) from None
    except ValueError as e:
        raise XltError(f"not a valid {what} ({e})", path) from None
    if format is not None and (not isinstance(data, dict) or data.get("format") != format):
        found = data.get("format") if isinstance(data, dict) else None
        raise XltError(f"not a {what} (format {found!r}, expected {format!r})", path)
    return data
