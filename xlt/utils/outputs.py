"""Writing outputs safely.

* :func:`atomic_output` writes to a temporary name beside the target and renames it into place
  only when the block finishes without error, so a killed or failed run never leaves a partial
  file under the final name; :func:`remove_stale_temporaries` removes what a killed one left.
  :func:`written_together` writes a set of files all or none, the one that says the set is
  complete renamed last (:func:`superseded`).
* An output the OS refuses (permissions, a read-only or full disk, a path under a regular file) is
  the one error line ``PATH: cannot write (REASON)``: :func:`check_output_paths` and
  :func:`check_output_directory` find it out before any work, :func:`atomic_path` and
  :func:`make_directory` when it happens.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import json
import os
import re
import secrets
import socket
import stat
import sys
import tempfile
from typing import Iterator, Optional, TextIO

from xlt.utils.errors import PathLike, XltError


DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
TEMPORARY_SUFFIX = ".tmp"


def _umask_mode() -> int:
    """The mode a plain ``open`` would give a new file (mkstemp's own 0600 would hide outputs)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def cannot_write(path: PathLike, error: OSError) -> XltError:
    """The one error line for an output the OS refused, with the OS's own reason."""
    return XltError(f"cannot write ({error.strerror or error})", path)


def _not_a_directory(path: PathLike) -> XltError:
    return cannot_write(path, NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR)))


def _parent_directory(path: str) -> str:
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(directory):
        return directory
    if os.path.lexists(directory):  # out.txt/result: "does not exist" would send the user looking for it
        raise _not_a_directory(path)
    raise XltError("output directory does not exist", directory)


def _probe(directory: str, path: PathLike) -> None:
    """Ask the OS itself whether ``directory`` takes a new file: permission bits, ACLs, an immutable
    directory or a read-only mount all answer here, root included. The file has no name (O_TMPFILE
    where supported), so a kill leaves nothing behind."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as e:
        raise cannot_write(path, e) from None


def output_directory(path: PathLike) -> str:
    """The existing directory ``path`` will be renamed into, once ``path`` is known to be a file path."""
    path = os.fspath(path)
    directory = _parent_directory(path)
    if os.path.isdir(path):
        raise XltError("is a directory; expected the path of an output file", path)
    return directory


def check_output_paths(*paths: PathLike, prefix: bool = False) -> None:
    """Check that each output can be written and renamed into place. Commands call this before any
    work, so that a bad output does not fail the command after the work (or after the first outputs).
    ``prefix``: each path begins the names of several files (``PREFIX.npy``, ``PREFIX.json``). Two
    outputs on one file are refused (one would replace the other: ``-o F --report F``)."""
    seen = set()
    for path in map(os.fspath, paths):
        if (absolute := os.path.abspath(path)) in seen and not special_file(path):
            raise XltError("two outputs name the same file: one would replace the other", path)
        seen.add(absolute)
    for path in paths:
        path = os.fspath(path)
        if prefix and (path.endswith(os.sep) or os.path.basename(path) in ("", ".", "..")):
            # "out/" would begin the names "out/.npy", "out/.json": hidden files in a directory
            raise XltError("a prefix must end with a name (out/vectors, not out/): it begins the output files' "
                           "names", path)
        _probe(_parent_directory(path) if prefix else output_directory(path), path)


def check_output_directory(path: PathLike) -> str:
    """Check, before any work, that the directory ``path`` can be written, or created (by
    :func:`make_directory`, later) in its nearest existing ancestor."""
    path = os.fspath(path)
    existing = os.path.abspath(path)
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise _not_a_directory(path)
    _probe(existing, path)
    return path


def make_directory(path: PathLike) -> str:
    """``os.makedirs(path, exist_ok=True)``, with a refusal as the one error line."""
    path = os.fspath(path)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise cannot_write(path, e) from None
    return path


@contextlib.contextmanager
def directory_for_outputs(path: PathLike) -> Iterator[str]:
    """:func:`make_directory` for the outputs a block writes: if the block fails, the directories
    made here are removed again, from the deepest up, as long as they are empty (a full disk or a
    kill leaves no empty folder that looks like a run)."""
    path = os.path.abspath(path)
    made, parent = [], path
    while not os.path.lexists(parent):
        made.append(parent)
        parent = os.path.dirname(parent)
    make_directory(path)
    try:
        yield path
    except BaseException:
        for directory in made:   # deepest first
            try:
                os.rmdir(directory)
            except OSError:   # not empty (another writer's, or outputs of ours that did land): kept
                break
        raise


def special_file(path: str) -> bool:
    """Whether ``path`` exists and is neither a regular file nor a directory (a device, a FIFO), or
    names one under /dev (``/dev/stdout`` redirected to a file is a link to that file: renaming over
    it would replace the system's link)."""
    if os.path.abspath(path).startswith("/dev/") and os.path.exists(path):
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


@contextlib.contextmanager
def atomic_path(path: PathLike) -> Iterator[str]:
    """Yield a temporary path beside ``path``; rename it to ``path`` if the block succeeds.

    For writers that need a file name (numpy memmaps, external tools) rather than a stream. On any
    exception the temporary file is removed and the previous content of ``path`` is left untouched;
    a temporary that cannot be created, or a full disk, is :func:`cannot_write`'s error.
    """
    path = os.fspath(path)
    if special_file(path):
        # a device or a pipe (`-o /dev/null`, a FIFO) has no content to keep: written in place, since
        # renaming over it would replace the node itself (run as root: /dev/null for the whole system)
        try:
            yield path
        except OSError as e:
            if e.errno in DISK_FULL:
                raise cannot_write(path, e) from None
            raise
        return
    try:
        with scratch_file(output_directory(path), os.path.basename(path)) as tmp:
            yield tmp
            if os.path.exists(tmp):
                os.chmod(tmp, _umask_mode())
            os.replace(tmp, path)
    except OSError as e:
        if e.errno in DISK_FULL:
            raise cannot_write(path, e) from None
        raise


def _writer_tag() -> str:
    """This machine and pid namespace, in six hex digits: a temporary's pid means a process only there."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    return hashlib.sha256(f"{socket.gethostname()} {namespace}".encode()).hexdigest()[:6]


_WRITER = _writer_tag()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:   # another user's process
        return True
    return True


def remove_dead_writers_temporaries(directory: str, prefix: str) -> None:
    """Remove the temporaries of ``DIRECTORY/PREFIX`` whose writer was killed outright (SIGKILL, the
    OOM killer) on this machine: their pid names no process alive here. A live writer's are kept,
    and so are another machine's on a shared file system (their tag is not ours)."""
    mine = re.compile(rf"{re.escape(prefix)}\.{_WRITER}-(\d+)-[0-9a-f]{{8}}{re.escape(TEMPORARY_SUFFIX)}")
    for name in glob.glob(os.path.join(glob.escape(directory), f"{glob.escape(prefix)}.{_WRITER}-*{TEMPORARY_SUFFIX}")):
        found = mine.fullmatch(os.path.basename(name))
        if found and int(found.group(1)) != os.getpid() and not _alive(int(found.group(1))):
            with contextlib.suppress(OSError):   # gone meanwhile, or not ours to remove: left as it is
                os.unlink(name)


@contextlib.contextmanager
def scratch_file(directory: str, prefix: str) -> Iterator[str]:
    """Create an empty file ``DIRECTORY/PREFIX.TAG-PID-RANDOM.tmp``, yield its name, remove it on the way out.

    The name is known before the file exists, so an exception at any point (SIGTERM is raised
    between any two bytecodes) removes it: ``mkstemp`` gives the name only once it has made the file,
    and a signal landing in between left it behind. The tag (this machine and pid namespace) and
    the pid mean no other live process uses the name, so removing it by name is safe, and what a
    process killed outright left is found and removed by the next writer of the same file
    (:func:`remove_dead_writers_temporaries`). A file that cannot be made is :func:`cannot_write`'s
    error, named with ``DIRECTORY/PREFIX``.
    """
    name = ""
    try:
        remove_dead_writers_temporaries(directory, prefix)
        while True:
            name = os.path.join(directory, f"{prefix}.{_WRITER}-{os.getpid()}-{secrets.token_hex(4)}{TEMPORARY_SUFFIX}")
            try:
                os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                break
            except FileExistsError:   # a leftover of an earlier process with our pid: another name
                continue
            except OSError as e:
                raise cannot_write(os.path.join(directory, prefix), e) from None
        yield name
    finally:
        if name:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)


def reserve_disk_space(tmp: str, path: PathLike) -> None:
    """Allocate every block of the temporary ``tmp`` (of the output ``path``) at its present size now.

    A file mapped into memory at its full size (a memmap: sparse until written) meets a full disk
    only when a page is written back, and that is SIGBUS, a crash with no message that leaves the
    temporaries; here it is :func:`cannot_write`'s line for ``path``. A file system that cannot
    allocate ahead of time is left as it is."""
    fd = os.open(tmp, os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, max(os.fstat(fd).st_size, 1))
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise cannot_write(path, e) from None
    finally:
        os.close(fd)


def remove_stale_temporaries(*paths: PathLike) -> None:
    """Remove the temporaries :func:`atomic_path` made for ``paths`` (their names may be glob
    patterns: ``RUN/codes.*``) and a killed process left. Only for a caller holding the lock that
    every writer of those paths holds: a live writer's temporary has the same name."""
    for path in paths:
        directory, name = os.path.split(os.fspath(path))
        for tmp in glob.glob(os.path.join(glob.escape(directory), f"{name}.*{TEMPORARY_SUFFIX}")):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


@contextlib.contextmanager
def atomic_output(path: Optional[PathLike], mode: str = "w", encoding: Optional[str] = "utf-8") -> Iterator[TextIO]:
    """Open ``path`` for writing through :func:`atomic_path`: renamed into place only on success.

    ``None`` or ``-`` writes to stdout instead.
    """
    if path is None or os.fspath(path) == "-":
        stream = sys.stdout.buffer if "b" in mode else sys.stdout
        try:
            yield stream  # type: ignore[misc]
            stream.flush()
        except OSError as e:
            if e.errno in DISK_FULL:   # `> /dev/full`; a broken pipe stays the CLI's
                raise cannot_write("<stdout>", e) from None
            raise
        return
    kwargs = {} if "b" in mode else {"encoding": encoding, "newline": "\n"}
    with atomic_path(path) as tmp, open(tmp, mode, **kwargs) as f:
        yield f
        f.flush()
        if stat.S_ISREG(os.fstat(f.fileno()).st_mode):   # a device or a pipe takes no fsync
            os.fsync(f.fileno())


def remove_superseded(path: PathLike) -> None:
    """Remove the old ``path`` (a regular file; a device, a pipe or a link is left alone)."""
    if os.path.isfile(path) and not os.path.islink(path):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


@contextlib.contextmanager
def superseded(path: PathLike) -> Iterator[None]:
    """Remove the old ``path`` once the block has succeeded. Entered last (innermost) among the
    outputs of a set whose ``path`` says the set is complete (a header, make's target), it runs
    before their renames: the old ``path`` never stands beside new files of another run, and a kill
    between the renames leaves a set without it, which readers refuse and make builds again."""
    yield
    remove_superseded(path)


@contextlib.contextmanager
def written_together(texts: dict[str, str]) -> Iterator[None]:
    """Write each text to its path (:func:`atomic_output`), all or none: nothing is renamed into place
    before the block (drawing a figure, say) has run, and the path named first (the one make
    targets) is renamed last. Its old version is removed before the block, whose own files (the
    figure) land before the texts: at no moment does it stand beside files of another run."""
    with contextlib.ExitStack() as renames:   # left in reverse order of entry
        for path, text in texts.items():
            f = renames.enter_context(atomic_output(path))
            # written and flushed while innermost: a full disk (or a refusing device) surfaces here,
            # naming this file, before any of the set is renamed into place
            f.write(text)
            f.flush()
        remove_superseded(next(iter(texts)))
        yield


def json_text(obj: object) -> str:
    """``obj`` as the indented JSON every xlt file holds."""
    return json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n"


def write_json(path: PathLike, obj: object) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    with atomic_output(path) as f:
        f.write(json_text(obj))
