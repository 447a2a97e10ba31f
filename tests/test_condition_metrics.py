"""Conditioning metrics against numpy/scipy on matrices with planted spectra."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg
import torch

from ngptlab.condition.metrics import (
    anisotropy,
    cosine_distribution,
    norm_distribution,
    pairwise_cosines,
    renormalize,
)
from ngptlab.observe import metrics
from ngptlab.results import json_ready, read_float

torch.set_num_threads(1)
TOL = 1e-10


def planted(singular_values, shape, seed=0) -> np.ndarray:
    """A matrix U diag(s) V^T with random orthonormal U, V and exactly the given singular values."""
    rng = np.random.default_rng(seed)
    m, n = shape
    k = len(singular_values)
    u, _ = np.linalg.qr(rng.standard_normal((m, k)))
    v, _ = np.linalg.qr(rng.standard_normal((n, k)))
    return u @ np.diag(singular_values) @ v.T


@pytest.mark.parametrize("shape", [(6, 6), (12, 5), (5, 12)])
def test_planted_spectrum_exact(shape):
    s = np.array([100.0, 20.0, 7.0, 1.0, 0.25])
    w = torch.from_numpy(planted(s, shape))
    sv = metrics.singular_values(w)
    k = min(shape)
    expected = np.concatenate([s, np.zeros(k - len(s))])
    np.testing.assert_allclose(sv, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(sv, scipy.linalg.svdvals(w.numpy()), rtol=1e-12, atol=1e-12)
    if k == len(s):
        stats = metrics.spectrum_stats(sv, TOL)
        assert stats.condition_number == pytest.approx(400.0, rel=1e-12)
        assert stats.condition_number == pytest.approx(np.linalg.cond(w.numpy()), rel=1e-10)
        assert not stats.singular
        assert stats.numerical_rank == np.linalg.matrix_rank(w.numpy()) == 5
        assert stats.stable_rank == pytest.approx(np.sum(s**2) / 100.0**2, rel=1e-12)
        p = s / s.sum()
        assert stats.effective_rank == pytest.approx(math.exp(-np.sum(p * np.log(p))), rel=1e-12)


def test_rank_deficient_matrix_is_flagged_not_huge():
    w = torch.from_numpy(planted([5.0, 3.0, 1.0], (8, 6), seed=1))  # rank 3 of 6
    stats = metrics.spectrum_stats(metrics.singular_values(w), TOL)
    assert stats.singular and math.isinf(stats.condition_number)
    assert stats.numerical_rank == 3 == np.linalg.matrix_rank(w.numpy())
    assert stats.sigma_ratio < 1e-14  # the measured ratio behind the flag is kept
    # JSON has no inf: it becomes the string "inf", which float() reads back.
    assert json_ready({"k": stats.condition_number}) == {"k": "inf"}
    assert math.isinf(read_float("inf")) and math.isnan(read_float(None))
    # The zero matrix: singular, and ranks undefined rather than a division error.
    zero = metrics.spectrum_stats(np.zeros(4), TOL)
    assert zero.singular and zero.numerical_rank == 0 and math.isnan(zero.stable_rank)


def test_just_above_tolerance_is_a_finite_condition_number():
    sv = np.array([1.0, 0.5, 2e-10])
    assert metrics.condition_number(sv, TOL) == pytest.approx(5e9)
    assert math.isinf(metrics.condition_number(np.array([1.0, 0.5, 5e-11]), TOL))


def test_float32_weights_are_analysed_in_float64():
    w32 = torch.from_numpy(planted([1e3, 1.0, 1e-3], (3, 3), seed=2)).float()
    sv = metrics.singular_values(w32)
    assert sv.dtype == np.float64
    reference = np.linalg.svd(w32.numpy().astype(np.float64), compute_uv=False)
    # a backward-stable SVD is accurate to ~eps * sigma_max in every singular value
    np.testing.assert_allclose(sv, reference, rtol=0, atol=1e-13 * reference[0])
    assert metrics.condition_number(sv, TOL) == pytest.approx(np.linalg.cond(w32.numpy().astype(np.float64)))


def test_ranks_of_identity_and_rank_one():
    eye = metrics.singular_values(torch.eye(7))
    assert metrics.stable_rank(eye) == pytest.approx(7.0)
    assert metrics.effective_rank(eye) == pytest.approx(7.0)
    rank1 = metrics.singular_values(torch.outer(torch.arange(1.0, 6.0), torch.ones(4)))
    assert metrics.effective_rank(rank1) == pytest.approx(1.0)
    assert metrics.stable_rank(rank1) == pytest.approx(1.0)


def test_renormalize_leaves_normalized_matrix_unchanged():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(10, 6, generator=g, dtype=torch.float64)
    rows = w / w.norm(dim=1, keepdim=True)
    cols = w / w.norm(dim=0, keepdim=True)
    torch.testing.assert_close(renormalize(rows, 1), rows, rtol=0, atol=1e-15)
    torch.testing.assert_close(renormalize(cols, 0), cols, rtol=0, atol=1e-15)
    # and normalizes what is not: unit rows (norm_dim 1) or unit columns (norm_dim 0)
    torch.testing.assert_close(renormalize(w, 1).norm(dim=1), torch.ones(10, dtype=torch.float64))
    torch.testing.assert_close(renormalize(w, 0).norm(dim=0), torch.ones(6, dtype=torch.float64))
    # a zero vector stays zero instead of becoming nan
    w[3] = 0
    out = renormalize(w, 1)
    assert torch.isfinite(out).all() and out[3].abs().sum() == 0


def test_renormalization_lowers_condition_of_badly_scaled_rows():
    # kappa(D W) with wildly different row norms D, and W itself well conditioned: renormalizing recovers W.
    w = torch.from_numpy(planted([1.0, 1.0, 1.0, 1.0], (4, 4), seed=3))  # orthogonal, kappa = 1
    scaled = torch.diag(torch.tensor([1.0, 10.0, 100.0, 1000.0], dtype=torch.float64)) @ w
    kappa = lambda m: metrics.condition_number(metrics.singular_values(m), TOL)  # noqa: E731
    assert kappa(scaled) == pytest.approx(1000.0)
    assert kappa(renormalize(scaled, 1)) == pytest.approx(1.0)


def test_covariance_eigenvalues_planted():
    # Rows whose mean-centred covariance has exactly the eigenvalues lams (in a random basis Q).
    rng = np.random.default_rng(4)
    n, lams = 200, np.array([9.0, 4.0, 1.0, 0.5, 0.01])
    d = len(lams)
    z = rng.standard_normal((n, d))
    z -= z.mean(axis=0)
    z, _ = np.linalg.qr(z)  # orthonormal columns, still orthogonal to the all-ones vector
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    e = math.sqrt(n - 1) * z @ np.diag(np.sqrt(lams)) @ q.T + rng.standard_normal(d)  # plus an offset
    eig = metrics.covariance_eigenvalues(torch.from_numpy(e))
    np.testing.assert_allclose(eig, lams, rtol=1e-10)
    np.testing.assert_allclose(eig, np.linalg.eigvalsh(np.cov(e, rowvar=False))[::-1], rtol=1e-10)
    assert metrics.spectrum_stats(eig, TOL).condition_number == pytest.approx(900.0, rel=1e-9)
    # fewer distinct directions than dimensions: the covariance is singular and flagged
    flat = torch.from_numpy(np.column_stack([e[:, :3], e[:, 0] + e[:, 1], np.ones(n)]))
    assert metrics.spectrum_stats(metrics.covariance_eigenvalues(flat), TOL).singular


def test_anisotropy():
    assert anisotropy(torch.ones(50, 4), 20, seed=0) == pytest.approx(1.0)
    assert anisotropy(torch.eye(30), 30, seed=0) == pytest.approx(0.0)
    g = torch.Generator().manual_seed(5)
    e = torch.randn(40, 8, generator=g, dtype=torch.float64) + 0.5
    # with the sample covering every row, it is the brute-force mean over ordered pairs i != j
    unit = e / e.norm(dim=1, keepdim=True)
    cos = (unit @ unit.T).numpy()
    brute = (cos.sum() - np.trace(cos)) / (40 * 39)
    assert anisotropy(e, 1000, seed=0) == pytest.approx(brute, rel=1e-12)
    # a sample is a fixed function of the seed
    assert anisotropy(e, 10, seed=3) == anisotropy(e, 10, seed=3)
    assert anisotropy(e, 10, seed=3) != anisotropy(e, 10, seed=4)


def test_head_blocks_and_norm_distribution():
    w = torch.arange(24.0).reshape(6, 4)
    blocks = metrics.head_blocks(w, 3)
    assert [tuple(b.shape) for b in blocks] == [(2, 4)] * 3
    torch.testing.assert_close(blocks[1], w[2:4])
    with pytest.raises(ValueError, match="cannot be split into 4 heads"):
        metrics.head_blocks(w, 4)
    dist = norm_distribution(np.array([1.0, 2.0, 3.0, 4.0]))
    assert dist["mean"] == 2.5 and dist["quantiles"]["0.5"] == 2.5 and dist["quantiles"]["1"] == 4.0
    assert dist["cv"] == pytest.approx(np.std([1, 2, 3, 4]) / 2.5)
    assert sum(dist["histogram"]["counts"]) == 4


def test_pairwise_cosine_distribution_is_the_dot_product_panel():
    g = torch.Generator().manual_seed(5)
    e = torch.randn(40, 8, generator=g, dtype=torch.float64) + 0.5
    cosines = pairwise_cosines(e, 1000, seed=0)
    unit = (e / e.norm(dim=1, keepdim=True)).numpy()
    brute = [float(unit[i] @ unit[j]) for i in range(40) for j in range(i + 1, 40)]
    np.testing.assert_allclose(cosines, brute, rtol=0, atol=1e-14)
    dist = cosine_distribution(cosines)
    assert dist["count"] == 40 * 39 // 2 and sum(dist["histogram"]["counts"]) == dist["count"]
    assert dist["histogram"]["edges"][0] == -1.0 and dist["histogram"]["edges"][-1] == 1.0
    assert dist["mean"] == pytest.approx(anisotropy(e, 1000, seed=0), rel=1e-14)


def test_per_head_spectra_of_a_planted_multi_head_matrix_match_numpy():
    """Figs. 11-12 are per-head spectra: every head's singular values, its kappa and the median over heads."""
    from ngptlab.condition.analyse import analyse_matrices
    from ngptlab.models.layers import MatrixInfo
    from ngptlab.observe.kappa import Settings

    head_kappas = [3.0, 30.0, 300.0, 3000.0]  # head h: singular values from 1 down to 1 / kappa_h
    blocks = [planted(np.geomspace(1.0, 1.0 / k, 8), (8, 32), seed=h) for h, k in enumerate(head_kappas)]
    q = np.vstack(blocks)  # [4 heads x 8 rows, 32]
    info = MatrixInfo("layers.2.attn.q", "q", 2, torch.from_numpy(q), None, norm_dim=1, n_heads=4)
    analysis = analyse_matrices([info], Settings(singular_tol=1e-12, sample_rows=16, seed=0), progress=False)
    heads = analysis.matrices["layers.2.attn.q"]["variants"]["effective"]["heads"]
    np.testing.assert_allclose(heads["condition_number"], head_kappas, rtol=1e-9)
    assert heads["condition_number_median"] == pytest.approx(np.median(head_kappas), rel=1e-9)
    whole = np.linalg.svd(q, compute_uv=False)
    record = analysis.matrices["layers.2.attn.q"]["variants"]["effective"]
    assert record["condition_number"] == pytest.approx(whole[0] / whole[-1], rel=1e-9)
    # the spectra rows: one series per head (head 0..3) and the whole matrix (head -1), sorted descending
    for h, block in enumerate(blocks):
        rows = [r for r in analysis.spectra if r[3] == "effective" and r[4] == h]
        expected = np.linalg.svd(block, compute_uv=False)
        np.testing.assert_allclose([r[7] for r in rows], expected, rtol=1e-12)
        np.testing.assert_allclose([r[8] for r in rows], expected / np.median(expected), rtol=1e-12)
    headline = analysis.headline()["effective"]
    assert headline["layer3_q_head_condition_median"] == heads["condition_number_median"]
    assert headline["layer3_q_condition"] == record["condition_number"]
