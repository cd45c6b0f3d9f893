"""The fastBPE command-line tool and the checked byte streams fed to it.

:func:`fast_tool` finds the ``fast`` binary that ``make install`` compiles from fastBPE's sdist
(optional: ``xlt bpe apply`` uses it for speed on plain files, everything else runs in-process);
:func:`run_fast` runs it with its log hidden unless it fails; :func:`text_blocks` and
:func:`corpus_feed` stream inputs (plain, compressed or stdin) in blocks that end at a newline,
checked for UTF-8 with line numbers first, because fastBPE aborts or misbehaves on bad bytes.
"""

from __future__ import annotations

import contextlib
import errno
import lzma
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Iterator, Optional, Sequence, Union

from xlt.utils.errors import PathLike, XltError, require_file
from xlt.utils.outputs import atomic_output, cannot_write
from xlt.utils.processes import dying_with_this_process
from xlt.utils.textio import open_binary

FAST_ENV = "XLT_FASTBPE"
BLOCK_BYTES = 1 << 22          # streaming unit: 4 MiB, cut after a newline


# ---- the fastBPE tool ------------------------------------------------------------------------
def find_fast_tool() -> Optional[str]:
    """Path of fastBPE's ``fast`` executable: ``$XLT_FASTBPE``, else beside Python, else on PATH; None if absent.

    Raises:
        XltError: ``$XLT_FASTBPE`` names no executable (a setting that is wrong, not merely absent).
    """
    configured = os.environ.get(FAST_ENV)
    if configured:
        if os.path.isfile(configured) and os.access(configured, os.X_OK):
            return configured
        raise XltError(f"${FAST_ENV} does not name an executable fastBPE `fast` tool (run make install)", configured)
    beside = Path(sys.executable).parent / "fast"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("fast")


def fast_tool() -> str:
    """Like :func:`find_fast_tool`, but the tool must exist."""
    found = find_fast_tool()
    if found is None:
        raise XltError("fastBPE's `fast` tool was not found beside Python, on PATH or in $XLT_FASTBPE; run make install")
    return found


def run_fast(args: Sequence[str], stdout: Union[BinaryIO, int], feed: Optional[Iterable[bytes]] = None,
             while_running: Optional[Callable[[], None]] = None, tool: Optional[str] = None,
             output: Optional[tuple[str, PathLike]] = None) -> None:
    """Run ``fast ARGS`` writing to ``stdout``, streaming ``feed`` into its stdin.

    Its log (stderr) is kept in a temporary file and shown only if it fails. An exception raised
    by ``feed`` (e.g. a bad line in a corpus) kills the tool and propagates. ``output`` is the file
    the tool writes and the name to report it by: the tool dies of a signal, not a message, when that
    file meets a full disk or the file size limit, and that is told as :func:`cannot_write`'s line.
    """
    with tempfile.TemporaryFile() as errlog:
        proc = subprocess.Popen([tool or fast_tool(), *args], stdout=stdout, stderr=errlog,
                                stdin=subprocess.DEVNULL if feed is None else subprocess.PIPE,
                                preexec_fn=dying_with_this_process())
        try:
            if feed is not None:
                try:
                    for block in feed:
                        proc.stdin.write(block)
                except BrokenPipeError:
                    pass  # the tool died early; its exit status and log say why
                finally:
                    with contextlib.suppress(BrokenPipeError):
                        proc.stdin.close()
            while True:
                try:
                    returncode = proc.wait(timeout=0.5)
                    break
                except subprocess.TimeoutExpired:
                    if while_running:
                        while_running()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        if returncode != 0:
            refused = _output_refused(returncode, output[0]) if output else None
            if refused is not None:
                raise cannot_write(output[1], refused)
            errlog.seek(0)
            lines = errlog.read().decode("utf-8", "replace").strip().splitlines()
            why = lines[-1] if lines else ("killed by signal %d" % -returncode if returncode < 0 else "no message")
            raise XltError(f"fastBPE `fast {args[0]}` failed (exit status {returncode}): {why}")


def _output_refused(returncode: int, path: str) -> Optional[OSError]:
    """The disk's refusal that a tool's death by signal means, if it means one: SIGXFSZ is the file
    size limit; SIGBUS is its memory-mapped output finding no block to write to (less than 1 MiB left)."""
    if returncode == -signal.SIGXFSZ:
        return OSError(errno.EFBIG, os.strerror(errno.EFBIG))
    if returncode == -signal.SIGBUS:
        space = os.statvfs(os.path.dirname(os.path.abspath(path)))
        if space.f_bavail * space.f_frsize < 1 << 20:
            return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return None


# ---- checked text input ----------------------------------------------------------------------
def text_blocks(path: PathLike) -> Iterator[bytes]:
    """The raw bytes of a text input (plain, .gz, .xz or ``-``), in blocks cut after a newline.

    Every block is checked to be UTF-8; only the last one may lack a final newline.

    Raises:
        XltError: naming the line (and byte) of the first non-UTF-8 sequence, or a corrupt archive.
    """
    path = require_file(path, "input")
    stream = open_binary(path)
    lines_before, carry = 0, b""
    try:
        while True:
            data = stream.read(BLOCK_BYTES)
            block = carry + data
            if data:  # keep the unfinished last line for the next block
                cut = block.rfind(b"\n") + 1
                block, carry = block[:cut], block[cut:]
            if block:
                try:
                    block.decode("utf-8")
                except UnicodeDecodeError as e:
                    line_start = block.rfind(b"\n", 0, e.start) + 1
                    raise XltError(f"not valid UTF-8 (byte {e.start - line_start + 1} of the line)",
                                   path, lines_before + block.count(b"\n", 0, e.start) + 1) from None
                lines_before += block.count(b"\n")
                yield block
            if not data:
                return
    except (EOFError, lzma.LZMAError, OSError) as e:
        # a block read fails as a whole: a file is read again, one line at a time, up to the damage
        line = lines_before + 1 if path == "-" else _readable_lines(path) + 1
        raise XltError(f"cannot read input ({e})", path, line) from None
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def _readable_lines(path: str) -> int:
    """How many lines of a damaged file can be read before its damage."""
    count = 0
    with contextlib.suppress(EOFError, lzma.LZMAError, OSError):
        with open_binary(path) as stream:
            for _ in stream:
                count += 1
    return count


def corpus_feed(paths: Sequence[str]) -> Iterator[bytes]:
    """The checked bytes of several corpora as one stream, each ending with a newline.

    This is what ``fast learnbpe N a b`` reads when every file ends with a newline; a missing final
    newline is added so the file's last word counts and does not fuse with the next file's first.

    Raises:
        XltError: on a bad line, or when a corpus holds no word (one of several too: a language
        whose file is empty would be learned from the others without a word).
    """
    for path in paths:
        last, has_words = b"\n", False
        for block in text_blocks(path):
            has_words = has_words or bool(block.translate(None, b" \n"))
            last = block
            yield block
        if not has_words:
            raise XltError("empty corpus: no words", path)
        if not last.endswith(b"\n"):
            yield b"\n"


def check_inputs(paths: Sequence[PathLike], what: str) -> list[str]:
    if not paths:
        raise XltError(f"no {what} given")
    return [require_file(p, what) for p in paths]


def copy_to(output: Optional[PathLike], source: BinaryIO) -> None:
    source.seek(0)
    with atomic_output(output, "wb") as out:
        shutil.copyfileobj(source, out)
