"""The word2vec text format: the exchange format of static embeddings (word2vec, fastText, MUSE).

::

    3 4                      <- header: number of rows V, dimension D
    the 0.1 -0.2 0.3 0.05    <- a word, then D numbers, separated by single spaces
    cat ...

Words contain no whitespace; rows are usually sorted by corpus frequency (most frequent first),
which is what ``max_words`` relies on (MUSE reads the first 200k rows the same way). Reading is
strict: a bad header, a row with the wrong number of values, a value that is not a number, a
repeated word, fewer rows than announced or a non-UTF-8 line is an :class:`XltError` naming the
file and the line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from xlt.utils.errors import PathLike, XltError
from xlt.utils.outputs import atomic_output
from xlt.utils.textio import read_numbered_lines


@dataclass
class Embeddings:
    """Row ``r`` of ``vectors`` (float32 [V,D]) is the vector of ``words[r]``."""

    words: list[str]
    vectors: np.ndarray

    def __post_init__(self) -> None:
        if self.vectors.ndim != 2 or len(self.words) != self.vectors.shape[0]:
            raise ValueError(f"{len(self.words)} words for vectors of shape {self.vectors.shape}")
        self.row = {w: r for r, w in enumerate(self.words)}

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])


def _header(line: str, path: str) -> tuple[int, int]:
    fields = line.split()
    try:
        n, dim = (int(f) for f in fields)
    except ValueError:
        n = dim = -1
    if len(fields) != 2 or n < 0 or dim < 1:
        raise XltError(f"expected the header 'ROWS DIMENSION' (two positive integers), got {line[:60]!r}", path, 1)
    return n, dim


def read_word2vec(path: PathLike, max_words: Optional[int] = None) -> Embeddings:
    """Read a word2vec text file -> :class:`Embeddings` (the first ``max_words`` rows if given).

    Memory: the float32 matrix [V,D] plus one line at a time.
    """
    path = str(path)
    lines = read_numbered_lines(path)
    try:
        _, first = next(lines)
    except StopIteration:
        raise XltError("empty embedding file (expected the header 'ROWS DIMENSION')", path) from None
    n, dim = _header(first, path)
    keep = n if max_words is None else min(n, max_words)
    vectors = np.empty((keep, dim), dtype=np.float32)
    words: list[str] = []
    seen: dict[str, int] = {}
    for number, line in lines:
        if len(words) == keep:
            if keep < n:
                break  # max_words reached: the rest is not read
            if line.strip():
                raise XltError(f"more rows than the {n} the header announces", path, number)
            continue
        fields = line.rstrip().split(" ")
        if len(fields) != dim + 1 or not fields[0]:
            raise XltError(f"expected a word and {dim} values (the header's dimension), got {len(fields) - 1} "
                           "values", path, number)
        try:
            row = np.asarray(fields[1:], dtype=np.float32)
        except ValueError:
            raise XltError("a value is not a number", path, number) from None
        if not np.isfinite(row).all():
            raise XltError("a value is not finite (nan or inf)", path, number)
        if fields[0] in seen:
            raise XltError(f"{fields[0]!r} already has a vector (line {seen[fields[0]]})", path, number)
        seen[fields[0]] = number
        vectors[len(words)] = row
        words.append(fields[0])
    if len(words) < keep:
        raise XltError(f"the header announces {n} rows, the file has {len(words)}", path)
    return Embeddings(words, vectors)


def _format_row(values: np.ndarray) -> str:
    # 6 significant digits, what gensim and word2vec.c write: float32 needs ~7, the vectors are
    # trained far coarser than that, and the file stays about half the size of repr().
    return " ".join(f"{x:.6g}" for x in values.tolist())


def write_word2vec(path: PathLike, words: Sequence[str], vectors: np.ndarray) -> None:
    """Write ``vectors`` (float [V,D]) with ``words`` in the word2vec text format, atomically.

    A word containing whitespace, an empty or repeated word or a non-finite value is refused
    (a reader could not parse the file back).
    """
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != len(words):
        raise ValueError(f"{len(words)} words for vectors of shape {vectors.shape}")
    if len(set(words)) != len(words):
        raise XltError("repeated words cannot be written in the word2vec format")
    bad = next((w for w in words if not w or len(w.split()) != 1 or w != w.strip()), None)
    if bad is not None:
        raise XltError(f"the word {bad!r} cannot be written in the word2vec format (empty or with whitespace)")
    if not np.isfinite(vectors).all():
        raise XltError("the vectors contain nan or inf")
    with atomic_output(str(path)) as f:
        f.write(f"{len(words)} {vectors.shape[1]}\n")
        for word, row in zip(words, vectors):
            f.write(f"{word} {_format_row(row)}\n")


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine of two vectors [D] (0 when either is zero)."""
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return 0.0 if na == 0 or nb == 0 or math.isnan(na * nb) else float(a @ b) / (na * nb)
