"""Memory-mapped token stores: the binarized form of one language's BPE'd text.

A store is three files beside each other::

    PREFIX.bin   token ids, numpy uint16 (vocabulary of at most 65,536 ids) or uint32
    PREFIX.idx   int64 offsets, n_sentences + 1 entries
    PREFIX.json  header: format, language, vocabulary checksum, counts, source, producer

Every sentence is followed by the ``</s>`` id in ``.bin``, so the pretraining stream (XLM's
StreamDataset layout: sentences separated by ``</s>``) is one contiguous slice of the memmap and
needs no copy. ``offsets[i]`` is where sentence i starts and ``offsets[n]`` the total length;
sentence i is ``tokens[offsets[i] : offsets[i+1] - 1]``. Empty lines stay as empty sentences so
line numbers keep matching parallel files.

Writing is one pass in constant memory (ids are buffered in a C array and appended to temporary
files chunk by chunk); the three files are renamed into place only when everything succeeded.
"""

from __future__ import annotations

import contextlib
import os
from array import array
from dataclasses import dataclass
from typing import BinaryIO, Iterable, Optional, Union

import numpy as np

from xlt import __version__
from xlt.text.tokenize import check_language
from xlt.text.vocab import EOS_ID, UNK_ID, Vocabulary
from xlt.utils import log
from xlt.utils.errors import PathLike, XltError, require_file
from xlt.utils.outputs import atomic_path, json_text, superseded
from xlt.utils.textio import file_sha256, read_json, read_lines

FORMAT = "xlt-token-store"
FORMAT_VERSION = 1

# Flush the id buffer after this many sentences or tokens, whichever comes first: a few MB of
# buffer whatever the corpus size, and big enough that numpy's per-call cost does not show.
FLUSH_SENTENCES = 1 << 16
FLUSH_TOKENS = 1 << 20


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned integer type that holds every id of a ``vocab_size`` vocabulary."""
    for dtype in (np.uint16, np.uint32):
        if vocab_size - 1 <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    raise XltError(f"vocabulary of {vocab_size:,} entries is too large for a token store")


@dataclass(frozen=True)
class StorePaths:
    """The three files of a store with prefix ``PREFIX``."""

    bin: str
    idx: str
    header: str

    @classmethod
    def of(cls, prefix: PathLike) -> "StorePaths":
        prefix = os.fspath(prefix)
        return cls(prefix + ".bin", prefix + ".idx", prefix + ".json")


@dataclass
class _Counts:
    n_sentences: int = 0
    n_tokens: int = 0  # without separators
    n_unk: int = 0


def binarize(source: PathLike, vocab: Union[Vocabulary, PathLike], lang: str, prefix: PathLike,
             command: Optional[str] = None) -> dict:
    """Encode BPE'd text (one sentence per line, subwords separated by spaces) into a token store.

    Args:
        source: the text file (plain, ``.gz``, ``.xz``) or ``-`` for stdin.
        vocab: a :class:`Vocabulary` or the path of one; ``lang`` selects the entries of a
            language-prefixed vocabulary through :meth:`Vocabulary.encode`.
        lang: the language of the text, recorded in the header.
        prefix: output prefix; writes ``prefix.bin``, ``prefix.idx`` and ``prefix.json``.
        command: the command line to record in the header (``created_by``).

    Returns:
        The header that was written.

    Raises:
        XltError: unreadable or non-UTF-8 input (with its line), an empty corpus, a missing output
            directory. Nothing is left under the output names in that case.
    """
    vocab_path = None if isinstance(vocab, Vocabulary) else os.fspath(vocab)
    if not isinstance(vocab, Vocabulary):
        vocab = Vocabulary.load(vocab)
    if vocab.languages:   # codes `xlt bpe vocab` checked when it wrote them
        if lang not in vocab.languages:
            # A mistyped language would encode every token of a prefixed vocabulary as <unk>, silently.
            raise XltError(f"language {lang!r} is not one of the vocabulary's ({', '.join(vocab.languages)})",
                           vocab_path)
    else:
        check_language(lang)   # a vocabulary without .langs.json names none: a typo would go into the header
    source = os.fspath(source)
    if source != "-":
        require_file(source, "input file")
    dtype = token_dtype(len(vocab))
    paths = StorePaths.of(prefix)
    with contextlib.ExitStack() as renames:
        # Entered header first so it is renamed last: a reader that sees the header sees the data.
        tmp_header = renames.enter_context(atomic_path(paths.header))
        tmp_idx = renames.enter_context(atomic_path(paths.idx))
        tmp_bin = renames.enter_context(atomic_path(paths.bin))
        with open(tmp_bin, "wb") as bin_file, open(tmp_idx, "wb") as idx_file, \
                log.progress(f"binarize {lang}", unit="lines") as bar:
            counts = _write_sentences(read_lines(source), vocab, lang, dtype, bin_file, idx_file, bar)
        if counts.n_tokens == 0:
            raise XltError("empty corpus: no line has a token", source)
        header = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "language": lang,
            "vocab_sha256": vocab.sha256,
            "vocab_size": len(vocab),
            "dtype": dtype.name,
            "separator_id": EOS_ID,
            "n_sentences": counts.n_sentences,
            "n_tokens": counts.n_tokens,
            "n_unk": counts.n_unk,
            "unk_rate": counts.n_unk / counts.n_tokens,
            "source": source,
            # The file as stored (compressed bytes for .gz/.xz), so it matches data/SHA256SUMS.
            "source_sha256": None if source == "-" else file_sha256(source),
            "created_by": {"xlt_version": __version__, "command": command or "xlt.data.store.binarize"},
        }
        with open(tmp_header, "w", encoding="utf-8") as f:
            f.write(json_text(header))
        renames.enter_context(superseded(paths.header))   # an old header never describes the new .bin
    return header


def _write_sentences(lines: Iterable[str], vocab: Vocabulary, lang: str, dtype: np.dtype,
                     bin_file: BinaryIO, idx_file: BinaryIO, bar) -> _Counts:
    """Append every sentence plus its ``</s>`` to ``bin_file`` and its end offset to ``idx_file``."""
    counts = _Counts()
    written = 0  # tokens (separators included) already in bin_file
    ids = array("I")  # C uint32: 4 bytes per buffered id, not a Python int object each
    ends = array("q")
    # file.write, not ndarray.tofile: a short write from tofile is an OSError without an errno, so a
    # full disk would read as a crash instead of cannot_write's one line
    idx_file.write(np.zeros(1, dtype=np.int64).tobytes())  # offsets[0]

    def flush() -> None:
        nonlocal written
        if not ends:
            return
        chunk = np.array(ids, dtype=np.uint32)  # a copy: the C arrays are cleared and reused below
        bin_file.write(chunk.astype(dtype, copy=False).tobytes())
        idx_file.write((np.array(ends, dtype=np.int64) + written).tobytes())
        counts.n_unk += int(np.count_nonzero(chunk == UNK_ID))
        counts.n_sentences += len(ends)
        counts.n_tokens += len(chunk) - len(ends)
        written += len(chunk)
        bar.advance(len(ends))
        del ids[:], ends[:]

    for line in lines:
        # fastBPE splits words on single spaces only, so a tab stays inside its token here too.
        tokens = line.split(" ")
        if "" in tokens:
            tokens = [t for t in tokens if t]
        ids.extend(vocab.encode(tokens, lang))
        ids.append(EOS_ID)
        ends.append(len(ids))
        if len(ends) >= FLUSH_SENTENCES or len(ids) >= FLUSH_TOKENS:
            flush()
    flush()
    return counts


class TokenStore:
    """Read access to a token store; every accessor is an O(1) view into the memmaps.

    Attributes:
        prefix: the store's path prefix.
        header: the parsed ``PREFIX.json``.
        tokens: ``(n_tokens + n_sentences,)`` read-only memmap of the whole ``.bin``, separators included.
        offsets: ``(n_sentences + 1,)`` int64 memmap; sentence i spans ``offsets[i] : offsets[i+1] - 1``.
    """

    def __init__(self, prefix: str, header: dict, tokens: np.memmap, offsets: np.memmap):
        self.prefix, self.header, self.tokens, self.offsets = prefix, header, tokens, offsets

    @classmethod
    def open(cls, prefix: PathLike, vocab: Optional[Vocabulary] = None) -> "TokenStore":
        """Map the store at ``prefix``; if ``vocab`` is given it must be the one the store was built with.

        Raises:
            XltError: a missing or corrupt file (named), or a vocabulary whose sha256 differs from
                the header's (never a silent remap).
        """
        prefix = os.fspath(prefix)
        paths = StorePaths.of(prefix)
        header = _read_header(paths.header)
        if vocab is not None and vocab.sha256 != header["vocab_sha256"]:
            raise XltError(f"vocabulary does not match the store (store built with vocabulary sha256 "
                           f"{header['vocab_sha256'][:16]}..., given {vocab.sha256[:16]}...); "
                           f"binarize the text again with this vocabulary", paths.header)
        n_sentences = header["n_sentences"]
        dtype = np.dtype(header["dtype"])
        tokens = _map(paths.bin, dtype, header["n_tokens"] + n_sentences)
        offsets = _map(paths.idx, np.dtype(np.int64), n_sentences + 1)
        if offsets[0] != 0 or offsets[-1] != len(tokens):
            raise XltError(f"corrupt offsets: they span {offsets[0]}..{offsets[-1]}, the token file holds "
                           f"{len(tokens)} ids", paths.idx)
        return cls(prefix, header, tokens, offsets)

    @property
    def language(self) -> str:
        return self.header["language"]

    @property
    def n_tokens(self) -> int:
        """Tokens without the ``</s>`` separators."""
        return len(self.tokens) - len(self)

    def __len__(self) -> int:
        """Number of sentences."""
        return len(self.offsets) - 1

    def sentence(self, i: int) -> np.ndarray:
        """``(length_i,)`` ids of sentence ``i`` (negative counts from the end), without its ``</s>``."""
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"sentence {i} out of range for a store of {n} sentences")
        i %= n
        return self.tokens[self.offsets[i]:self.offsets[i + 1] - 1]

    def span(self, start: int, end: int) -> np.ndarray:
        """``(end - start,)`` contiguous ids of :attr:`tokens`, separators included."""
        if not 0 <= start <= end <= len(self.tokens):
            raise IndexError(f"span {start}:{end} out of range for {len(self.tokens)} tokens")
        return self.tokens[start:end]

    def sentence_lengths(self) -> np.ndarray:
        """``(n_sentences,)`` int64 sentence lengths without separators."""
        return np.diff(self.offsets.view(np.ndarray)) - 1


def _read_header(path: str) -> dict:
    if not os.path.exists(path):
        raise XltError("no such token store (its header file is missing)", path)
    header = read_json(path, "token store header", format=FORMAT)
    if header.get("format_version") != FORMAT_VERSION:
        raise XltError(f"token store format version {header.get('format_version')!r} is not supported "
                       f"(this xlt reads version {FORMAT_VERSION})", path)
    missing = [k for k in ("language", "vocab_sha256", "dtype", "n_sentences", "n_tokens") if k not in header]
    if missing:
        raise XltError(f"corrupt token store header: missing {', '.join(missing)}", path)
    if header["dtype"] not in ("uint16", "uint32"):
        raise XltError(f"corrupt token store header: unknown dtype {header['dtype']!r}", path)
    for key in ("n_sentences", "n_tokens"):
        if isinstance(header[key], bool) or not isinstance(header[key], int) or header[key] < 0:
            raise XltError(f"corrupt token store header: {key} {header[key]!r} is not a count", path)
    for key in ("language", "vocab_sha256"):
        if not isinstance(header[key], str):
            raise XltError(f"corrupt token store header: {key} {header[key]!r} is not a string", path)
    return header


def _map(path: str, dtype: np.dtype, expected_items: int) -> np.memmap:
    """A read-only memmap of ``path``, checked to hold exactly ``expected_items`` items."""
    if not os.path.exists(path):
        raise XltError("token store file is missing", path)
    size = os.path.getsize(path)
    if size != expected_items * dtype.itemsize:
        raise XltError(f"corrupt token store file: {size} bytes, the header implies "
                       f"{expected_items * dtype.itemsize}", path)
    return np.memmap(path, dtype=dtype, mode="r", shape=(expected_items,))
