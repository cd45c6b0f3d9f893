"""Procrustes and iterative normalization against scipy and their defining properties."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import orthogonal_procrustes as scipy_procrustes
from scipy.stats import ortho_group

from xlt.analysis.procrustes import align_spaces, iterative_normalization, orthogonal_procrustes, unit_length
from xlt.utils.errors import XltError


def test_recovers_a_known_rotation_under_noise():
    rng = np.random.default_rng(0)
    D, P = 32, 500
    rotation = ortho_group.rvs(D, random_state=1)
    X = rng.normal(size=(P, D))
    Y = X @ rotation + 0.05 * rng.normal(size=(P, D))
    W = orthogonal_procrustes(X, Y)
    assert np.allclose(W.T @ W, np.eye(D), atol=1e-5)
    assert np.abs(W - rotation).max() < 0.02


def test_matches_scipy():
    rng = np.random.default_rng(2)
    X, Y = rng.normal(size=(40, 12)), rng.normal(size=(40, 12))
    expected, _ = scipy_procrustes(X, Y)
    assert np.allclose(orthogonal_procrustes(X, Y), expected, atol=1e-5)


def test_iterative_normalization_gives_unit_length_and_zero_mean():
    rng = np.random.default_rng(3)
    # A space far from the origin with uneven norms: what iternorm is for.
    X = rng.normal(size=(2000, 16)) * rng.uniform(0.1, 5, size=(2000, 1)) + 3.0
    out = iterative_normalization(X, rounds=5)
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert np.abs(out.mean(axis=0)).max() < 1e-3
    # Without rounds only unit length: the mean stays far from zero.
    plain = iterative_normalization(X, rounds=0)
    assert np.allclose(plain, unit_length(X)) and np.abs(plain.mean(axis=0)).min() > 0.1
    # Each round is unit length then centring: one round by hand.
    one = X / np.linalg.norm(X, axis=1, keepdims=True)
    one = one - one.mean(axis=0)
    one = one / np.linalg.norm(one, axis=1, keepdims=True)
    assert np.allclose(iterative_normalization(X, rounds=1), one, atol=1e-5)


def test_align_spaces_maps_the_whole_source_space():
    rng = np.random.default_rng(4)
    D = 8
    rotation = ortho_group.rvs(D, random_state=5)
    target = rng.normal(size=(100, D))
    source = target @ rotation.T  # source = target rotated away; pairs are the identity
    pairs = np.stack([np.arange(30), np.arange(30)], 1)  # learn from 30 pairs only
    mapped, target_n, W = align_spaces(source, target, pairs, rounds=0)
    # Rows 30..99 were never seen and still land on their targets.
    assert np.allclose(mapped[30:], target_n[30:], atol=1e-4)
    assert np.allclose(W, rotation, atol=1e-4)


def test_bad_shapes_and_rounds_are_errors():
    with pytest.raises(XltError, match="same shape"):
        orthogonal_procrustes(np.zeros((3, 4)), np.zeros((3, 5)))
    with pytest.raises(XltError, match="at least one pair"):
        orthogonal_procrustes(np.zeros((0, 4)), np.zeros((0, 4)))
    diverged = np.ones((3, 4))
    diverged[1, 2] = np.nan   # numpy's SVD would raise LinAlgError, a traceback rather than one line
    with pytest.raises(XltError, match="NaN or infinite"):
        orthogonal_procrustes(diverged, np.ones((3, 4)))
    with pytest.raises(XltError, match="rounds"):
        iterative_normalization(np.ones((2, 2)), rounds=-1)
