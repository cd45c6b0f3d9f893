"""Maximum spanning tree decoding of arc scores (Chu-Liu/Edmonds), with exactly one root child.

UD trees may be non-projective, so the parser decodes with Chu-Liu/Edmonds rather than Eisner.
Convention everywhere: ``scores[d, h]`` is the score of word ``h`` heading word ``d``; node 0 is
the artificial ROOT, words are 1..n; ``-inf`` marks an arc that may not be used.

The single-root constraint (UD gives every sentence exactly one ``root``) uses Gabow & Tarjan's
reduction: subtracting a constant M from every ROOT arc lowers every tree by M times its number
of root children; with M larger than any difference between two trees' scores, the best tree
overall then has one root child and is the best such tree (see Zmigrod et al. 2020, "Please
mind the root"). One ordinary Chu-Liu/Edmonds run does the rest. NumPy, CPU: O(n^3) at worst.
"""

from __future__ import annotations

from typing import Optional

import numpy as np


def _find_cycle(heads: np.ndarray) -> Optional[list[int]]:
    """A cycle of the head graph (``heads[0] == -1``), or None when it is a tree."""
    state = np.zeros(len(heads), dtype=np.int8)      # 0 unseen, 1 on the current path, 2 done
    for start in range(1, len(heads)):
        path = []
        node = start
        while node != -1 and state[node] == 0:
            state[node] = 1
            path.append(node)
            node = heads[node]
        if node != -1 and state[node] == 1:
            return path[path.index(node):]
        state[path] = 2
    return None


def _chu_liu_edmonds(scores: np.ndarray) -> np.ndarray:
    """Best arborescence rooted at 0 of ``scores`` [N,N] (diagonal and row 0 already ``-inf``)."""
    heads = scores.argmax(axis=1)
    heads[0] = -1
    cycle = _find_cycle(heads)
    if cycle is None:
        return heads
    cyc = np.asarray(cycle)
    in_cycle = np.zeros(len(heads), dtype=bool)
    in_cycle[cyc] = True
    rest = np.flatnonzero(~in_cycle)                  # rest[0] == 0: ROOT is never on a cycle
    c = len(rest)                                     # the contracted cycle's index in the smaller graph
    smaller = np.full((c + 1, c + 1), -np.inf)
    smaller[:c, :c] = scores[np.ix_(rest, rest)]
    # An outside head u entering the cycle at v replaces v's cycle arc: gain scores[v,u] - scores[v,heads[v]].
    gain = scores[np.ix_(cyc, rest)] - scores[cyc, heads[cyc]][:, None]          # [|C|, c]
    enter = gain.argmax(axis=0)
    smaller[c, :c] = gain[enter, np.arange(c)]
    # An outside dependent w headed from the cycle takes its best head inside the cycle.
    leave_scores = scores[np.ix_(rest, cyc)]                                      # [c, |C|]
    leave = leave_scores.argmax(axis=1)
    smaller[:c, c] = leave_scores[np.arange(c), leave]
    smaller[0, :] = -np.inf
    inner = _chu_liu_edmonds(smaller)
    out = heads.copy()
    for i in range(1, c):
        out[rest[i]] = cyc[leave[i]] if inner[i] == c else rest[inner[i]]
    entry_head = inner[c]
    out[cyc[enter[entry_head]]] = rest[entry_head]
    return out


def decode_tree(scores: np.ndarray, single_root: bool = True) -> np.ndarray:
    """Heads of the maximum spanning tree of ``scores`` [n+1, n+1] (float, ``-inf`` = forbidden arc).

    Returns an int array [n+1] with ``heads[0] == -1`` and ``heads[d]`` in 0..n for words d >= 1.
    With ``single_root``, exactly one word has head 0. ValueError where no tree of finite arcs exists.
    """
    scores = np.array(scores, dtype=np.float64)
    n = scores.shape[0] - 1
    if n < 1:
        return np.full(1, -1)
    np.fill_diagonal(scores, -np.inf)
    scores[0, :] = -np.inf
    if not np.isfinite(scores[1:]).any(axis=1).all():
        raise ValueError("a word has no allowed head")
    if single_root and n > 1:
        finite = scores[np.isfinite(scores)]
        penalty = n * (finite.max() - finite.min()) + 1.0
        scores[1:, 0] -= penalty
    heads = _chu_liu_edmonds(scores)
    # The best tree uses a forbidden arc only where no tree of allowed arcs exists (each word's finite
    # arcs may all run in a cycle): an error, not a tree the caller said cannot be.
    if not np.isfinite(scores[np.arange(1, n + 1), heads[1:]]).all():
        raise ValueError("no tree of allowed arcs spans the words")
    # The penalty buys one root child only where a one-rooted tree of allowed arcs exists: with two
    # words that may hang from the root alone, it takes both.
    if single_root and int((heads[1:] == 0).sum()) != 1:
        raise ValueError("no tree of allowed arcs with one root child spans the words")
    return heads
