"""The references beside every headline condition number (condition/reference.py): Gaussian matrices of the
same shape, against the known distributions, and the same run's matrices at initialisation."""

from __future__ import annotations

import numpy as np
import pytest

from ngptlab.condition.reference import gaussian_condition, gaussian_reference, headline_shapes


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
    # median x = 3.67; with 101 samples the sample median is within ~20% of it
    median = gaussian_condition("sv", 64, 64, samples=101)
    assert 0.8 * 3.67 * 64 < median < 1.2 * 3.67 * 64


def test_gaussian_covariance_kappa_is_the_squared_singular_value_ratio():
    # covariance eigenvalues are squared singular values of the centred table: MP ratio squared
    kappa = gaussian_condition("cov", 2048, 64)
    assert kappa == pytest.approx(marchenko_pastur_kappa(2048, 64) ** 2, rel=0.15)


def test_gaussian_reference_is_seeded_and_covers_every_headline_condition_number():
    ref = gaussian_reference(d_model=64, n_head=4, d_mlp=256, vocab_size=256)
    assert set(ref) == set(headline_shapes(64, 4, 256, 256))
    assert ref["layer3_q_head_condition_median"] == ref["attn_head_condition_median"]  # both 16 x 64
    gaussian_condition.cache_clear()
    assert gaussian_reference(d_model=64, n_head=4, d_mlp=256, vocab_size=256) == ref  # the same bytes again
    with pytest.raises(ValueError, match="quantity must be 'sv' or 'cov'"):
        gaussian_condition("eig", 4, 4)
