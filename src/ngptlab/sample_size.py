"""How many seeds a comparison of log ratios needs, from the per-seed sd measured over k seeds.

seeds_to_resolve      the smallest n whose two-sided one-sample (paired) t test on the mean log ratio has the
                      wanted power at a true ratio `ratio`: exact power from the noncentral t
sd_upper_bound        the one-sided upper confidence bound of a sd from k values (chi-square, df k - 1)
seeds_for_equivalence the smallest n whose two one-sided tests (TOST) show equivalence within x`margin` with
                      the wanted power when the true ratio is 1: exact power by integration over the sd

The sd plugged in is itself an estimate from a few seeds: with 2-3 seeds the n at the observed sd is below
the n the true sd needs about half the time or more, hence the upper-bound version beside it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import integrate, stats

POWER = 0.8
SD_CONFIDENCE = 0.8  # of the sd's upper bound: one-sided
SEARCH_LIMIT = 1000  # no search looks further: beyond it a comparison is out of reach anyway
QUAD_NODES = 2001  # Simpson's rule nodes of the TOST power's integral (odd: whole panels)


def t_test_power(n: int, sd: float, ratio: float, level: float) -> float:
    """Power of the two-sided one-sample t test of mean log ratio = 0 at `level` confidence, with n values
    of sd `sd` and true mean ln(ratio): P(|T| > t_{(1+level)/2, n-1}), T noncentral t with df n - 1 and
    noncentrality ln(ratio) sqrt(n) / sd."""
    df, nc = n - 1, math.log(ratio) * math.sqrt(n) / sd
    crit = stats.t.ppf((1 + level) / 2, df)
    # P(T < -c; nc) = P(T > c; -nc): scipy's lower tail returns nan far from the centre, its upper does not
    return float(stats.nct.sf(crit, df, nc) + stats.nct.sf(crit, df, -nc))


def tost_power(n: int, sd: float, margin: float, alpha: float) -> float:
    """Power of TOST (each one-sided t test at `alpha`) for |mean log ratio| < ln(margin), with n values of
    sd `sd` and a true mean of 0. Both tests reject iff |mean| < ln(margin) - t_{1-alpha, n-1} s / sqrt(n),
    so with U = s / sd (sqrt(n-1) U is chi with df n - 1) the power is the exact integral over U of
    2 Phi(sqrt(n) ln(margin) / sd - t_{1-alpha, n-1} U) - 1 where that is positive (Owen 1965), by quadrature
    rather than the usual approximation by two noncentral t terms."""
    df = n - 1
    crit = stats.t.ppf(1 - alpha, df)
    reach = math.sqrt(n) * math.log(margin) / sd
    # Over the chi's bulk only (quadrature over a long range with a narrow peak misses the peak), up to the
    # chi value where the acceptance region closes.
    lo, hi = stats.chi.ppf([1e-12, 1 - 1e-12], df)
    hi = min(hi, reach * math.sqrt(df) / crit)
    if hi <= lo:
        return 0.0

    # Simpson's rule on a fixed grid, the integrand evaluated at every node in one vectorized call: smooth
    # on [lo, hi], so QUAD_NODES nodes reach ~1e-10, as adaptive quadrature does, at a tenth of its time.
    v = np.linspace(lo, hi, QUAD_NODES)
    integrand = (2 * stats.norm.cdf(reach - crit * v / math.sqrt(df)) - 1) * stats.chi.pdf(v, df)
    return float(integrate.simpson(integrand, x=v))


def sd_upper_bound(sd: float, k: int, confidence: float = SD_CONFIDENCE) -> float:
    """The one-sided `confidence` upper bound of a sd measured over k values: (k - 1) s^2 / sigma^2 is
    chi-square with df k - 1, so sigma <= s sqrt((k - 1) / chi2_{1-confidence, k-1})."""
    return sd * math.sqrt((k - 1) / stats.chi2.ppf(1 - confidence, k - 1))


def seeds_to_resolve(sd: float, ratio: float, level: float, power: float = POWER) -> int | None:
    """The smallest n >= 2 with t_test_power(n) >= power; None when SEARCH_LIMIT seeds are not enough or sd
    is not a finite number."""
    if not ratio > 1 or not 0.5 < power < 1:
        raise ValueError(f"seeds_to_resolve needs ratio > 1 and power in (0.5, 1); got {ratio}, {power}")
    return _smallest(sd, lambda n: t_test_power(n, sd, ratio, level) >= power)


def seeds_for_equivalence(sd: float, margin: float, alpha: float, power: float = POWER) -> int | None:
    """The smallest n >= 2 with tost_power(n) >= power; None as seeds_to_resolve."""
    if not margin > 1 or not 0 < alpha < 0.5 or not 0 < power < 1:
        raise ValueError(f"seeds_for_equivalence needs margin > 1, alpha in (0, 0.5), power in (0, 1); "
                         f"got {margin}, {alpha}, {power}")
    return _smallest(sd, lambda n: tost_power(n, sd, margin, alpha) >= power)


def _smallest(sd: float, enough: Callable[[int], bool]) -> int | None:
    """The first n in [2, SEARCH_LIMIT] where `enough` holds (power rises with n): doubling from 2, then
    bisection, so a small answer never evaluates a large n."""
    if not math.isfinite(sd) or sd < 0:
        return None
    if sd == 0:
        return 2  # no noise: the smallest sample that measures one resolves anything
    lo, hi = 1, 2  # lo is below the first candidate, or fails
    while not enough(hi):
        if hi == SEARCH_LIMIT:
            return None
        lo, hi = hi, min(2 * hi, SEARCH_LIMIT)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return hi
