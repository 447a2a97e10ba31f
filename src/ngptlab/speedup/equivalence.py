"""The symmetric rule for a log ratio between arms (a contrast or a factorial effect), and its p-values.

Both a difference and an equivalence are judged against the same margin M > 1, by two one-sided t tests
(TOST) on the mean log ratio theta, each at alpha = (1 - level) / 2, i.e. read off the level t-interval:
- "equivalent within xM" when the interval lies inside (-ln M, ln M): both H0 theta <= -ln M and
  H0 theta >= ln M rejected;
- "exceeds by more than xM" when it lies wholly above ln M (H0 theta <= ln M rejected), "falls short by more
  than xM" when wholly below -ln M (H0 theta >= -ln M rejected);
- otherwise "not resolved"; without an interval (one seed, or a bound) "not resolved (no interval)".
Before, "falls short" needed only the interval below 0 while "matches" needed it inside the margin, so an
arm at 0.9x of another could be called different but one at 1.1x never equivalent at the same seeds.

claim_p_values gives, per claim, the one-sided p-value that the rule compares with alpha (for equivalence
the larger of its two: TOST is an intersection-union test), so that several cells can be adjusted together
(speedup/multiplicity.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from scipy import stats

from ngptlab.stats import LEVEL

NO_INTERVAL = "not resolved (no interval)"
NOT_RESOLVED = "not resolved"
CLAIMS = ("exceeds", "falls_short", "equivalent")  # the keys of claim_p_values, as the verdicts name them


def claim_words(claim: str, margin: float) -> str:
    """The verdict a claim gives: exceeds | falls_short | equivalent, in words with the margin."""
    return {"exceeds": f"exceeds by more than x{margin:g}",
            "falls_short": f"falls short by more than x{margin:g}",
            "equivalent": f"equivalent within x{margin:g}"}[claim]


def interval_claim(log_interval: Sequence[float], margin: float) -> str | None:
    """The claim (exceeds | falls_short | equivalent) a level t-interval on a mean log ratio makes by the
    module docstring's rule, or None where it reaches across an edge of the margin."""
    lo, hi = log_interval
    band = math.log(margin)
    if lo > band:
        return "exceeds"
    if hi < -band:
        return "falls_short"
    if -band < lo and hi < band:
        return "equivalent"
    return None


def margin_verdict(log_interval: Sequence[float] | None, margin: float) -> str:
    """The module docstring's rule, from a level t-interval on a mean log ratio."""
    if log_interval is None:
        return NO_INTERVAL
    claim = interval_claim(log_interval, margin)
    return NOT_RESOLVED if claim is None else claim_words(claim, margin)


def margin_rule(margin: float, level: float = LEVEL) -> str:
    """The symmetric rule, in one sentence for the document."""
    band = f"(-ln {margin:g}, ln {margin:g})"
    return (f"Between arms (a paired contrast, or a factorial effect) from the {level:.0%} paired "
            f"t-interval of the mean log ratio, i.e. two one-sided t tests at {(1 - level) / 2:g} each: "
            f"equivalent within x{margin:g} if the interval lies inside {band}; exceeds by more than "
            f"x{margin:g} if it lies wholly above ln {margin:g}; falls short by more than x{margin:g} if it "
            f"lies wholly below -ln {margin:g}; otherwise not resolved; without an interval (one seed, or a "
            f"bound) not resolved.")


def claim_p_values(mean: float, se: float, df: int, margin: float) -> dict[str, float]:
    """{exceeds, falls_short, equivalent}: the one-sided t-test p-values of the module docstring (Student t
    with df degrees of freedom, scipy.stats.t); a claim holds at level when its p < (1 - level) / 2."""
    band = math.log(margin)
    if se == 0:  # no seed noise: each null is rejected outright or not at all
        above, below = float(mean > band), float(mean < -band)
        return {"exceeds": 1 - above, "falls_short": 1 - below, "equivalent": float(not -band < mean < band)}
    return claim_p_values_at(lambda theta0: (mean - theta0) / se, df, margin)


def claim_p_values_at(t_at: Callable[[float], float], df: int, margin: float) -> dict[str, float]:
    """claim_p_values from a test statistic t_at(theta0) that is Student t with df degrees of freedom at
    theta = theta0, positive when the estimate lies above theta0 (the t statistic, or the t-equivalent of a
    censored likelihood: speedup/censored.py)."""
    band = math.log(margin)
    at_upper, at_lower = t_at(band), t_at(-band)
    p_above = float(stats.t.sf(at_upper, df))  # H0: theta <= ln M
    p_below = float(stats.t.cdf(at_lower, df))  # H0: theta >= -ln M
    p_not_above_lower = float(stats.t.sf(at_lower, df))  # H0: theta <= -ln M
    p_not_below_upper = float(stats.t.cdf(at_upper, df))  # H0: theta >= ln M
    return {"exceeds": p_above, "falls_short": p_below,
            "equivalent": max(p_not_above_lower, p_not_below_upper)}


def held_claim(p: dict[str, float] | None, level: float = LEVEL) -> str | None:
    """The claim whose (possibly adjusted) p-value is below (1 - level) / 2, or None; at most one can be:
    the claims are exclusive."""
    if p is None:
        return None
    held = [claim for claim in CLAIMS if p[claim] < (1 - level) / 2]
    return held[0] if held else None


def verdict_from_p_values(p: dict[str, float] | None, margin: float, level: float = LEVEL) -> str:
    """The rule from (possibly adjusted) claim p-values; None (no interval) is not resolved."""
    if p is None:
        return NO_INTERVAL
    claim = held_claim(p, level)
    return claim_words(claim, margin) if claim else NOT_RESOLVED
