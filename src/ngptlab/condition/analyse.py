"""Analyse every matrix of a model: the per-matrix records, the long spectra table and the headline numbers.

Input is `effective.effective_matrices(model)` (observe/effective.py; ngptlab.models.MatrixInfo: name, kind,
layer, weight, underlying, norm_dim, n_heads). Each matrix is analysed in up to three variants:
- "effective":    the linear map the forward pass applies to its normalised input, in float64 (one
                  definition for every arm: observe/effective.py);
- "renormalized": the effective matrix after post-hoc nGPT normalization (unit vectors along the embedding
                  dimension, condition/metrics.py; the paper's Fig. 10 dotted lines), computed for every arm
                  so the table is uniform: it shows how far renormalizing after the fact goes toward nGPT's
                  conditioning;
- "underlying":   the raw parameter (every arm; for gpt-lrm, gpt-scalar and gpt-orth before its multipliers,
                  for gpt-pc before its PC layer).

The per-head and covariance records and the headline numbers are those a training run's observer computes
too (observe/kappa.py, observe/headline.py). Layer numbering: `layer` in records and in the spectra table is
0-based, as in the models' state dict (the paper's 1-based layers 3 and 4: observe/headline.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch
from tqdm import tqdm

from ngptlab.condition.metrics import (
    cosine_distribution,
    norm_distribution,
    pairwise_cosines,
    renormalize,
    vector_norms,
)
from ngptlab.observe import metrics
from ngptlab.observe.headline import EMBED_KINDS, HEAD_KINDS, headline
from ngptlab.observe.kappa import Settings, covariance_record, heads_record

if TYPE_CHECKING:
    from ngptlab.models.layers import MatrixInfo

VARIANTS = ("effective", "renormalized", "underlying")


@dataclass
class Analysis:
    """Result of analysing one model: JSON-ready records plus spectra rows (without the run column)."""

    matrices: dict[str, dict] = field(default_factory=dict)
    spectra: list[tuple] = field(default_factory=list)
    variants: list[str] = field(default_factory=list)

    def headline(self) -> dict[str, dict]:
        return {variant: headline(self.matrices, variant) for variant in self.variants}


def _spectrum_rows(matrix: str, kind: str, layer: int | None, variant: str, head: int, quantity: str,
                   values: np.ndarray) -> list[tuple]:
    median = float(np.median(values))
    over = values / median if median > 0 else np.full_like(values, math.nan)
    layer_value = -1 if layer is None else layer
    return [(matrix, kind, layer_value, variant, head, quantity, i, float(v), float(o))
            for i, (v, o) in enumerate(zip(values, over, strict=True))]


def _norm_summary(norms: np.ndarray) -> dict:
    mean, std = float(norms.mean()), float(norms.std())
    return {"mean": mean, "std": std, "cv": std / mean if mean > 0 else math.nan,
            "min": float(norms.min()), "max": float(norms.max())}


def analyse_matrix(info: MatrixInfo, weight: torch.Tensor, variant: str,
                   settings: Settings) -> tuple[dict, list[tuple]]:
    """Every metric of one variant of one matrix: a JSON-ready dict and its spectra rows."""
    if not bool(torch.isfinite(weight).all()):
        # A diverged run can end with non-finite weights; say so instead of failing or inventing numbers.
        return {"finite": False}, []
    rows: list[tuple] = []
    sv = metrics.singular_values(weight, settings.device)
    record = {"finite": True, **metrics.spectrum_stats(sv, settings.singular_tol).as_dict(),
              "vector_norms": _norm_summary(vector_norms(weight, info.norm_dim))}
    rows += _spectrum_rows(info.name, info.kind, info.layer, variant, -1, "singular_value", sv)

    if info.kind in HEAD_KINDS and info.n_heads:
        head_svs, record["heads"] = heads_record(weight, info.n_heads, settings)
        for h, head_sv in enumerate(head_svs):
            rows += _spectrum_rows(info.name, info.kind, info.layer, variant, h, "singular_value", head_sv)

    if info.kind in EMBED_KINDS:
        record["row_norms"] = norm_distribution(vector_norms(weight, info.norm_dim))
        eig, record["covariance"] = covariance_record(weight, settings)
        cosines = pairwise_cosines(weight, settings.sample_rows, settings.seed)
        record["anisotropy"] = float(cosines.mean()) if cosines.size else math.nan
        record["pairwise_cosine"] = cosine_distribution(cosines)
        rows += _spectrum_rows(info.name, info.kind, info.layer, variant, -1, "cov_eigenvalue", eig)
    return record, rows


def matrix_variants(info: MatrixInfo) -> list[tuple[str, torch.Tensor]]:
    """The variants analysed for one matrix (see the module docstring)."""
    out = [("effective", info.weight), ("renormalized", renormalize(info.weight, info.norm_dim))]
    if info.underlying is not None:
        out.append(("underlying", info.underlying))
    return out


def analyse_matrices(matrices: Iterable[MatrixInfo], settings: Settings, progress: bool = True,
                     total: int | None = None) -> Analysis:
    """Analyse every matrix (MatrixInfo) in every variant it has. `matrices` is consumed one at a time, so a
    generator keeps one float64 matrix in memory at once (total: its length, for the progress bar)."""
    analysis = Analysis()
    seen_variants: set[str] = set()
    for info in tqdm(matrices, desc="condition", unit="matrix", total=total, disable=not progress):
        if info.name in analysis.matrices:
            raise ValueError(f"duplicate matrix name {info.name!r} in model.matrices()")
        entry = {"kind": info.kind, "layer": info.layer, "shape": list(info.weight.shape),
                 "norm_dim": info.norm_dim, "n_heads": info.n_heads, "variants": {}}
        for variant, weight in matrix_variants(info):
            entry["variants"][variant], rows = analyse_matrix(info, weight, variant, settings)
            analysis.spectra += rows
            seen_variants.add(variant)
        analysis.matrices[info.name] = entry
    analysis.variants = [v for v in VARIANTS if v in seen_variants]
    return analysis
