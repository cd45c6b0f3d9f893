"""GloVe (Pennington et al., 2014), compact: co-occurrence counts, then AdaGrad on the objective.

No maintained GloVe package installs here (the PyPI ones are unmaintained Cython builds from
2016-2020), so this follows the paper and the reference C code (glove.c, cooccur.c):

* counts: ``X[i,j] += 1/d`` for every pair of words at distance ``d <= window`` within one line,
  both directions (cooccur.c's symmetric default; a word pair with itself gets ``2/d``). Words
  below ``min_count`` are removed before windowing, as cooccur.c skips them.
* objective: ``J = sum over X[i,j] > 0 of f(X[i,j]) (w_i·c_j + b_i + b~_j - log X[i,j])^2`` with
  ``f(x) = min(1, (x / x_max)^alpha)``, x_max = 100, alpha = 3/4.
* optimiser: AdaGrad on the non-zero entries in a random order each epoch, learning rate 0.05,
  as glove.c: each step is ``u / sqrt(G)`` with ``u`` the learning rate times the gradient (clipped
  to [-100, 100]) and ``G`` one plus the sum of the earlier ``u²``; initial values uniform in
  ``[-0.5, 0.5] / dim`` (glove.c). glove.c updates entry by entry (Hogwild); here a batch of
  entries is applied at once with ``index_add_``, each entry's step scaled by the squared-gradient
  sums at the start of its batch -- the same update up to the order within a batch.
* output: ``w_i + c_i`` (glove.c's default ``-model 2``).

Shapes: V words, D dimensions, E non-zero co-occurrence entries.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np
import scipy.sparse as sp
import torch

from xlt.embed.config import EmbedConfig
from xlt.embed.corpus import JointCorpus
from xlt.utils import log
from xlt.utils.device import resolve_device
from xlt.utils.errors import XltError

GRAD_CLIP = 100.0  # glove.c's grad_clip_value
CHUNK_TOKENS = 1 << 19  # tokens windowed at once: E pairs per offset stay a few MB


def build_vocabulary(corpus: JointCorpus, min_count: int) -> tuple[list[str], np.ndarray]:
    """Words seen at least ``min_count`` times, most frequent first (ties: by string) -> (words, counts int64 [V])."""
    counts: Counter = Counter()
    for tokens in corpus:
        counts.update(tokens)
    kept = sorted(((w, c) for w, c in counts.items() if c >= min_count), key=lambda wc: (-wc[1], wc[0]))
    if not kept:
        raise XltError(f"no word occurs at least --min-count {min_count} times in {corpus.files}")
    return [w for w, _ in kept], np.array([c for _, c in kept], dtype=np.int64)


def _window_pairs(ids: np.ndarray, sentence: np.ndarray, window: int, V: int) -> sp.csr_matrix:
    """One direction of the distance-weighted counts of a chunk: U[a,b] += 1/d for a before b. [V,V]"""
    rows, cols, weights = [], [], []
    for d in range(1, min(window, len(ids) - 1) + 1):
        same = sentence[:-d] == sentence[d:]  # pairs never cross a line (cooccur.c resets at newlines)
        rows.append(ids[:-d][same])
        cols.append(ids[d:][same])
        weights.append(np.full(int(same.sum()), 1.0 / d))
    if not rows:
        return sp.csr_matrix((V, V))
    return sp.coo_matrix((np.concatenate(weights), (np.concatenate(rows), np.concatenate(cols))),
                         shape=(V, V)).tocsr()  # tocsr sums repeated pairs


def cooccurrence(sentences, index: dict[str, int], window: int,
                 on_sentence: Optional[Callable[[int], None]] = None) -> sp.csr_matrix:
    """Symmetric distance-weighted co-occurrence counts of ``sentences`` (token lists). float64 [V,V]

    Memory: the sparse matrix plus one chunk of :data:`CHUNK_TOKENS` tokens windowed at once.
    """
    V = len(index)
    upper = sp.csr_matrix((V, V))
    ids: list[int] = []
    sentence: list[int] = []
    n = reported = 0

    def flush() -> None:
        nonlocal upper, ids, sentence
        if ids:
            upper = upper + _window_pairs(np.array(ids, dtype=np.int64), np.array(sentence, dtype=np.int64), window, V)
        ids, sentence = [], []

    for tokens in sentences:
        kept = [index[t] for t in tokens if t in index]
        ids.extend(kept)
        sentence.extend([n] * len(kept))
        n += 1
        if len(ids) >= CHUNK_TOKENS:
            flush()
            if on_sentence is not None:
                on_sentence(n - reported)
                reported = n
    flush()
    if on_sentence is not None:
        on_sentence(n - reported)
    X = (upper + upper.T).tocsr()
    X.sum_duplicates()
    X.eliminate_zeros()
    return X


def weighting(x: np.ndarray | torch.Tensor, x_max: float = 100.0, alpha: float = 0.75):
    """f(x) = min(1, (x / x_max)^alpha), element-wise (numpy or torch)."""
    if isinstance(x, torch.Tensor):
        return torch.clamp(x / x_max, max=1.0) ** alpha
    return np.minimum(1.0, x / x_max) ** alpha


def glove_objective(X: sp.spmatrix, W: np.ndarray, C: np.ndarray, bw: np.ndarray, bc: np.ndarray,
                    x_max: float = 100.0, alpha: float = 0.75) -> float:
    """J = sum_{X_ij > 0} f(X_ij) (W_i·C_j + bw_i + bc_j - log X_ij)^2, in float64.

    X [V,V] sparse counts; W, C [V,D] word and context vectors; bw, bc [V] their biases.
    """
    coo = sp.coo_matrix(X)
    W, C = np.asarray(W, dtype=np.float64), np.asarray(C, dtype=np.float64)
    bw, bc = np.asarray(bw, np.float64), np.asarray(bc, np.float64)
    step = max(1, (1 << 22) // W.shape[1])  # entries at a time: two [step, D] gathers of 32 MB
    total = 0.0
    for start in range(0, coo.nnz, step):
        i, j, x = coo.row[start:start + step], coo.col[start:start + step], coo.data[start:start + step]
        diff = np.einsum("ed,ed->e", W[i], C[j]) + bw[i] + bc[j] - np.log(x)
        total += float((weighting(x, x_max, alpha) * diff ** 2).sum())
    return total


@dataclass
class GloveParameters:
    """Trained parameters: W, C float32 [V,D]; bw, bc float32 [V]; ``loss``: J after each epoch."""

    W: np.ndarray
    C: np.ndarray
    bw: np.ndarray
    bc: np.ndarray
    loss: list[float]

    def vectors(self) -> np.ndarray:
        """The output vectors w_i + c_i (glove.c -model 2). float32 [V,D]"""
        return self.W + self.C


def fit_glove(X: sp.spmatrix, config: EmbedConfig, on_epoch: Optional[Callable[[int, float], None]] = None,
              on_entries: Optional[Callable[[int], None]] = None) -> GloveParameters:
    """AdaGrad on J for ``config.epochs`` epochs over the non-zero entries of ``X`` [V,V].

    ``loss[e]`` is J (:func:`glove_objective`) at the parameters after epoch e, computed exactly
    in a separate pass (the running sum during an epoch mixes parameters of different steps).
    """
    if config.dim < 1 or config.epochs < 1:
        raise XltError("GloVe needs --dim and --epochs of at least 1")
    device = resolve_device(config.device)
    coo = sp.coo_matrix(X)
    if coo.nnz == 0:
        raise XltError("no co-occurrences: every line has a single kept word (more text or a lower --min-count)")
    V, D = X.shape[0], config.dim
    generator = torch.Generator().manual_seed(config.seed)
    init = lambda *shape: ((torch.rand(*shape, generator=generator) - 0.5) / D).to(device)  # noqa: E731
    W, C, bw, bc = init(V, D), init(V, D), init(V), init(V)
    GW, GC = torch.ones(V, D, device=device), torch.ones(V, D, device=device)
    Gbw, Gbc = torch.ones(V, device=device), torch.ones(V, device=device)
    i_all = torch.from_numpy(coo.row.astype(np.int64)).to(device)
    j_all = torch.from_numpy(coo.col.astype(np.int64)).to(device)
    x_all = torch.from_numpy(coo.data).to(device)
    logx_all = torch.log(x_all).float()
    f_all = weighting(x_all, config.x_max, config.alpha).float()
    lr, loss = config.learning_rate, []
    for epoch in range(config.epochs):
        order = torch.randperm(coo.nnz, generator=generator).to(device)
        for start in range(0, coo.nnz, config.batch_size):
            e = order[start:start + config.batch_size]
            i, j = i_all[e], j_all[e]
            wi, cj = W[i], C[j]
            fdiff = f_all[e] * ((wi * cj).sum(1) + bw[i] + bc[j] - logx_all[e])  # [B]
            # dJ/dw_i = 2 f diff c_j; glove.c drops the constant 2 (it is absorbed by the learning rate),
            # and its steps and sums are of the learning rate times the gradient (clipped as such): the
            # sums start at 1, so a sum of plain squared gradients shrank every step by up to 1/lr.
            step = lr * fdiff
            gw = (step[:, None] * cj).clamp_(-GRAD_CLIP, GRAD_CLIP)
            gc = (step[:, None] * wi).clamp_(-GRAD_CLIP, GRAD_CLIP)
            W.index_add_(0, i, -gw / GW[i].sqrt())
            C.index_add_(0, j, -gc / GC[j].sqrt())
            bw.index_add_(0, i, -step / Gbw[i].sqrt())
            bc.index_add_(0, j, -step / Gbc[j].sqrt())
            GW.index_add_(0, i, gw * gw)
            GC.index_add_(0, j, gc * gc)
            Gbw.index_add_(0, i, step * step)
            Gbc.index_add_(0, j, step * step)
            if on_entries is not None:
                on_entries(len(e))
        if not torch.isfinite(W).all():
            raise XltError(f"GloVe diverged in epoch {epoch + 1} (lower --learning-rate)")
        loss.append(glove_objective(coo, W.cpu().numpy(), C.cpu().numpy(), bw.cpu().numpy(), bc.cpu().numpy(),
                                    config.x_max, config.alpha))
        if on_epoch is not None:
            on_epoch(epoch + 1, loss[-1])
    return GloveParameters(W.cpu().numpy(), C.cpu().numpy(), bw.cpu().numpy(), bc.cpu().numpy(), loss)


def train_glove(corpus: JointCorpus, config: EmbedConfig) -> tuple[list[str], np.ndarray, dict]:
    """Vocabulary, co-occurrences, AdaGrad -> (words by decreasing frequency, vectors float32 [V,D], info)."""
    torch.set_num_threads(config.workers)
    with log.progress("glove vocabulary", unit="sentences") as bar:
        corpus.on_sentence = bar.advance
        words, counts = build_vocabulary(corpus, config.min_count)
        corpus.on_sentence = None
    log.info(f"glove: {len(words):,} words of at least {config.min_count} occurrences")
    with log.progress("glove co-occurrences", unit="sentences") as bar:
        X = cooccurrence(corpus, {w: r for r, w in enumerate(words)}, config.window, bar.advance)
    log.info(f"glove: {X.nnz:,} non-zero co-occurrence entries (window {config.window})")
    with log.progress("glove epochs", total=config.epochs * X.nnz, unit="entries") as bar:
        def epoch_done(epoch: int, loss: float) -> None:
            bar.update(status=f"J = {loss:.4g}")
            log.info(f"glove: epoch {epoch}/{config.epochs}: J = {loss:.6g} ({loss / X.nnz:.4g} per entry)")

        params = fit_glove(X, config, epoch_done, bar.advance)
    info = {"vocabulary": len(words), "kept_tokens": int(counts.sum()), "cooccurrence_entries": int(X.nnz),
            "loss": params.loss}
    return words, params.vectors(), info
