"""Chu-Liu/Edmonds decoding against exhaustive search over every tree of small sentences."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from xlt.finetune.mst import decode_tree


def all_trees(n: int) -> np.ndarray:
    """Every head assignment of words 1..n that is a tree rooted at 0: int array [K, n+1], column 0 = -1."""
    choices = [[h for h in range(n + 1) if h != d] for d in range(1, n + 1)]
    heads = np.array(list(itertools.product(*choices)), dtype=np.int64).reshape(-1, n)
    full = np.concatenate([np.zeros((len(heads), 1), dtype=np.int64), heads], axis=1)
    reach = np.tile(np.arange(n + 1), (len(full), 1))
    for _ in range(n):
        reach = np.take_along_axis(full, reach, axis=1)
    trees = full[(reach == 0).all(axis=1)]
    trees[:, 0] = -1
    return trees


def tree_scores(trees: np.ndarray, scores: np.ndarray) -> np.ndarray:
    n = trees.shape[1] - 1
    return scores[np.arange(1, n + 1), trees[:, 1:]].sum(axis=1)


def is_tree(heads: np.ndarray) -> bool:
    n = len(heads) - 1
    for d in range(1, n + 1):
        node, steps = d, 0
        while node != 0 and steps <= n:
            node, steps = heads[node], steps + 1
        if node != 0:
            return False
    return heads[0] == -1


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_decoding_finds_the_best_tree(n):
    rng = np.random.default_rng(n)
    trees = all_trees(n)
    single = trees[(trees[:, 1:] == 0).sum(axis=1) == 1]
    for trial in range(25 if n < 6 else 6):
        scores = rng.normal(size=(n + 1, n + 1)) * (3 if trial % 2 else 1)
        heads = decode_tree(scores, single_root=False)
        assert is_tree(heads)
        assert tree_scores(heads[None], scores)[0] == pytest.approx(tree_scores(trees, scores).max())
        rooted = decode_tree(scores, single_root=True)
        assert is_tree(rooted) and (rooted[1:] == 0).sum() == 1
        assert tree_scores(rooted[None], scores)[0] == pytest.approx(tree_scores(single, scores).max())


def test_exhaustive_enumeration_counts_trees():
    # Cayley: (n+1)^(n-1) spanning trees rooted at node 0 of n+1 labelled nodes.
    assert [len(all_trees(n)) for n in range(1, 6)] == [(n + 1) ** (n - 1) for n in range(1, 6)]


def test_root_is_forced_to_one_child_even_when_every_word_prefers_it():
    scores = np.full((5, 5), -5.0)
    scores[1:, 0] = 10.0                        # every word's best head is ROOT
    heads = decode_tree(scores, single_root=True)
    assert (heads[1:] == 0).sum() == 1 and is_tree(heads)
    assert (decode_tree(scores, single_root=False)[1:] == 0).all()


def test_forbidden_arcs_are_never_used():
    rng = np.random.default_rng(7)
    for _ in range(50):
        scores = rng.normal(size=(6, 6))
        scores[3, 2] = scores[4, 0] = -np.inf
        heads = decode_tree(scores)
        assert heads[3] != 2 and heads[4] != 0 and is_tree(heads)


def test_long_sentences_still_give_trees():
    rng = np.random.default_rng(3)
    for n in (12, 40):
        scores = rng.normal(size=(n + 1, n + 1))
        heads = decode_tree(scores)
        assert is_tree(heads) and (heads[1:] == 0).sum() == 1
        # Local optimality: no tree one head away (with one root child) scores higher.
        best = tree_scores(heads[None], scores)[0]
        for d in range(1, n + 1):
            for h in range(n + 1):
                if h in (d, heads[d]) or (h == 0) != (heads[d] == 0):
                    continue
                other = heads.copy()
                other[d] = h
                if is_tree(other):
                    assert tree_scores(other[None], scores)[0] <= best + 1e-9


def test_one_word_and_empty():
    assert decode_tree(np.zeros((2, 2))).tolist() == [-1, 0]
    assert decode_tree(np.zeros((1, 1))).tolist() == [-1]
    with pytest.raises(ValueError, match="no allowed head"):
        decode_tree(np.array([[0.0, 0.0], [-np.inf, 0.0]]))


def test_no_tree_of_allowed_arcs_is_an_error_not_a_forbidden_arc():
    # words 1 and 2 may only head each other: every word has an allowed head, but no allowed tree
    scores = np.full((3, 3), -np.inf)
    scores[1, 2] = scores[2, 1] = 1.0
    for single_root in (True, False):
        with pytest.raises(ValueError, match="no tree of allowed arcs"):
            decode_tree(scores, single_root=single_root)
    scores[2, 0] = 0.0  # one allowed arc from ROOT: 0 -> 2 -> 1
    assert decode_tree(scores).tolist() == [-1, 2, 0]
    # both words may hang from ROOT alone: a tree, but not a one-rooted one (it came back with two)
    only_root = np.full((3, 3), -np.inf)
    only_root[1, 0] = only_root[2, 0] = 0.0
    assert decode_tree(only_root, single_root=False).tolist() == [-1, 0, 0]
    with pytest.raises(ValueError, match="one root child"):
        decode_tree(only_root)
