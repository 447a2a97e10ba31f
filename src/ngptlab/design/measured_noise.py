"""The seed noise of the loss model from a pilot's measured speed-ups (`ngptlab design --noise-from DIR`).

A seed's ln S moves with the loss noise of the baseline's target run and of the arm's run where it reaches
the target, divided by the law's slope there: to first order ln S = (e_baseline - e_arm) / s with
s = |dL / d ln T| = alpha A T^-alpha at the target's budget T (both curves have that slope where the arm meets
the target, since the arm's law is the baseline's at S T). So var(ln S) = 2 ((1 - seed_shared) seed_sd^2 +
trunk_sd^2 + run_sd^2) / s^2, solved for seed_sd with the other terms as set. var(ln S) is pooled over every
arm (not the baseline) and cell of results/speedup/*.json: sum(df sd^2) / sum(df), each arm's log.sd and df.
A first-order reading: it ignores that the pilot's law, and so its slope, may differ from the model's.

The dose-response worlds' mechanism noise (design.kappa_sd, design.angle_sd: the sd of an (arm, seed)'s ln
kappa and ln angle per step about its arm's value) is measured directly, from the points of each document's
dose_response (speedup/dose_response.py: per arm and seed, x_kappa and x_angle): pooled within arm over
every arm (the baseline too) and cell, s^2 = sum_a sum_s (x_as - xbar_a)^2 / sum_a (n_a - 1), df the
denominator; an arm with one measured seed adds nothing.
"""

from __future__ import annotations

import math
from pathlib import Path

from ngptlab.design.loss_model import LossModel
from ngptlab.errors import ResultsError
from ngptlab.speedup.document import SpeedupDocument, read_document

# The loss model's mechanism keys and the dose-response point field each is measured from
MECHANISM_KEYS = {"kappa_sd": "x_kappa", "angle_sd": "x_angle"}


def _documents(root: str | Path) -> list[SpeedupDocument]:
    return [read_document(path) for path in sorted((Path(root) / "results" / "speedup").glob("*.json"))]


def pooled_log_variance(root: str | Path) -> tuple[float, int]:
    """(pooled variance of ln S over seeds, its degrees of freedom) from root's results/speedup/*.json."""
    weighted, df_total = 0.0, 0
    for doc in _documents(root):
        for arm, entry in doc.arms.items():
            s = entry.speedup
            if arm != doc.baseline and s.log_sd is not None:
                weighted += s.log_df * s.log_sd**2
                df_total += s.log_df
    if df_total == 0:
        raise ResultsError(f"{root}/results/speedup: no speed-up with an sd over seeds to measure the noise "
                           "from")
    return weighted / df_total, df_total


def seed_sd_from(model: LossModel, log_variance: float, target_tokens: float) -> float:
    """seed_sd solving the module docstring's var(ln S) at the target's budget (0 when the other terms
    already account for all of it)."""
    slope = model.exponent * model.amplitude * target_tokens ** -model.exponent
    per_arm = log_variance * slope**2 / 2 - model.trunk_sd**2 - model.run_sd**2
    return math.sqrt(max(0.0, per_arm) / (1.0 - model.seed_shared)) if model.seed_shared < 1 else 0.0


def pooled_mechanism_sd(root: str | Path) -> dict[str, tuple[float, int]]:
    """{design key: (pooled within-arm sd over seeds, its df)} of ln kappa and ln angle per step from the
    dose_response points of root's results/speedup/*.json (module docstring); a key no arm measured on two
    seeds is left out."""
    squares = dict.fromkeys(MECHANISM_KEYS, 0.0)
    dfs = dict.fromkeys(MECHANISM_KEYS, 0)
    for doc in _documents(root):
        points = (doc.dose_response or {}).get("points") or []
        for key, field in MECHANISM_KEYS.items():
            by_arm: dict[str, list[float]] = {}
            for point in points:
                if point.get(field) is not None:
                    by_arm.setdefault(point["arm"], []).append(float(point[field]))
            for values in by_arm.values():
                mean = sum(values) / len(values)
                squares[key] += sum((v - mean) ** 2 for v in values)
                dfs[key] += len(values) - 1
    return {key: (math.sqrt(squares[key] / dfs[key]), dfs[key]) for key in MECHANISM_KEYS if dfs[key] > 0}
