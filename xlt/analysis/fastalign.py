"""Directional fast_align word alignments (Dyer et al., 2013) through the ``systran_align`` wheel.

``systran_align`` trains fast_align's two directional models in-process
(``generate_alignment_probabilities``: the lexical tables of p(target | source) and
p(source | target)), but its ``Aligner`` only returns the *symmetrised* links. The Procrustes
dictionary needs the forward and reverse links themselves (xlt symmetrises them with its own
grow-diag-final-and, :mod:`xlt.analysis.dictionaries`), so this module reads the two tables and
decodes each direction exactly as fast_align's final iteration does:

    a_j = argmax( p0 * t(f_j | NULL),  max_i  t(f_j | e_i) * δ(i | j, m, n) )

with fast_align's diagonal prior δ ∝ exp(-λ |i/n - j/m|) normalised over the source positions and
scaled by 1 - p0 (``-d``), or a uniform prior without ``favor_diagonal``. The wheel's ``Aligner``
decodes with the default tension λ = 4 and p0 = 0.08 whatever training optimised (the tables do
not store it), and so does this module; a test checks that grow-diag-final-and of these
directional links reproduces the wheel's own symmetrised output.

Table file layout (``systran_align`` 3.5, little endian): int32 version (2), int32 n, n
NUL-terminated words (word k has id k + 1; id 1 is ``<eps>``, the NULL word), int32 table size,
then until the end rows of (int32 source id, int32 count, count x (int32 target id, float32 p)).
"""

from __future__ import annotations

import os
import struct
import tempfile
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from xlt.utils.errors import XltError

TABLE_VERSION = 2
NULL_ID = 1
UNSEEN_PROB = 1e-9  # fast_align's TTable::prob for a pair it never saw
Link = tuple[int, int]  # (source word index, target word index)


@dataclass
class FastAlignSettings:
    """fast_align options; the defaults are crosslingual-nlp's ``fast_align -d -o -v``."""

    favor_diagonal: bool = field(default=True, metadata={"help": "fast_align -d: favour links near the diagonal."})
    optimize_tension: bool = field(default=True, metadata={"help": "fast_align -o: optimise the diagonal tension."})
    variational_bayes: bool = field(default=True, metadata={"help": "fast_align -v: Dirichlet prior on translations."})
    iterations: int = field(default=5, metadata={"help": "EM iterations (fast_align -I)."})
    prob_align_null: float = field(default=0.08, metadata={"help": "p0, the NULL-link probability (fast_align -p)."})
    diagonal_tension: float = field(default=4.0, metadata={"help": "λ of the diagonal prior (fast_align -T)."})


@dataclass
class LexicalTable:
    """One direction's t(f | e): word -> id, and {(e id, f id): probability}."""

    ids: dict[str, int]
    probs: dict[tuple[int, int], float]

    @classmethod
    def read(cls, path: str) -> "LexicalTable":
        with open(path, "rb") as f:
            data = f.read()
        try:
            version, n_words = struct.unpack_from("<ii", data, 0)
            if version != TABLE_VERSION:
                raise XltError(f"unsupported systran_align table version {version} (expected {TABLE_VERSION})", path)
            offset, ids = 8, {}
            for k in range(n_words):
                end = data.index(b"\0", offset)
                ids[data[offset:end].decode("utf-8")] = k + 1
                offset = end + 1
            offset += 4  # the table's allocated size, not needed to read it
            probs: dict[tuple[int, int], float] = {}
            while offset < len(data):
                source, count = struct.unpack_from("<ii", data, offset)
                offset += 8
                row = np.frombuffer(data, dtype=np.dtype([("f", "<i4"), ("p", "<f4")]), count=count, offset=offset)
                offset += 8 * count
                probs.update(((source, int(f)), float(p)) for f, p in zip(row["f"], row["p"]))
        except (struct.error, ValueError) as e:
            raise XltError(f"corrupt systran_align table ({e})", path) from None
        return cls(ids, probs)

    def matrix(self, source: Sequence[str], target: Sequence[str]) -> np.ndarray:
        """[m, n+1] float64: t(target_j | NULL) in column 0, t(target_j | source_i) in column i+1."""
        e = [NULL_ID] + [self.ids.get(w, -1) for w in source]
        f = [self.ids.get(w, -1) for w in target]
        return np.array([[self.probs.get((ei, fj), UNSEEN_PROB) for ei in e] for fj in f], dtype=np.float64)


def diagonal_prior(m: int, n: int, tension: float) -> np.ndarray:
    """fast_align's δ(i | j, m, n) for j = 1..m, i = 1..n: [m, n], each row sums to one."""
    j = np.arange(1, m + 1, dtype=np.float64)[:, None]
    i = np.arange(1, n + 1, dtype=np.float64)[None, :]
    unnormalised = np.exp(-np.abs(i / n - j / m) * tension)
    return unnormalised / unnormalised.sum(axis=1, keepdims=True)


def viterbi_links(table: LexicalTable, source: Sequence[str], target: Sequence[str],
                  settings: FastAlignSettings) -> list[Link]:
    """One direction's alignment: each target word to its best source word or to NULL (no link).

    Returns (source index, target index) links, in target order.
    """
    m, n = len(target), len(source)
    t = table.matrix(source, target)
    p0 = settings.prob_align_null
    if settings.favor_diagonal:
        prior = np.hstack([np.full((m, 1), p0), (1.0 - p0) * diagonal_prior(m, n, settings.diagonal_tension)])
    else:
        prior = np.full((m, n + 1), 1.0 / (n + 1))
    # argmax keeps the first maximum: NULL wins ties, then the leftmost source word (fast_align's >).
    best = np.argmax(t * prior, axis=1)
    return [(int(b) - 1, j) for j, b in enumerate(best) if b > 0]


def _check_tokens(sentences: Sequence[Sequence[str]], side: str) -> None:
    for number, words in enumerate(sentences, start=1):
        if "|||" in words:  # fast_align's column separator
            raise XltError(f"the {side} sentence contains the token '|||', which fast_align cannot read", None, number)


def align_directions(source: Sequence[Sequence[str]], target: Sequence[Sequence[str]],
                     settings: FastAlignSettings = FastAlignSettings()) -> tuple[list[list[Link]], list[list[Link]]]:
    """Train fast_align on the sentence pairs and decode both directions.

    Pairs where a side is empty are not used for training and get no links.
    Returns (forward, reverse): per sentence, links (source index, target index); forward links
    give each target word at most one source word, reverse links each source word one target word.
    """
    import systran_align

    if len(source) != len(target):
        raise ValueError(f"{len(source)} source sentences for {len(target)} target sentences")
    _check_tokens(source, "source")
    _check_tokens(target, "target")
    usable = [k for k, (s, t) in enumerate(zip(source, target)) if s and t]
    forward: list[list[Link]] = [[] for _ in source]
    reverse: list[list[Link]] = [[] for _ in source]
    if not usable:
        return forward, reverse
    with tempfile.TemporaryDirectory(prefix="xlt-fastalign-") as tmp:
        bitext, fwd, bwd = (os.path.join(tmp, name) for name in ("bitext", "forward", "reverse"))
        with open(bitext, "w", encoding="utf-8") as f:
            for k in usable:
                f.write(f"{' '.join(source[k])} ||| {' '.join(target[k])}\n")
        systran_align.generate_alignment_probabilities(
            bitext, fwd, bwd, iterations=settings.iterations, favor_diagonal=settings.favor_diagonal,
            diagonal_tension=settings.diagonal_tension, optimize_tension=settings.optimize_tension,
            variational_bayes=settings.variational_bayes, prob_align_null=settings.prob_align_null)
        forward_table, reverse_table = LexicalTable.read(fwd), LexicalTable.read(bwd)
    for k in usable:
        forward[k] = viterbi_links(forward_table, source[k], target[k], settings)
        reverse[k] = [(i, j) for j, i in viterbi_links(reverse_table, target[k], source[k], settings)]
    return forward, reverse

