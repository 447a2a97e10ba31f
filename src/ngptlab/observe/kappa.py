"""The condition-number records of one matrix that the condition stage and a training run's observer both
compute: per head of a q/k/v matrix (paper Fig. 5) and of an embedding table's covariance (paper Fig. 4),
with the analysis settings (params condition section) they are computed under.

Spectra come from observe/metrics.py (float64; a numerically singular matrix has kappa inf).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ngptlab.observe import metrics
from ngptlab.settings import Condition


@dataclass(frozen=True)
class Settings:
    singular_tol: float
    sample_rows: int
    seed: int
    device: str = "cpu"


def settings_of(condition: Condition, device: str) -> Settings:
    """The analysis settings of the condition section of params, computing on `device`."""
    return Settings(singular_tol=float(condition.singular_tol), sample_rows=int(condition.sample_rows),
                    seed=int(condition.seed), device=device)


def heads_record(weight: torch.Tensor, n_heads: int, settings: Settings) -> tuple[list[np.ndarray], dict]:
    """The singular values of each head's row block of a q/k/v matrix and the record of their metrics."""
    head_svs = [metrics.singular_values(block, settings.device)
                for block in metrics.head_blocks(weight, n_heads)]
    per_head = [metrics.spectrum_stats(sv, settings.singular_tol) for sv in head_svs]
    kappas = [s.condition_number for s in per_head]
    return head_svs, {
        "condition_number": kappas,
        "singular": [s.singular for s in per_head],
        "stable_rank": [s.stable_rank for s in per_head],
        "effective_rank": [s.effective_rank for s in per_head],
        "condition_number_median": float(np.median(kappas)),  # paper Fig. 5: median over heads
    }


def covariance_record(weight: torch.Tensor, settings: Settings) -> tuple[np.ndarray, dict]:
    """The eigenvalues of an embedding table's mean-centred covariance (paper Fig. 4) and their metrics."""
    eig = metrics.covariance_eigenvalues(weight, settings.device)
    cov = metrics.spectrum_stats(eig, settings.singular_tol)
    return eig, {
        "condition_number": cov.condition_number,
        "singular": cov.singular,
        "eigenvalue_ratio": cov.sigma_ratio,
        "numerical_rank": cov.numerical_rank,
        "largest": cov.largest,
        "smallest": cov.smallest,
        "median": float(np.median(eig)),
    }
