"""Orthogonal Procrustes with iterative normalization: the linear map of Wu et al. (2020) §5.1.

Two spaces are compared by the best *rotation* between them: ``W* = argmin_{W orthogonal}
||X W - Y||_F`` over paired rows of X and Y (a dictionary, parallel sentences, aligned words).
With rows as vectors the solution is ``W = U Vᵀ`` where ``U Σ Vᵀ = SVD(Xᵀ Y)`` (the paper writes
the same thing with columns: ``SVD(Y Xᵀ)``). As in MUSE, W is learned from the pairs only and
then applied to the whole source space.

Before learning, both spaces go through *iterative normalization* (Zhang et al., 2019): rows to
unit length, then centring, repeated (5 rounds by default), and a final unit-length step, so the
spaces are as close to isomorphic as a rotation can make use of (every vector on the sphere, mean
near zero). After the final step rows are exactly unit length and the mean is near zero (the last
rescaling moves it slightly; it shrinks with every round).

Shapes: N rows (the whole space), P pairs, D dimensions.
"""

from __future__ import annotations

import numpy as np

from xlt.analysis.align_settings import ITERNORM_ROUNDS  # noqa: F401 (one default for the library and the CLI)
from xlt.utils.errors import XltError


def unit_length(X: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (an all-zero row stays zero). [N,D] -> [N,D] float32."""
    X = np.asarray(X, dtype=np.float32)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.maximum(norms, np.finfo(np.float32).tiny)


def iterative_normalization(X: np.ndarray, rounds: int = ITERNORM_ROUNDS) -> np.ndarray:
    """Zhang et al. (2019): ``rounds`` x (unit length, then centre), then unit length. [N,D] -> [N,D].

    ``rounds=0`` only scales rows to unit length (cosine geometry, no centring). The mean is taken
    over the rows given, so pass the whole space (every word or sentence of one language), not
    only the dictionary pairs.
    """
    if rounds < 0:
        raise XltError(f"iterative normalization needs rounds >= 0, got {rounds}")
    X = unit_length(X)
    for _ in range(rounds):
        # Float64 mean: over 200k rows a float32 running sum would lose the small residual mean.
        X = X - X.mean(axis=0, dtype=np.float64).astype(np.float32)
        X = unit_length(X)
    return X


def orthogonal_procrustes(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """The rotation W [D,D] minimising ||X W - Y||_F for paired rows X [P,D], Y [P,D].

    ``W = U Vᵀ`` from ``SVD(Xᵀ Y)``; it maps a source row ``x`` to ``x @ W`` in the target space, and
    ``W.T`` maps back (W is orthogonal). Computed in float64 (the D x D SVD is cheap).
    """
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    if X.ndim != 2 or X.shape != Y.shape:
        raise XltError(f"Procrustes needs two paired [P,D] arrays of the same shape, got {X.shape} and {Y.shape}")
    if X.shape[0] == 0:
        raise XltError("Procrustes needs at least one pair")
    if not (np.isfinite(X).all() and np.isfinite(Y).all()):
        raise XltError("Procrustes needs finite vectors: the pairs hold NaN or infinite values (a diverged model?)")
    U, _, Vt = np.linalg.svd(X.T @ Y)
    return (U @ Vt).astype(np.float32)


def align_spaces(source: np.ndarray, target: np.ndarray, pairs: np.ndarray,
                 rounds: int = ITERNORM_ROUNDS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Normalize both spaces, learn W on the pairs, map the whole source space.

    Args:
        source: [Ns,D] every source vector; target: [Nt,D] every target vector.
        pairs: int [P,2] (source row, target row) supervision pairs.
        rounds: iterative normalization rounds (0: unit length only).
    Returns:
        (mapped source [Ns,D] = normalized source @ W, normalized target [Nt,D], W [D,D]).
    """
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    source_n = iterative_normalization(source, rounds)
    target_n = iterative_normalization(target, rounds)
    W = orthogonal_procrustes(source_n[pairs[:, 0]], target_n[pairs[:, 1]])
    return source_n @ W, target_n, W
