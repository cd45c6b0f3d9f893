"""Blocked retrieval against brute-force full-matrix versions; P@k, MRR and MRR by part of speech by hand."""

from __future__ import annotations

import numpy as np
import pytest

from xlt.analysis.dictionaries import pos_breakdown, read_pos_lexicon
from xlt.analysis.retrieval import (gold_ranks, mean_reciprocal_rank, mean_topk_cosine, precision_at_k, rank_scores,
                                    topk_cosine, topk_csls)
from xlt.utils.errors import XltError


def unit(X):
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def brute_csls(queries, targets, source_space, k_csls=10):
    """CSLS as MUSE writes it, on the full [Q,K] matrix."""
    q, t, s = unit(queries), unit(targets), unit(source_space)
    r_s = np.sort(t @ s.T, axis=1)[:, ::-1][:, :k_csls].mean(1)  # [K]
    r_t = np.sort(q @ t.T, axis=1)[:, ::-1][:, :k_csls].mean(1)  # [Q]
    return 2 * q @ t.T - r_t[:, None] - r_s[None, :]


@pytest.fixture(scope="module")
def spaces():
    rng = np.random.default_rng(0)
    return rng.normal(size=(37, 16)), rng.normal(size=(101, 16)), rng.normal(size=(83, 16))


@pytest.mark.parametrize("block", [1, 7, 10, 64, 1000])
def test_blocked_nn_matches_the_full_matrix(spaces, block):
    queries, targets, _ = spaces
    full = unit(queries) @ unit(targets).T
    scores, ids = topk_cosine(queries, targets, k=10, block_size=block)
    assert np.array_equal(ids, np.argsort(-full, axis=1)[:, :10])
    assert np.allclose(scores, np.sort(full, axis=1)[:, ::-1][:, :10], atol=1e-5)


@pytest.mark.parametrize("block", [1, 6, 32, 101, 4096])
def test_blocked_csls_matches_the_full_matrix(spaces, block):
    queries, targets, source_space = spaces
    full = brute_csls(queries, targets, source_space)
    scores, ids = topk_csls(queries, targets, k=10, source_space=source_space, block_size=block)
    assert np.array_equal(ids, np.argsort(-full, axis=1)[:, :10])
    assert np.allclose(scores, np.sort(full, axis=1)[:, ::-1][:, :10], atol=1e-5)
    # The neighbourhood term alone.
    r = mean_topk_cosine(targets, source_space, k=10, block_size=block)
    assert np.allclose(r, np.sort(unit(targets) @ unit(source_space).T, 1)[:, ::-1][:, :10].mean(1), atol=1e-5)


@pytest.mark.parametrize("block", [1, 7, 64, 1000])
def test_a_left_out_key_in_blocks_matches_the_full_matrix(spaces, block):
    """One joint space: the queries are keys 0..36 of their own space, and each leaves itself out of
    its search (query 3 does not: -1) and out of the neighbourhood terms."""
    _, space, _ = spaces
    queries = space[:37]
    exclude = np.arange(37)
    exclude[3] = -1
    cos = unit(queries) @ unit(space).T
    left_out = cos.copy()
    left_out[np.flatnonzero(exclude >= 0), exclude[exclude >= 0]] = -np.inf
    _, ids = topk_cosine(queries, space, k=10, block_size=block, exclude=exclude)
    assert np.array_equal(ids, np.argsort(-left_out, axis=1)[:, :10])
    others = unit(space) @ unit(space).T - np.diag(np.full(len(space), np.inf))  # r: each row without itself
    r = np.sort(others, axis=1)[:, ::-1][:, :10].mean(1)
    csls = 2 * cos - r[:37, None] - r[None, :]
    csls[np.flatnonzero(exclude >= 0), exclude[exclude >= 0]] = -np.inf
    scores, ids = topk_csls(queries, space, k=10, source_space=space, block_size=block, exclude=exclude,
                            own_rows=(np.arange(37), np.arange(len(space))))
    assert np.array_equal(ids, np.argsort(-csls, axis=1)[:, :10])
    assert np.allclose(scores, np.sort(csls, axis=1)[:, ::-1][:, :10], atol=1e-5)
    _, few = topk_cosine(queries[:2], space[:3], k=10, block_size=block, exclude=np.array([0, 1]))
    assert few.tolist() == [np.argsort(-left_out[0, :3])[:2].tolist(), np.argsort(-left_out[1, :3])[:2].tolist()]


def test_csls_reranks_hubs_away():
    # Target 0 is a hub: close to every query; CSLS penalises it, plain cosine does not.
    hub = np.ones((1, 4))
    targets = np.vstack([hub, np.eye(4)])
    queries = np.eye(4) + 0.6
    _, nn = topk_cosine(queries, targets, k=1)
    _, csls = topk_csls(queries, targets, k=1, csls_k=2)
    assert (nn[:, 0] == 0).all()
    assert csls[:, 0].tolist() == [1, 2, 3, 4]


def test_precision_at_k_counts_any_gold():
    predicted = np.array([[5, 1, 2], [7, 8, 9], [3, 4, 0]])
    gold = [{1, 42}, {42}, {3}]
    # query 0: gold 1 at rank 2; query 1: never; query 2: rank 1
    assert precision_at_k(predicted, gold, ks=(1, 2, 3)) == {"p@1": 1 / 3, "p@2": 2 / 3, "p@3": 2 / 3}
    with pytest.raises(XltError, match="no query"):
        precision_at_k(np.zeros((0, 3), dtype=int), [], ks=(1,))


@pytest.mark.parametrize("block", [1, 2, 100])
def test_mean_reciprocal_rank_by_hand(block):
    # Candidates on the unit circle; cosine ranks are easy to read off.
    angles = np.deg2rad([0, 30, 60, 90, 180])
    candidates = np.stack([np.cos(angles), np.sin(angles)], 1)
    queries = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    # q0: gold 60deg -> rank 3; q1: golds {0deg, 60deg} -> best is 60deg, rank 2 (90deg first);
    # q2 (45deg): gold 30deg ties with 60deg at the top -> rank 1.5 (the mean over the ties' orders).
    gold = [{2}, {0, 2}, {1}]
    # the tie at 45deg is exact only if cos(15deg) rounds alike both ways: check it, or the case tests nothing
    assert (queries[2] / np.sqrt(2)) @ candidates[1] == (queries[2] / np.sqrt(2)) @ candidates[2]
    assert gold_ranks(queries, candidates, gold, block_size=block).tolist() == [3, 2, 1.5]
    assert mean_reciprocal_rank(queries, candidates, gold, block_size=block) == pytest.approx((1 / 3 + 1 / 2 + 1 / 1.5) / 3)


@pytest.mark.parametrize("block", [1, 4, 100])
def test_a_collapsed_space_ranks_its_gold_in_the_middle_not_first(block):
    # Every query the same vector (a layer that collapsed), or zero: all candidates tie, and a rule
    # that resolved ties for the query would score MRR 1.0 on a space that retrieves nothing.
    rng = np.random.default_rng(0)
    candidates = rng.normal(size=(9, 4))
    for queries in (np.tile(candidates[:1] * 0, (5, 1)), np.zeros((5, 4))):
        # a zero query has cosine 0 with every candidate: 8 others tie with the gold, mean rank 5
        gold = [{i} for i in range(5)]
        assert gold_ranks(queries, candidates, gold, block_size=block).tolist() == [5.0] * 5
        assert rank_scores(gold_ranks(queries, candidates, gold, block_size=block))["p@1"] == 0
    # two gold candidates tied at the top: neither counts against the other
    twins = np.vstack([candidates[:1], candidates[:1], -candidates[:1]])
    assert gold_ranks(candidates[:1], twins, [{0, 1}], block_size=block).tolist() == [1.0]
    # several golds among the ties: the best one's mean rank over every order of the tied candidates
    import itertools

    for golds in ({0}, {0, 1}, {0, 2, 5}):
        orders = list(itertools.permutations(range(6)))
        expected = np.mean([1 + min(order.index(g) for g in golds) for order in orders])
        got = gold_ranks(np.zeros((1, 4)), candidates[:6], [golds], block_size=block)
        assert got.tolist() == pytest.approx([expected]), golds
    with pytest.raises(ValueError, match="excluded candidate is one of its gold"):
        gold_ranks(candidates[:1], candidates, [{0}], block_size=block, exclude=np.array([0]))


def test_vectors_that_are_not_numbers_are_refused():
    rng = np.random.default_rng(0)
    queries, candidates = rng.normal(size=(3, 4)), rng.normal(size=(6, 4))
    queries[1, 2] = np.nan
    with pytest.raises(XltError, match="NaN or infinite"):
        gold_ranks(queries, candidates, [{0}, {1}, {2}])
    candidates[4, 0] = np.inf
    with pytest.raises(XltError, match="NaN or infinite"):
        gold_ranks(candidates[:3], candidates, [{0}, {1}, {2}])


@pytest.mark.parametrize("block", [1, 3, 16, 1000])
def test_gold_ranks_blocked_match_brute_force(spaces, block):
    queries, targets, _ = spaces
    rng = np.random.default_rng(1)
    gold = [set(rng.choice(len(targets), size=rng.integers(1, 4), replace=False).tolist()) for _ in queries]
    full = unit(queries) @ unit(targets).T  # the dense [Q,K] matrix the blocked version never builds
    expected = [1 + int((row > max(row[list(g)])).sum()) for row, g in zip(full, gold)]
    assert gold_ranks(queries, targets, gold, block_size=block).tolist() == expected
    assert mean_reciprocal_rank(queries, targets, gold, block_size=block) == pytest.approx(
        np.mean([1 / r for r in expected]))
    # a candidate left out per query (its own row in a joint space; -1: none) is never counted above gold
    exclude = np.array([next(c for c in np.argsort(-row) if c not in g) if i % 3 else -1
                        for i, (row, g) in enumerate(zip(full, gold))])
    expected = [1 + sum(int(row[c] > max(row[list(g)])) for c in range(len(row)) if c != e)
                for row, g, e in zip(full, gold, exclude)]
    assert gold_ranks(queries, targets, gold, block_size=block, exclude=exclude).tolist() == expected


def test_rank_scores_by_hand():
    scores = rank_scores(np.array([1, 3, 12, 2]), ks=(1, 5, 10))
    assert scores == pytest.approx({"mrr": (1 + 1 / 3 + 1 / 12 + 1 / 2) / 4, "p@1": 0.25, "p@5": 0.75, "p@10": 0.75})
    # over 4 candidates P@5 and P@10 would be 1 whatever the ranks: left out, as precision_at_k refuses them
    assert rank_scores(np.array([1, 3, 4, 2]), ks=(1, 5, 10), candidates=4) == pytest.approx(
        {"mrr": (1 + 1 / 3 + 1 / 4 + 1 / 2) / 4, "p@1": 0.25})
    # over exactly k candidates every gold is within the top k too
    assert set(rank_scores(np.array([1.0]), candidates=5)) == {"mrr", "p@1"}
    assert set(rank_scores(np.array([1.0]), candidates=6)) == {"mrr", "p@1", "p@5"}


CONLLU = """# sent_id = 1
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tcan\tcan\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3-4\tcan't\t_\t_\t_\t_\t_\t_\t_\t_
3\tca\tcan\tAUX\tMD\t_\t0\troot\t_\t_
4\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_
4.1\tghost\t_\tNOUN\t_\t_\t_\t_\t_\t_

1\tthe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tcan\tcan\tAUX\tMD\t_\t0\troot\t_\t_
3\tcan\tcan\tAUX\tMD\t_\t2\tconj\t_\t_
4\trun\trun\tVERB\tVB\t_\t2\txcomp\t_\t_
5\trun\trun\tNOUN\tNN\t_\t2\tobj\t_\t_
"""


def test_pos_lexicon_takes_each_words_most_frequent_tag(tmp_path):
    path = tmp_path / "ud.conllu"
    path.write_text(CONLLU, encoding="utf-8")
    # "The"/"the" merge (lowercased); "can" is AUX twice, NOUN once; "run" ties -> alphabetical (NOUN);
    # the multi-word token line and the empty node are skipped.
    assert read_pos_lexicon(path) == {"the": "DET", "can": "AUX", "ca": "AUX", "n't": "PART", "run": "NOUN"}
    (tmp_path / "bad.conllu").write_text("1\tThe\tthe\tDET\n", encoding="utf-8")
    with pytest.raises(XltError, match="10 tab-separated") as error:
        read_pos_lexicon(tmp_path / "bad.conllu")
    assert error.value.line == 1


def test_pos_breakdown_by_hand():
    ranks = np.array([1, 2, 4, 1, 10])
    tags = ["NOUN", "NOUN", "VERB", "DET", "none"]
    out = pos_breakdown(ranks, tags)
    assert set(out) == {"NOUN", "VERB", "DET", "none", "open", "closed"}
    assert out["NOUN"]["mrr"] == pytest.approx(0.75) and out["NOUN"]["queries"] == 2
    assert out["VERB"]["mrr"] == pytest.approx(0.25) and out["VERB"]["p@5"] == 1.0
    assert out["open"]["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 4) / 3) and out["open"]["queries"] == 3
    assert out["closed"] == {"mrr": 1.0, "p@1": 1.0, "p@5": 1.0, "p@10": 1.0, "queries": 1}
    assert out["none"]["mrr"] == pytest.approx(0.1)
