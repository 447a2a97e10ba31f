"""The condition stage's metrics of a matrix or an embedding table beyond its spectrum (observe/metrics.py):
its vector norms, post-hoc renormalisation and pairwise cosines. Pure functions of an array.

A new metric of the condition stage goes here (or into condition/analyse.py, from the spectra
observe/metrics.py gives): no training run records it, so it is in no train job's code key and reruns the
condition jobs alone.
"""

from __future__ import annotations

import math

import numpy as np
import torch

NORM_QUANTILES = (0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0)


def renormalize(weight: torch.Tensor, norm_dim: int) -> torch.Tensor:
    """Post-hoc nGPT normalization: every vector along norm_dim (the embedding dimension) scaled to unit norm.

    norm_dim=1 normalizes rows (embeddings, input projections), norm_dim=0 columns (output projections), as
    nGPT does (paper Section 2.1). A zero vector stays zero rather than becoming nan.
    """
    w = weight.detach().to(torch.float64)
    norms = torch.linalg.vector_norm(w, dim=norm_dim, keepdim=True)
    return w / torch.where(norms > 0, norms, torch.ones_like(norms))


def vector_norms(weight: torch.Tensor, norm_dim: int) -> np.ndarray:
    """Norms of the vectors along norm_dim (row norms of an embedding table)."""
    w = weight.detach().to(torch.float64)
    return torch.linalg.vector_norm(w, dim=norm_dim).cpu().numpy()


def norm_distribution(norms: np.ndarray, bins: int = 32) -> dict:
    """Quantiles, mean, std, coefficient of variation and a histogram of a set of vector norms."""
    norms = np.asarray(norms, dtype=np.float64)
    mean, std = float(norms.mean()), float(norms.std())
    lo, hi = float(norms.min()), float(norms.max())
    # Unit-normalized rows have a spread at rounding level, too narrow for 32 bins: widen it to 1e-6.
    width = max(hi - lo, 1e-6 * max(abs(hi), 1e-30))
    centre = (lo + hi) / 2
    counts, edges = np.histogram(norms, bins=bins, range=(centre - width / 2, centre + width / 2))
    return {
        "count": int(norms.size),
        "mean": mean,
        "std": std,
        "cv": std / mean if mean > 0 else math.nan,
        "quantiles": {f"{q:g}": float(np.quantile(norms, q)) for q in NORM_QUANTILES},
        "histogram": {"edges": edges.tolist(), "counts": counts.tolist()},
    }


def pairwise_cosines(embedding: torch.Tensor, sample_rows: int, seed: int) -> np.ndarray:
    """Cosine similarity of every pair of distinct rows (i < j) of a fixed random sample of rows.

    The sample is a pure function of (seed, number of rows, sample_rows), so every run with the same
    vocabulary is measured on the same tokens. Zero rows count as cosine 0.
    """
    n = embedding.shape[0]
    k = min(sample_rows, n)
    if k < 2:
        return np.empty(0)
    idx = np.sort(np.random.default_rng(seed).choice(n, size=k, replace=False))
    rows = embedding.detach()[torch.from_numpy(idx)].to(torch.float64)
    unit = renormalize(rows, norm_dim=1)
    gram = (unit @ unit.T).cpu().numpy()
    return gram[np.triu_indices(k, 1)]


def anisotropy(embedding: torch.Tensor, sample_rows: int, seed: int) -> float:
    """Mean pairwise cosine similarity over a fixed random sample of rows (each row not with itself)."""
    cosines = pairwise_cosines(embedding, sample_rows, seed)
    return float(cosines.mean()) if cosines.size else math.nan


def cosine_distribution(cosines: np.ndarray, bins: int = 40) -> dict:
    """Mean and a histogram on [-1, 1] of pairwise cosines (the paper's Fig. 4 dot-product panel)."""
    counts, edges = np.histogram(cosines, bins=bins, range=(-1.0, 1.0))
    return {"count": int(cosines.size), "mean": float(cosines.mean()) if cosines.size else math.nan,
            "histogram": {"edges": edges.tolist(), "counts": counts.tolist()}}
