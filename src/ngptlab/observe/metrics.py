"""Spectral metrics of one matrix: pure functions of an array, no model or file in sight. What a training run
records too (its observer's condition numbers, observe/kappa.py); the condition stage's other metrics are
condition/metrics.py's, outside every train job's code key.

Conventions (the JSON and the report rely on them):
- Singular values are computed in float64 (torch.linalg.svdvals), all min(m, n) of them, descending. For the
  sizes here this is exact to ~1e-15 relative to the largest one, so the float32 weights are analysed as
  stored, not approximated.
- A matrix is *numerically singular* when sigma_min / sigma_max < singular_tol (params
  condition.singular_tol). Its condition number is then math.inf, never the huge quotient of a
  rounding-level sigma_min; the JSON writes inf as the string "inf" (ngptlab/results.py). sigma_ratio keeps
  the measured ratio behind the flag.
- The same rule applies to a covariance matrix, whose singular values are its eigenvalues.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch


def singular_values(weight: torch.Tensor, device: str | torch.device = "cpu") -> np.ndarray:
    """All min(m, n) singular values of a 2-D matrix, descending, in float64."""
    if weight.ndim != 2:
        raise ValueError(f"expected a 2-D matrix, got shape {tuple(weight.shape)}")
    w = weight.detach().to(device=device, dtype=torch.float64)
    # Same singular values; LAPACK is ~5x faster on the tall orientation (QR first) than the wide one.
    return torch.linalg.svdvals(w.T if w.shape[0] < w.shape[1] else w).cpu().numpy()


def condition_number(sv: np.ndarray, singular_tol: float) -> float:
    """kappa = sigma_max / sigma_min; math.inf when sigma_min / sigma_max < singular_tol (or all are 0)."""
    smax, smin = float(sv.max()), float(sv.min())
    if smax == 0.0 or smin < singular_tol * smax:
        return math.inf
    return smax / smin


def stable_rank(sv: np.ndarray) -> float:
    """||W||_F^2 / ||W||_2^2 = sum sigma_i^2 / sigma_max^2 (nan for the zero matrix)."""
    smax = float(sv.max())
    return float(np.sum(sv.astype(np.float64) ** 2) / smax**2) if smax > 0 else math.nan


def effective_rank(sv: np.ndarray) -> float:
    """Roy and Vetterli (2007): exp of the Shannon entropy of p_i = sigma_i / sum_j sigma_j (0 log 0 = 0)."""
    total = float(np.sum(sv))
    if total <= 0:
        return math.nan
    p = sv[sv > 0] / total
    return float(np.exp(-np.sum(p * np.log(p))))


@dataclass(frozen=True)
class SpectrumStats:
    """Summary of one spectrum (singular values of a matrix, or eigenvalues of a covariance)."""

    condition_number: float  # math.inf when numerically singular
    singular: bool
    sigma_ratio: float  # smallest / largest: the measured number behind the flag
    numerical_rank: int  # how many values exceed singular_tol * largest
    stable_rank: float
    effective_rank: float
    largest: float
    smallest: float

    def as_dict(self) -> dict:
        return asdict(self)


def spectrum_stats(sv: np.ndarray, singular_tol: float) -> SpectrumStats:
    """All scalar metrics of one spectrum of non-negative values."""
    sv = np.asarray(sv, dtype=np.float64)
    smax, smin = float(sv.max()), float(sv.min())
    kappa = condition_number(sv, singular_tol)
    return SpectrumStats(
        condition_number=kappa,
        singular=math.isinf(kappa),
        sigma_ratio=smin / smax if smax > 0 else 0.0,
        numerical_rank=int(np.sum(sv > singular_tol * smax)) if smax > 0 else 0,
        stable_rank=stable_rank(sv),
        effective_rank=effective_rank(sv),
        largest=smax,
        smallest=smin,
    )


def covariance_eigenvalues(embedding: torch.Tensor, device: str | torch.device = "cpu") -> np.ndarray:
    """Eigenvalues (descending) of the mean-centred covariance of the rows of a [n, d] table (paper Fig. 4).

    C = (E - mean)^T (E - mean) / (n - 1), formed and diagonalized in float64; absolute error ~ n * eps *
    lambda_max, far below singular_tol * lambda_max. Round-off negatives are clipped to 0.
    """
    e = embedding.detach().to(device=device, dtype=torch.float64)
    centred = e - e.mean(dim=0, keepdim=True)
    cov = centred.T @ centred / max(e.shape[0] - 1, 1)
    eig = torch.linalg.eigvalsh(cov).cpu().numpy()[::-1]
    return np.clip(eig, 0.0, None).copy()


def head_blocks(weight: torch.Tensor, n_heads: int) -> list[torch.Tensor]:
    """Split a q/k/v projection [n_heads * head_dim, d] into its per-head row blocks [head_dim, d]."""
    rows = weight.shape[0]
    if n_heads <= 0 or rows % n_heads:
        raise ValueError(f"{rows} rows cannot be split into {n_heads} heads")
    return list(torch.chunk(weight, n_heads, dim=0))
