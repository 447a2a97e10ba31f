"""Analyse every matrix of a model: the per-matrix records, the long spectra table and the headline numbers.

Input is `effective.effective_matrices(model)` (ngptlab.models.MatrixInfo: name, kind, layer, weight,
underlying, norm_dim, n_heads). Each matrix is analysed in up to three variants:
- "effective":    the linear map the forward pass applies to its normalised input, in float64 (one
                  definition for every arm: condition/effective.py);
- "renormalized": the effective matrix after post-hoc nGPT normalization (unit vectors along the embedding
                  dimension, metrics.renormalize; the paper's Fig. 10 dotted lines), computed for every arm
                  so the table is uniform: it shows how far renormalizing after the fact goes toward nGPT's
                  conditioning;
- "underlying":   the raw parameter (every arm; for gpt-lrm, gpt-scalar and gpt-orth before its multipliers).

Layer numbering: `layer` in records and in the spectra table is 0-based, as in the models' state dict. The
paper's "layers 3 and 4" (Figs. 11-12) are read as 1-based, i.e. the 3rd and 4th blocks = 0-based layers 2 and
3, which also exist in the 4-layer CPU scale; headline keys say layer3_*/layer4_* in the paper's numbering.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch
from tqdm import tqdm

from ngptlab.condition import metrics

if TYPE_CHECKING:
    from ngptlab.models import MatrixInfo

EMBED_KINDS = ("embed_in", "embed_out")
ATTN_KINDS = ("q", "k", "v", "o")
HEAD_KINDS = ("q", "k", "v")
MLP_KINDS = ("mlp_u", "mlp_v", "mlp_o")
VARIANTS = ("effective", "renormalized", "underlying")
PAPER_LAYERS = (3, 4)  # 1-based, as the paper's Figs. 11-12 label them


@dataclass(frozen=True)
class Settings:
    singular_tol: float
    sample_rows: int
    seed: int
    device: str = "cpu"


def settings_of(condition: dict, device: str) -> Settings:
    """The analysis settings of the condition section of params, computing on `device`."""
    return Settings(singular_tol=float(condition["singular_tol"]), sample_rows=int(condition["sample_rows"]),
                    seed=int(condition["seed"]), device=device)


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


def analyse_matrix(info: MatrixInfo, weight: torch.Tensor, variant: str,
                   settings: Settings) -> tuple[dict, list[tuple]]:
    """Every metric of one variant of one matrix: a JSON-ready dict and its spectra rows."""
    if not bool(torch.isfinite(weight).all()):
        # A diverged run can end with non-finite weights; say so instead of failing or inventing numbers.
        return {"finite": False}, []
    rows: list[tuple] = []
    sv = metrics.singular_values(weight, settings.device)
    record = {"finite": True, **metrics.spectrum_stats(sv, settings.singular_tol).as_dict(),
              "vector_norms": _norm_summary(metrics.vector_norms(weight, info.norm_dim))}
    rows += _spectrum_rows(info.name, info.kind, info.layer, variant, -1, "singular_value", sv)

    if info.kind in HEAD_KINDS and info.n_heads:
        head_svs, record["heads"] = heads_record(weight, info.n_heads, settings)
        for h, head_sv in enumerate(head_svs):
            rows += _spectrum_rows(info.name, info.kind, info.layer, variant, h, "singular_value", head_sv)

    if info.kind in EMBED_KINDS:
        record["row_norms"] = metrics.norm_distribution(metrics.vector_norms(weight, info.norm_dim))
        eig, record["covariance"] = covariance_record(weight, settings)
        cosines = metrics.pairwise_cosines(weight, settings.sample_rows, settings.seed)
        record["anisotropy"] = float(cosines.mean()) if cosines.size else math.nan
        record["pairwise_cosine"] = metrics.cosine_distribution(cosines)
        rows += _spectrum_rows(info.name, info.kind, info.layer, variant, -1, "cov_eigenvalue", eig)
    return record, rows


def matrix_variants(info: MatrixInfo) -> list[tuple[str, torch.Tensor]]:
    """The variants analysed for one matrix (see the module docstring)."""
    out = [("effective", info.weight), ("renormalized", metrics.renormalize(info.weight, info.norm_dim))]
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


# ----------------------------------------------------------------------------------------------------------
# Headline numbers: what the report and the cross-arm table compare across arms


def _median(values: list[float]) -> float | None:
    # inf (numerically singular) takes part in the median as the largest value; None when there is nothing.
    return float(np.median(values)) if values else None


def headline(records: dict[str, dict], variant: str) -> dict:
    """The headline numbers of one variant; None where the model has no such matrix or variant.

    embed_{in,out}_cov_condition   condition number of the embeddings' mean-centred covariance (paper Fig. 4)
    embed_{in,out}_norm_cv         coefficient of variation of the embedding row norms
    embed_{in,out}_anisotropy      mean pairwise cosine of a fixed sample of rows
    attn_condition_median          median over q, k, v, o of all layers, whole-matrix condition numbers
    attn_head_condition_median     median over layers, q/k/v and heads of per-head condition numbers (Fig. 5)
    mlp_condition_median           median over mlp_u, mlp_v, mlp_o of all layers
    layer{3,4}_{q,k}_condition     whole-matrix condition number, paper's 1-based layers 3 and 4 (Figs. 11-12)
    layer{3,4}_{q,k}_head_condition_median   median over heads of the same matrix
    stable_rank_median, effective_rank_median   over all attention and MLP matrices (whole)
    """
    def metric(rec: dict, *path):
        value = rec["variants"].get(variant)
        for key in path:
            if not isinstance(value, dict) or key not in value:
                return None
            value = value[key]
        return value

    out: dict[str, float | None] = {}
    for kind in EMBED_KINDS:
        recs = [r for r in records.values() if r["kind"] == kind]
        rec = recs[0] if recs else None
        out[f"{kind}_cov_condition"] = metric(rec, "covariance", "condition_number") if rec else None
        out[f"{kind}_norm_cv"] = metric(rec, "row_norms", "cv") if rec else None
        out[f"{kind}_anisotropy"] = metric(rec, "anisotropy") if rec else None

    def collect(kinds, *path) -> list[float]:
        values = [metric(r, *path) for r in records.values() if r["kind"] in kinds]
        return [v for v in values if v is not None]

    out["attn_condition_median"] = _median(collect(ATTN_KINDS, "condition_number"))
    head_kappas = [k for ks in collect(HEAD_KINDS, "heads", "condition_number") for k in ks]
    out["attn_head_condition_median"] = _median(head_kappas)
    out["mlp_condition_median"] = _median(collect(MLP_KINDS, "condition_number"))
    for layer in PAPER_LAYERS:
        for kind in ("q", "k"):
            recs = [r for r in records.values() if r["kind"] == kind and r["layer"] == layer - 1]
            rec = recs[0] if recs else None
            out[f"layer{layer}_{kind}_condition"] = metric(rec, "condition_number") if rec else None
            out[f"layer{layer}_{kind}_head_condition_median"] = (
                metric(rec, "heads", "condition_number_median") if rec else None)
    out["stable_rank_median"] = _median(collect(ATTN_KINDS + MLP_KINDS, "stable_rank"))
    out["effective_rank_median"] = _median(collect(ATTN_KINDS + MLP_KINDS, "effective_rank"))
    return out
