"""The shape of the loss between two budgets: a power law L = E + A T^-alpha, fitted per (arm, seed).

Between two measured budgets the estimator needs the tokens at which the loss reaches the target. A chord in
log tokens treats the loss as linear in ln T there, but final losses are convex in ln T (they approach an
irreducible loss E as a power of T), so the chord reaches the target too early, by more the wider the gap.
Fitting L = E + A T^-alpha over all of one (arm, seed)'s budgets gives E; ln(L - E) is then linear in ln T
and the interpolation between the two budgets that bracket the target is a chord in those coordinates,
through both measured losses. The fit needs three budgets (three parameters) with the loss falling at
each; otherwise, or when it fails, the estimator keeps the chord in log tokens and says why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy import optimize

POWER_LAW = "power law E + A T^-alpha"
CHORD = "chord in log tokens"
PROFILE_POINTS = 64  # starting values of E tried before the least-squares fit


@dataclass(frozen=True)
class LossLaw:
    """How the loss runs between budgets: floor E of a fitted power law, or None for the chord in log
    tokens; interpolation says which, and why the chord when it is the chord."""

    floor: float | None
    interpolation: str


def fit_loss_law(losses: Mapping[float, float]) -> LossLaw:
    """L = E + A T^-alpha by least squares on the loss, over budget -> final loss; E bounded to
    [0, smallest loss) (a cross-entropy is >= 0), A > 0, alpha > 0."""
    pts = sorted((float(t), float(v)) for t, v in losses.items() if math.isfinite(v))
    if len(pts) < 3:
        return LossLaw(None, f"{CHORD} ({len(pts)} budget{'s' if len(pts) != 1 else ''})")
    tokens, loss = (np.array(x) for x in zip(*pts, strict=True))
    if not np.all(np.diff(loss) < 0):
        return LossLaw(None, f"{CHORD} (the loss does not fall at every budget)")
    x = np.log(tokens / tokens[0])  # tokens relative to the smallest budget: A is then a loss, well scaled

    def residuals(p: np.ndarray) -> np.ndarray:
        floor, log_a, alpha = p
        return floor + np.exp(log_a - alpha * x) - loss

    start = min((_log_linear(x, loss, e) for e in np.linspace(0, loss[-1], PROFILE_POINTS, endpoint=False)),
                key=lambda p: float(np.sum(residuals(p) ** 2)))
    try:
        fit = optimize.least_squares(residuals, start, bounds=([0, -np.inf, 0], [loss[-1], np.inf, np.inf]))
    except ValueError as e:  # a start on a bound, or non-finite residuals
        return LossLaw(None, f"{CHORD} (power-law fit failed: {e})")
    floor = float(fit.x[0])
    if not fit.success or not np.all(np.isfinite(fit.x)):
        return LossLaw(None, f"{CHORD} (power-law fit failed: {fit.message})")
    if fit.active_mask[0] == 1 or not floor < loss[-1]:
        return LossLaw(None, f"{CHORD} (power-law fit put E at the smallest loss)")
    return LossLaw(floor, f"{POWER_LAW} (E = {floor:.4g}, fitted over {len(pts)} budgets)")


def _log_linear(x: np.ndarray, loss: np.ndarray, floor: float) -> np.ndarray:
    """(E, ln A, alpha) with ln(L - E) fitted linear in x for a given E: a start for the full fit."""
    slope, intercept = np.polyfit(x, np.log(loss - floor), 1)
    return np.array([floor, intercept, max(-slope, 1e-6)])
