"""The references beside every headline condition number (condition/reference.py): Gaussian matrices of the
same shape, against the known distributions, and the same run's matrices at initialisation."""

from __future__ import annotations

import numpy as np
import pytest

from ngptlab.condition.reference import (
    gaussian_condition,
    gaussian_reference,
    gaussian_samples,
    headline_shapes,
)


def marchenko_pastur_kappa(rows: int, cols: int) -> float:
    """sigma_max / sigma_min of a tall Gaussian matrix, large-size limit: (1 + sqrt(r)) / (1 - sqrt(r))."""
    r = min(rows, cols) / max(rows, cols)
    return (1 + np.sqrt(r)) / (1 - np.sqrt(r))


def test_gaussian_kappa_of_a_tall_matrix_sits_near_the_marchenko_pastur_edge_ratio():
    # a head block 16 x 64 (head_dim x d_model at cpu-4l): ratio 1/4, limit 3; finite size a little lower
    kappa = gaussian_condition("sv", 16, 64)
    assert 2.0 < kappa < marchenko_pastur_kappa(16, 64) * 1.15
    # taller: closer to the limit
    assert gaussian_condition("sv", 1024, 64) == pytest.approx(marchenko_pastur_kappa(1024, 64), rel=0.1)


def test_gaussian_kappa_of_a_square_matrix_follows_edelman():
    # Edelman (1988): kappa / n of an n x n real Gaussian has P(kappa / n < x) -> exp(-2/x - 2/x^2),
    # median x = 3.67 (235 at n = 64; 226 measured over 4000 samples at that finite size). The default
    # sample count is sized for the heavy tail: 1024 samples at 64 x 64, within 10% (seeds 0-5: 3.37-3.62).
    assert gaussian_samples("sv", 64, 64) == 1024
    for seed in (0, 1, 2):
        assert 0.9 * 3.67 * 64 < gaussian_condition("sv", 64, 64, seed=seed) < 1.05 * 3.67 * 64
    # square: the count follows the SVD work (n^3) within [33, 1025]; tall or wide ones concentrate: 33
    assert gaussian_samples("sv", 32, 32) == 1025 and gaussian_samples("sv", 1024, 1024) == 33
    assert gaussian_samples("sv", 16, 64) == gaussian_samples("sv", 256, 64) == 33
    assert gaussian_samples("cov", 50257, 64) == 5


def test_gaussian_covariance_kappa_is_the_squared_singular_value_ratio():
    # covariance eigenvalues are squared singular values of the centred table: MP ratio squared
    kappa = gaussian_condition("cov", 2048, 64)
    assert kappa == pytest.approx(marchenko_pastur_kappa(2048, 64) ** 2, rel=0.15)


def test_gaussian_reference_is_seeded_and_covers_every_headline_condition_number():
    ref = gaussian_reference(d_model=64, n_head=4, d_mlp=256, vocab_size=256)
    assert set(ref["headline"]) == set(ref["samples"]) == set(headline_shapes(64, 4, 256, 256))
    assert ref["samples"]["attn_condition_median"] == 1024 and ref["samples"]["embed_in_cov_condition"] == 5
    headline = ref["headline"]
    assert headline["layer3_q_head_condition_median"] == headline["attn_head_condition_median"]  # 16 x 64
    gaussian_condition.cache_clear()
    assert gaussian_reference(d_model=64, n_head=4, d_mlp=256, vocab_size=256) == ref  # the same bytes again
    with pytest.raises(ValueError, match="quantity must be 'sv' or 'cov'"):
        gaussian_condition("eig", 4, 4)
