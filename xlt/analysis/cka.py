"""Linear centered kernel alignment (Kornblith et al. 2019), as Wu et al. (2020, §5.2) use it.

Two implementations of the same quantity, which the tests hold to agree:

* feature space (what :func:`cka` uses, cheap for n >> d)::

      CKA(X, Y) = ||YᵀX||²_F / (||XᵀX||_F ||YᵀY||_F)      X, Y centred over the n rows

* Gram-matrix form: HSIC between the centred linear kernels K = XXᵀ, L = YYᵀ
  (:func:`cka_from_grams`, O(n²) memory, the definition the estimator is derived from).

``debiased=True`` replaces HSIC by the unbiased estimator of Song et al. (2012), as Nguyen et al.
(2021) recommend when d is not small next to n: diagonals of K and L are zeroed and
HSIC₁ = [tr(K̃L̃) + 1ᵀK̃1·1ᵀL̃1/((n-1)(n-2)) - 2/(n-2)·1ᵀK̃L̃1] / (n(n-3)).
Both forms follow the arithmetic of Kornblith et al.'s reference notebook (google-research
``representation_similarity``), in float64.

The Figure 7 pipeline that feeds it is :mod:`xlt.analysis.cka_compare`, its column and table files
:mod:`xlt.analysis.cka_files`, their figures :mod:`xlt.report.cka_plots`.

Shapes: n rows (parallel sentences), d / d' features; L layers.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

# The column format's names, where xlt.report.figure7 imports them from (the format moved to cka_files).
from xlt.analysis.cka_files import COLUMN_FORMAT, check_column  # noqa: F401
from xlt.utils.errors import XltError


def _as_float64(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"expected a matrix [n, d], got shape {X.shape}")
    return X


# A representation whose centred rows are this small next to it is constant: the mean of n equal rows
# is off by a rounding error, so an exact zero test misses most constants (0.1 in 7 rows leaves 1e-17),
# while float32 activations that vary at all vary by far more (their precision is 1e-7).
CONSTANT_TOLERANCE = 1e-9


# Gram matrices are quadratic in the features (||HKH|| / ||K|| ~ (spread / mean)²), and centring one
# of a constant leaves float64 rounding (1e-16 of it).
GRAM_CONSTANT_TOLERANCE = 1e-13


def _is_constant(centred: np.ndarray, original: np.ndarray, tolerance: float = CONSTANT_TOLERANCE) -> bool:
    return bool(np.linalg.norm(centred) <= tolerance * np.linalg.norm(original))


def _undefined() -> XltError:
    return XltError("CKA is undefined: one representation is constant over all rows")


def _check_rows(X: np.ndarray, Y: np.ndarray, debiased: bool) -> int:
    n = X.shape[0]
    if Y.shape[0] != n:
        raise XltError(f"CKA needs the same number of rows on both sides, got {n} and {Y.shape[0]}")
    if n < (4 if debiased else 2):
        raise XltError(f"CKA needs at least {4 if debiased else 2} rows, got {n}")
    return n


class FeatureStats:
    """A centred representation [n, d] with what every CKA against it reuses.

    Attributes: ``centred`` float64 [n, d]; ``row_sq`` squared row norms [n] (= diag of the Gram
    matrix); ``self_similarity`` ||XᵀX||²_F, or its debiased counterpart.
    """

    def __init__(self, X: np.ndarray, debiased: bool = False):
        X = _as_float64(X)
        if not np.isfinite(X).all():
            # NaN would come out as a CKA of NaN, which orderings downstream read as a finding
            raise XltError("CKA is undefined: the representation holds NaN or infinite values (a diverged model?)")
        self.centred = X - np.mean(X, axis=0)
        self.constant = _is_constant(self.centred, X)
        self.debiased = debiased
        self.row_sq = np.einsum("ij,ij->i", self.centred, self.centred)
        gram_frobenius_sq = float(np.linalg.norm(self.centred.T @ self.centred) ** 2)
        self.self_similarity = self._adjust(gram_frobenius_sq, self) if debiased else gram_frobenius_sq

    def _adjust(self, cross: float, other: "FeatureStats") -> float:
        """Turn ||YᵀX||²_F of centred features into n(n-3)·HSIC₁ (the unbiased estimator, scaled).

        With centred features 1ᵀK1 = 0, so tr(K̃L̃), 1ᵀK̃1 and 1ᵀK̃L̃1 reduce to the row-norm terms below.
        """
        n = self.centred.shape[0]
        return (cross - n / (n - 2.0) * float(self.row_sq @ other.row_sq)
                + float(self.row_sq.sum()) * float(other.row_sq.sum()) / ((n - 1.0) * (n - 2.0)))

    def similarity(self, other: "FeatureStats") -> float:
        """CKA between this representation and ``other`` (same n, same estimator)."""
        _check_rows(self.centred, other.centred, self.debiased)
        if self.constant or other.constant:
            raise _undefined()
        cross = float(np.linalg.norm(other.centred.T @ self.centred) ** 2)
        if self.debiased:
            cross = self._adjust(cross, other)
        denominator = np.sqrt(max(self.self_similarity * other.self_similarity, 0.0))
        if denominator == 0.0:  # the debiased estimator of a near-constant representation
            raise _undefined()
        return float(cross / denominator)


def cka(X: np.ndarray, Y: np.ndarray, debiased: bool = False) -> float:
    """Linear CKA between X [n, d] and Y [n, d'] (feature-space form)."""
    _check_rows(np.asarray(X), np.asarray(Y), debiased)
    return FeatureStats(X, debiased).similarity(FeatureStats(Y, debiased))


def center_gram(K: np.ndarray, debiased: bool = False) -> np.ndarray:
    """Centre a Gram matrix [n, n]: HKH, or the U-centring of the unbiased estimator (zero diagonal)."""
    K = np.array(K, dtype=np.float64)  # a copy: centring works in place
    n = K.shape[0]
    if debiased:
        np.fill_diagonal(K, 0.0)
        means = K.sum(axis=0) / (n - 2.0)
        means -= means.sum() / (2.0 * (n - 1.0))
        K -= means[:, None]
        K -= means[None, :]
        np.fill_diagonal(K, 0.0)
    else:
        means = K.mean(axis=0)
        means -= means.mean() / 2.0
        K -= means[:, None]
        K -= means[None, :]
    return K


def cka_from_grams(K: np.ndarray, L: np.ndarray, debiased: bool = False) -> float:
    """CKA from two Gram matrices [n, n] (any kernel; XXᵀ and YYᵀ give linear CKA)."""
    _check_rows(K, L, debiased)
    Kc, Lc = center_gram(K, debiased), center_gram(L, debiased)
    if any(_is_constant(c, np.asarray(g), GRAM_CONSTANT_TOLERANCE) for c, g in ((Kc, K), (Lc, L))):
        raise _undefined()
    return float(Kc.ravel() @ Lc.ravel() / (np.linalg.norm(Kc) * np.linalg.norm(Lc)))


def cka_gram_form(X: np.ndarray, Y: np.ndarray, debiased: bool = False) -> float:
    """Linear CKA through the Gram matrices XXᵀ and YYᵀ (O(n²) memory; a cross-check of :func:`cka`)."""
    X, Y = _as_float64(X), _as_float64(Y)
    if any(_is_constant(Z - Z.mean(axis=0), Z) for Z in (X, Y)):   # decided on the features, as cka does
        raise _undefined()
    return cka_from_grams(X @ X.T, Y @ Y.T, debiased)


def per_layer_cka(A: np.ndarray, B: np.ndarray, debiased: bool = False, matrix: bool = False) -> np.ndarray:
    """CKA of two stacks of layer representations A [L, n, d], B [L', n, d'].

    Returns [L] (layer i of A against layer i of B; needs L == L') or, with ``matrix``, [L, L']
    (every layer of A against every layer of B).
    """
    if A.shape[1] != B.shape[1]:
        raise XltError(f"CKA needs the same sentences on both sides, got {A.shape[1]} and {B.shape[1]}")
    if not matrix and A.shape[0] != B.shape[0]:
        raise XltError(f"per-layer CKA needs as many layers on both sides, got {A.shape[0]} and {B.shape[0]}")
    if not matrix:  # one layer pair in memory at a time
        return np.array([FeatureStats(A[i], debiased).similarity(FeatureStats(B[i], debiased))
                         for i in range(A.shape[0])])
    stats_a = [FeatureStats(A[i], debiased) for i in range(A.shape[0])]  # float64 copies: L x n x d x 8 B
    out = np.empty((A.shape[0], B.shape[0]))
    for j in range(B.shape[0]):
        stats_b = FeatureStats(B[j], debiased)
        out[:, j] = [s.similarity(stats_b) for s in stats_a]
    return out


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson correlation of two equally long sequences (at least 3 values, neither constant)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.size < 3:
        raise XltError(f"a correlation needs two sequences of at least 3 values, got {x.size} and {y.size}")
    if np.std(x) == 0 or np.std(y) == 0:
        raise XltError("a correlation with a constant sequence is undefined")
    return float(np.corrcoef(x, y)[0, 1])
