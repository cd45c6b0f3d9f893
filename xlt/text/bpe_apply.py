"""fastBPE's ``applybpe`` per word, in Python: for installs without fastBPE's compiled binding.

fastBPE's Python binding is built from an sdist whose pre-generated C++ no longer compiles against
Python 3.11 (it needs Cython and ``--no-build-isolation``, which ``make install`` provides), so a
plain ``pip install`` of xlt cannot count on it. :class:`PythonApplier` gives the binding's bytes:
merges by rank as in ``process_bpe`` (no hash-order dependence there, unlike ``learnbpe``), then
the vocabulary limit as in ``limitVocab`` / ``decompose``. The binding stays the fast path.
"""

from __future__ import annotations

from typing import Optional

from xlt.text.bpe_learn import END_WORD, characters
from xlt.utils.errors import PathLike
from xlt.utils.textio import read_lines

TOKEN_DELIM = "@@"


class PythonApplier:
    """Apply checked codes (and an optional checked vocabulary) to single words, as fastBPE does."""

    def __init__(self, codes_path: PathLike, vocab_path: Optional[PathLike] = None):
        self.rank: dict[tuple[str, str], int] = {}
        self.unmerge: dict[str, tuple[str, str]] = {}
        for line in read_lines(codes_path):
            left, right, _ = line.split(" ")
            self.rank[left, right] = len(self.rank)
            self.unmerge[left + right] = (left, right)
        self.vocab = {line.split(" ")[0] for line in read_lines(vocab_path)} if vocab_path else set()

    def apply(self, words: list[str]) -> list[str]:
        """``["cats"] -> ["c@@ ats"]``; every word non-empty and without ' ' or '\\n'."""
        return [self._word(w) for w in words]

    def _word(self, word: str) -> str:
        pieces = characters(word)
        rank = self.rank
        while len(pieces) > 1:
            ranked = [(rank[p], p) for p in zip(pieces, pieces[1:]) if p in rank]
            if not ranked:
                break
            left, right = min(ranked)[1]
            merged, i = [], 0
            while i < len(pieces):  # every occurrence, left to right, never overlapping
                if i + 1 < len(pieces) and pieces[i] == left and pieces[i + 1] == right:
                    merged.append(left + right)
                    i += 2
                else:
                    merged.append(pieces[i])
                    i += 1
            pieces = merged
        if self.vocab:
            pieces = self._limit(pieces)
        return (TOKEN_DELIM + " ").join(pieces)[:-len(END_WORD)]

    def _known(self, piece: str, final: bool) -> bool:
        """Whether the vocabulary has the piece as written out: ``piece@@``, or without ``</w>`` at the end."""
        return (piece[:-len(END_WORD)] if final else piece + TOKEN_DELIM) in self.vocab

    def _limit(self, pieces: list[str]) -> list[str]:
        """fastBPE's ``limitVocab``: a piece outside the vocabulary is split back along its merges
        until the halves are known or single characters (iteratively: long words nest deeply)."""
        out: list[str] = []
        for index, piece in enumerate(pieces):
            final = index == len(pieces) - 1
            if self._known(piece, final):
                out.append(piece)
                continue
            stack: list[tuple[str, bool, bool]] = [(piece, final, False)]  # (piece, final, emit as is)
            while stack:
                s, is_final, emit = stack.pop()
                if emit or s not in self.unmerge:
                    out.append(s)
                    continue
                left, right = self.unmerge[s]
                stack.append((right, is_final, self._known(right, is_final)))
                stack.append((left, False, self._known(left, False)))
        return out
