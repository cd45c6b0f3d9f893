"""Nearest-neighbour and CSLS retrieval in blocks, and the scores of word/sentence retrieval.

Every search here walks the key space in blocks of ``block_size`` rows and keeps a running top-k,
so the full [queries x keys] similarity matrix never exists: a 200k x 200k CSLS search holds at most
``block_size x block_size`` scores (plus the top-k lists) at a time, on CPU or on a GPU (torch).

* :func:`topk_cosine` -- cosine nearest neighbours of each query.
* :func:`mean_topk_cosine` -- the CSLS neighbourhood term ``r(v)``: mean cosine of ``v`` to its k
  nearest neighbours in the other space (Conneau et al., 2018).
* :func:`topk_csls` -- ``CSLS(x, y) = 2 cos(x, y) - r_T(x) - r_S(y)`` with k = 10 (MUSE).
* :func:`precision_at_k` -- P@k where any gold translation counts (MUSE).
* :func:`gold_ranks` / :func:`mean_reciprocal_rank` -- Liu et al. (2020) §3.1.1: cosine, the rank of
  the gold translation among the candidates, and their mean reciprocal; :func:`rank_scores` also
  gives P@k from the same ranks.

Vectors are compared by cosine: rows are scaled to unit length here, so inputs need not be.
In one joint space a query is also one of the keys: ``exclude`` leaves a key out of a query's search
(its own row, which would always come first), and :func:`topk_csls`'s ``own_rows`` leaves each
vector's own row out of its neighbourhood term.
Shapes: Q queries, K keys, D dimensions, k neighbours.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import torch
from torch import Tensor

from xlt.analysis.align_settings import BLOCK_SIZE, CSLS_K  # noqa: F401 (one default for the library and the CLI)
from xlt.utils.errors import XltError


def as_unit_tensor(X: np.ndarray | Tensor, device: torch.device | str = "cpu") -> Tensor:
    """[N,D] -> float32 tensor on ``device`` with unit-length rows (zero rows stay zero)."""
    X = torch.as_tensor(np.asarray(X, dtype=np.float32) if isinstance(X, np.ndarray) else X)
    X = X.to(device=device, dtype=torch.float32)
    if not bool(torch.isfinite(X).all()):
        # NaN compares false with everything, so a diverged layer would rank every gold first.
        raise XltError("the vectors hold NaN or infinite values (a diverged model, or a corrupt embedding file?)")
    return torch.nn.functional.normalize(X, dim=1)


def _check_block(block_size: int) -> None:
    if block_size < 1:
        raise XltError(f"block size must be positive, got {block_size}")


def _key_ids(ids: Optional[np.ndarray | Tensor], device: torch.device) -> Optional[Tensor]:
    return None if ids is None else torch.as_tensor(np.asarray(ids), dtype=torch.long, device=device)


@torch.no_grad()
def blocked_topk(queries: Tensor, keys: Tensor, k: int, block_size: int, key_penalty: Optional[Tensor] = None,
                 scale: float = 1.0, exclude: Optional[Tensor] = None) -> tuple[Tensor, Tensor]:
    """Top-k of ``scale * q·key - key_penalty[key]`` over all keys, in blocks of both queries and keys.

    queries [Q,D], keys [K,D] (unit rows), key_penalty [K] or None, exclude [Q] (a key id left out
    of each query's search, -1: none) or None -> (scores [Q,k'], ids [Q,k']), best first;
    k' = min(k, K), or min(k, K - 1) with ``exclude``, so that a left-out key never fills a place.
    Each block contributes its own top-k, merged into a running top-k: at most
    ``block_size x block_size`` scores exist at once. Exact ties may come out in any order.
    """
    _check_block(block_size)
    Q, K = queries.shape[0], keys.shape[0]
    k = min(k, K if exclude is None else K - 1)
    out_scores = torch.empty(Q, k, dtype=torch.float32, device=queries.device)
    out_ids = torch.empty(Q, k, dtype=torch.long, device=queries.device)
    for q0 in range(0, Q, block_size):
        q = queries[q0:q0 + block_size]
        best_s = torch.empty((q.shape[0], 0), device=q.device)
        best_i = torch.empty((q.shape[0], 0), dtype=torch.long, device=q.device)
        for k0 in range(0, K, block_size):
            s = q @ keys[k0:k0 + block_size].T
            if scale != 1.0:
                s.mul_(scale)
            if key_penalty is not None:
                s.sub_(key_penalty[k0:k0 + block_size])
            if exclude is not None:
                column = exclude[q0:q0 + q.shape[0]] - k0
                rows = ((column >= 0) & (column < s.shape[1])).nonzero().flatten()
                s[rows, column[rows]] = float("-inf")
            block_s, block_i = s.topk(min(k, s.shape[1]), dim=1)
            merged_s, merged_i = torch.cat([best_s, block_s], 1), torch.cat([best_i, block_i + k0], 1)
            best_s, pick = merged_s.topk(min(k, merged_s.shape[1]), dim=1)
            best_i = merged_i.gather(1, pick)
        out_scores[q0:q0 + q.shape[0]], out_ids[q0:q0 + q.shape[0]] = best_s, best_i
    return out_scores, out_ids


def topk_cosine(queries: np.ndarray | Tensor, keys: np.ndarray | Tensor, k: int = 10,
                block_size: int = BLOCK_SIZE, device: torch.device | str = "cpu",
                exclude: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
    """Cosine nearest neighbours: (similarities float32 [Q,k], key ids int64 [Q,k]), best first.
    ``exclude`` [Q]: a key left out of each query's search (-1: none), as :func:`blocked_topk`."""
    q = as_unit_tensor(queries, device)
    s, i = blocked_topk(q, as_unit_tensor(keys, device), k, block_size, exclude=_key_ids(exclude, q.device))
    return s.cpu().numpy(), i.cpu().numpy()


def mean_topk_cosine(vectors: np.ndarray | Tensor, space: np.ndarray | Tensor, k: int = CSLS_K,
                     block_size: int = BLOCK_SIZE, device: torch.device | str = "cpu") -> np.ndarray:
    """r(v): mean cosine of each row of ``vectors`` [N,D] to its k nearest rows of ``space`` [M,D]. -> [N]."""
    s, _ = blocked_topk(as_unit_tensor(vectors, device), as_unit_tensor(space, device), k, block_size)
    return s.mean(dim=1).cpu().numpy()


def topk_csls(queries: np.ndarray | Tensor, targets: np.ndarray | Tensor, k: int = 10,
              source_space: np.ndarray | Tensor | None = None, csls_k: int = CSLS_K,
              block_size: int = BLOCK_SIZE, device: torch.device | str = "cpu", exclude: Optional[np.ndarray] = None,
              own_rows: Optional[tuple[np.ndarray, np.ndarray]] = None) -> tuple[np.ndarray, np.ndarray]:
    """CSLS retrieval: (scores float32 [Q,k], target ids int64 [Q,k]), best first.

    ``queries`` [Q,D] are (mapped) source vectors, ``targets`` [K,D] the target space and
    ``source_space`` [S,D] the whole mapped source space (default: the queries), from which each
    target's neighbourhood r_S(y) is computed. Scores are the full CSLS ``2cos - r_T(x) - r_S(y)``.
    ``exclude`` [Q]: a target left out of each query's search (-1: none). ``own_rows`` (one joint
    space): each query's own row among the targets [Q] and each target's own row in the source space
    [K] (-1: none), left out of r_T(x) and r_S(y): a neighbourhood measures the others around a vector.
    """
    q, t = as_unit_tensor(queries, device), as_unit_tensor(targets, device)
    s_space = q if source_space is None else as_unit_tensor(source_space, device)
    own_target, own_source = (None, None) if own_rows is None else (_key_ids(o, q.device) for o in own_rows)
    r_source = blocked_topk(t, s_space, csls_k, block_size, exclude=own_source)[0].mean(dim=1)  # r_S(y) [K]
    r_target = blocked_topk(q, t, csls_k, block_size, exclude=own_target)[0].mean(dim=1)  # r_T(x) [Q]
    s, i = blocked_topk(q, t, k, block_size, key_penalty=r_source, scale=2.0, exclude=_key_ids(exclude, q.device))
    return (s - r_target[:, None]).cpu().numpy(), i.cpu().numpy()


def precision_at_k(predicted: np.ndarray, gold: Sequence[set[int] | frozenset[int]],
                   ks: Sequence[int] = (1, 5, 10)) -> dict[str, float]:
    """P@k: the share of queries with ANY gold id among their first k predictions (MUSE).

    predicted int [Q,>=max(ks)] ranked ids; gold: one set of correct ids per query.
    Returns {"p@1": ..., "p@5": ..., ...} as fractions in [0, 1].
    """
    if len(gold) != len(predicted):
        raise ValueError(f"{len(predicted)} predictions for {len(gold)} gold sets")
    if len(gold) == 0:
        raise XltError("no query to evaluate")
    hits = np.array([[p in g for p in row] for row, g in zip(np.asarray(predicted).tolist(), gold)], dtype=bool)
    if hits.shape[1] < max(ks):
        # Retrieval returns min(k, candidates) ids; P@k over fewer than k candidates would count
        # every query whose gold is anywhere in the space, so it is refused rather than reported.
        raise XltError(f"P@{max(ks)} needs at least {max(ks)} candidates to rank, there are only {hits.shape[1]}")
    return {f"p@{k}": float(hits[:, :k].any(axis=1).mean()) for k in ks}


@torch.no_grad()
def gold_ranks(queries: np.ndarray | Tensor, candidates: np.ndarray | Tensor,
               gold: Sequence[set[int] | frozenset[int]], block_size: int = BLOCK_SIZE,
               device: torch.device | str = "cpu", exclude: Optional[np.ndarray] = None) -> np.ndarray:
    """The rank by cosine of each query's best-ranked gold candidate: float64 [Q], 1 = first.

    queries [Q,D], candidates [C,D]; gold: per query, the ids (rows of ``candidates``) that are
    correct; exclude int [Q]: a candidate each query does not rank (-1: none; a query's own row in a
    joint space, as for :func:`topk_cosine`). rank = 1 + the number of other candidates scoring
    strictly higher than the best gold one + m / (g + 1), where m non-gold and g gold candidates score
    the same as it (the mean rank of the best gold under a random order of ties): ties neither favour
    the query nor count against it, so a collapsed space, where everything ties, ranks its gold in
    the middle, not first. A query's excluded candidate must not be one of its gold ones. Counting needs no sort
    and no [Q,C] matrix: two blocked passes over the candidates (the gold scores, then the counts
    at and above them), at most ``block_size x block_size`` scores at a time.
    """
    _check_block(block_size)
    if len(gold) != len(queries):
        raise ValueError(f"{len(queries)} queries for {len(gold)} gold sets")
    if len(gold) == 0:
        raise XltError("no query to evaluate")
    if any(len(g) == 0 for g in gold):
        raise ValueError("every query needs at least one gold candidate")
    if exclude is not None and any(int(e) in g for e, g in zip(np.asarray(exclude).tolist(), gold)):
        raise ValueError("a query's excluded candidate is one of its gold ones")
    q, c = as_unit_tensor(queries, device), as_unit_tensor(candidates, device)
    gold_q = torch.tensor([n for n, g in enumerate(gold) for _ in g], dtype=torch.long, device=q.device)
    gold_c = torch.tensor([i for g in gold for i in sorted(g)], dtype=torch.long, device=q.device)
    higher = torch.zeros(len(gold), dtype=torch.long, device=q.device)
    level = torch.zeros(len(gold), dtype=torch.long, device=q.device)  # candidates tied with the best gold
    gold_level = torch.zeros(len(gold), dtype=torch.long, device=q.device)  # gold ones among them
    gold_values = torch.empty(len(gold_q), device=q.device)
    left_out = None if exclude is None else torch.as_tensor(np.asarray(exclude, dtype=np.int64), device=q.device)
    for q0 in range(0, q.shape[0], block_size):
        rows = slice(q0, q0 + block_size)
        n_rows = q[rows].shape[0]
        # The gold scores come from the very same block products as the counts below, so a gold
        # candidate never outscores itself through rounding.
        gold_score = torch.full((n_rows,), float("-inf"), device=q.device)
        for c0 in range(0, c.shape[0], block_size):
            s = q[rows] @ c[c0:c0 + block_size].T
            inside = (gold_q >= q0) & (gold_q < q0 + n_rows) & (gold_c >= c0) & (gold_c < c0 + s.shape[1])
            gq, gc = gold_q[inside] - q0, gold_c[inside] - c0
            gold_score.scatter_reduce_(0, gq, s[gq, gc], reduce="amax")
            gold_values[inside] = s[gq, gc]
        mine = (gold_q >= q0) & (gold_q < q0 + n_rows)
        gold_level[rows] = torch.zeros(n_rows, dtype=torch.long, device=q.device).scatter_add_(
            0, gold_q[mine] - q0, (gold_values[mine] == gold_score[gold_q[mine] - q0]).long())
        for c0 in range(0, c.shape[0], block_size):
            s = q[rows] @ c[c0:c0 + block_size].T
            if left_out is not None:
                hit = (left_out[rows] >= c0) & (left_out[rows] < c0 + s.shape[1])
                s[hit.nonzero().squeeze(1), left_out[rows][hit] - c0] = float("-inf")
            higher[rows] += (s > gold_score[:, None]).sum(dim=1)
            level[rows] += (s == gold_score[:, None]).sum(dim=1)
    # a gold candidate tied with the best one is no candidate above it (the counts are exact: the
    # gold scores come from these very products)
    return (1 + higher + (level - gold_level) / (gold_level + 1)).cpu().numpy().astype(np.float64)


def mean_reciprocal_rank(queries: np.ndarray | Tensor, candidates: np.ndarray | Tensor,
                         gold: Sequence[set[int] | frozenset[int]], block_size: int = BLOCK_SIZE,
                         device: torch.device | str = "cpu") -> float:
    """Liu et al. (2020) Eq. 2: mean over queries of 1 / rank of the gold among ``candidates`` by cosine.

    With several gold translations the best-ranked one counts (as for P@k); ranks as :func:`gold_ranks`.
    """
    return float((1.0 / gold_ranks(queries, candidates, gold, block_size, device)).mean())


def rank_scores(ranks: np.ndarray, ks: Sequence[int] = (1, 5, 10),
                candidates: Optional[int] = None) -> dict[str, float]:
    """MRR and P@k from gold ranks (float [Q], 1 = first): {"mrr": ..., "p@1": ..., ...}.

    ``candidates``: how many each query ranked; P@k for a k not below it is left out, as every gold
    would be within the top k (:func:`precision_at_k` refuses fewer for the same reason)."""
    ranks = np.asarray(ranks, dtype=np.float64)
    if ranks.size == 0:
        raise XltError("no query to evaluate")
    ks = [k for k in ks if candidates is None or k < candidates]
    return {"mrr": float((1.0 / ranks).mean()), **{f"p@{k}": float((ranks <= k).mean()) for k in ks}}
