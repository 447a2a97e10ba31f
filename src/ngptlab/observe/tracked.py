"""The condition numbers a training run records over training (observe/observer.py) and the condition stage
gives among its headline numbers at the end (observe/headline.py), read the same way from the records of a
model's matrices: the ones the paper's conditioning account rests on. Torch-free.

Layer numbering: `layer` in records is 0-based, as in the models' state dict; the paper's "layers 3 and 4"
(Figs. 11-12) are read as 1-based, i.e. 0-based layers 2 and 3, which also exist in the 4-layer CPU scale.
"""

from __future__ import annotations

PAPER_LAYERS = (3, 4)  # 1-based, as the paper's Figs. 11-12 label them
# The condition numbers the paper's conditioning account rests on, which a training run records over training
# (observe/observer.py) and the condition stage's headline gives at the end (observe/headline.py).
KAPPA_KEYS = ("embed_in_cov_condition", *(f"layer{layer}_{kind}_head_condition_median"
                                          for layer in PAPER_LAYERS for kind in ("q", "k")))


def paper_kappas(records: dict[str, dict], variant: str) -> dict[str, float | None]:
    """KAPPA_KEYS from the records of a model's matrices (the condition stage's, or the observer's records of
    the tracked matrices): the input embedding's covariance (paper Fig. 4), the median over heads of q and k
    in the paper's layers 3 and 4 (0-based layers 2 and 3; Figs. 11-12). None where the model has no such
    matrix or variant."""
    def value(kind: str, layer: int | None, *path: str) -> float | None:
        recs = [r for r in records.values() if r["kind"] == kind and (layer is None or r["layer"] == layer)]
        node = recs[0]["variants"].get(variant) if recs else None
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        return node

    out = {"embed_in_cov_condition": value("embed_in", None, "covariance", "condition_number")}
    for layer in PAPER_LAYERS:
        for kind in ("q", "k"):
            out[f"layer{layer}_{kind}_head_condition_median"] = value(kind, layer - 1, "heads",
                                                                      "condition_number_median")
    return out
