"""The headline numbers: what the report and the cross-arm table compare across arms, read from the records
of a model's matrices (the condition stage's analysis, or the observer's kappa records of a training run).

Layer numbering as observe/tracked.py's: headline keys say layer3_*/layer4_* in the paper's 1-based numbering.
A training run records only tracked.py's keys, so a new headline number is in no train job's code key.
"""

from __future__ import annotations

import numpy as np

from ngptlab.observe.tracked import PAPER_LAYERS, paper_kappas

EMBED_KINDS = ("embed_in", "embed_out")
ATTN_KINDS = ("q", "k", "v", "o")
HEAD_KINDS = ("q", "k", "v")
MLP_KINDS = ("mlp_u", "mlp_v", "mlp_o")


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

    kappas = paper_kappas(records, variant)  # as a training run records them
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
            key = f"layer{layer}_{kind}_head_condition_median"
            out[key] = kappas[key]
    out["stable_rank_median"] = _median(collect(ATTN_KINDS + MLP_KINDS, "stable_rank"))
    out["effective_rank_median"] = _median(collect(ATTN_KINDS + MLP_KINDS, "effective_rank"))
    return out
