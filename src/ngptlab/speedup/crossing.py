"""Where a loss curve crosses a target, and its inverse: the loss a curve has at given tokens.

A curve is (tokens, loss) points: one (arm, seed)'s final losses per budget, or one run's validation curve.
Between two points the loss runs along the law the estimator fits (ln(L - E) linear in ln T, E the floor of
a fitted power law: ngptlab.speedup.loss_law), or without a floor along the chord in log tokens. Outside
the points the answer is a bound, never an extrapolation. The speed-up estimator and the learning-rate
policy (which learning rate reaches the target first) both read curves through these functions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from ngptlab.speedup.estimate import Estimate


def tokens_to_target(points: Iterable[tuple[float, float]], target: float, floor: float | None = None
                     ) -> Estimate:
    """Tokens needed to reach `target` loss, from (tokens, loss) points (budgets or a within-run curve);
    between two points ln(L - floor) is linear in ln T (a fitted power law's floor E), or without a floor L
    itself (the chord in log tokens)."""
    pts = sorted((float(t), float(loss)) for t, loss in points if math.isfinite(loss))
    if not pts or not math.isfinite(target):
        return Estimate(None)
    if pts[0][1] <= target:
        # At or below the target at the first point: exact only if it lands on it, else an upper bound.
        return Estimate(pts[0][0], None if pts[0][1] == target else "<")
    for (t0, l0), (t1, l1) in zip(pts, pts[1:], strict=False):
        if l1 <= target:
            if l1 == target:
                return Estimate(t1)
            if floor is not None:  # floor < l1 < target < l0: the logs are finite and ordered alike
                l0, l1, target = (math.log(v - floor) for v in (l0, l1, target))
            frac = (l0 - target) / (l0 - l1)  # in (0, 1): l0 > target > l1
            return Estimate(math.exp(math.log(t0) + frac * (math.log(t1) - math.log(t0))))
    return Estimate(pts[-1][0], ">")


def loss_at(points: Iterable[tuple[float, float]], tokens: float, floor: float | None = None) -> float | None:
    """The inverse of tokens_to_target: the loss at `tokens`, a point's own loss when it is one, else along
    the same law between the two points around it (ln(L - floor), or L, linear in ln T); None outside them."""
    pts = sorted((float(t), float(loss)) for t, loss in points if math.isfinite(loss))
    for (t0, l0), (t1, l1) in zip(pts, pts[1:], strict=False):
        if t0 < tokens < t1:
            frac = (math.log(tokens) - math.log(t0)) / (math.log(t1) - math.log(t0))
            if floor is None:
                return l0 + frac * (l1 - l0)
            u0, u1 = math.log(l0 - floor), math.log(l1 - floor)
            return floor + math.exp(u0 + frac * (u1 - u0))
    return next((loss for t, loss in pts if t == tokens), None)


def reference_tokens(reference: str | int, budgets: Sequence[int]) -> int:
    """The reference budget in tokens (speedup.reference_budget): the largest budget, the geometric mean of
    the smallest and largest ("middle"), or a number of tokens as given."""
    if reference == "largest":
        return max(budgets)
    if reference == "middle":
        return round(math.sqrt(min(budgets) * max(budgets)))  # whole tokens: 4096 for 2048 and 8192
    return int(reference)
