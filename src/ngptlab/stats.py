"""Small-sample statistics over seeds, in pure Python (no scipy at run time).

t_quantile          the two-sided Student t quantile, for integer degrees of freedom
t_interval          mean +- t_{(1+level)/2, n-1} s / sqrt(n), the textbook interval of a mean
mean_sd_interval    mean, sample sd, standard error, df and that interval, as one JSON-ready dict
seeds_to_resolve    how many seeds a paired comparison needs to resolve a given ratio at a given power

The report's calibration section and the speed-up stage share them, so both state their intervals alike.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence

LEVEL = 0.95  # of every interval: the speed-up's and the calibration's
SEARCH_LIMIT = 1000  # seeds_to_resolve looks no further: beyond it a comparison is out of reach anyway


@functools.cache  # a pure function, called for the same few (level, df) by every summary
def t_quantile(level: float, df: int) -> float:
    """The two-sided Student t quantile: P(|T| <= t) = level with df degrees of freedom, i.e. the one-sided
    quantile t_{(1+level)/2, df}; by bisection on the closed-form CDF for integer df (Abramowitz and
    Stegun 26.7.3-4)."""

    def within(t: float) -> float:
        theta = math.atan(t / math.sqrt(df))
        s, c = math.sin(theta), math.cos(theta)
        if df % 2:  # 2/pi (theta + sin(theta) (cos + 2/3 cos^3 + ... up to cos^(df-2)))
            term = total = c if df > 1 else 0.0
            for k in range(3, df - 1, 2):
                term *= (k - 1) / k * c * c
                total += term
            return 2 / math.pi * (theta + s * total)
        term = total = 1.0  # sin(theta) (1 + 1/2 cos^2 + 1.3/(2.4) cos^4 + ... up to cos^(df-2))
        for k in range(2, df - 1, 2):
            term *= (k - 1) / k * c * c
            total += term
        return s * total

    lo, hi = 0.0, 1.0
    while within(hi) < level:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if within(mid) < level else (lo, mid)
    return (lo + hi) / 2


def t_interval(values: Sequence[float], level: float = LEVEL) -> tuple[float, float] | None:
    """Mean +- t_{(1+level)/2, n-1} s / sqrt(n) (s the sample sd); None for fewer than two values."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    half = t_quantile(level, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return mean - half, mean + half


def mean_sd_interval(values: Sequence[float], level: float = LEVEL) -> dict:
    """{n, mean, sd, se, df, interval [lo, hi]}: sd the sample sd (n - 1), se = sd / sqrt(n), df = n - 1,
    interval as t_interval. mean is None without values; sd, se, df and interval are None below two."""
    n = len(values)
    out = {"n": n, "mean": statistics.fmean(values) if n else None, "sd": None, "se": None, "df": None,
           "interval": None}
    if n >= 2:
        sd = statistics.stdev(values)
        lo, hi = t_interval(values, level)
        out.update(sd=sd, se=sd / math.sqrt(n), df=n - 1, interval=[lo, hi])
    return out


def seeds_to_resolve(sd: float, ratio: float = 1.5, level: float = LEVEL, power: float = 0.8) -> int | None:
    """The smallest n >= 2 seeds with (t_{(1+level)/2, n-1} + t_{power, n-1}) sd / sqrt(n) <= ln(ratio).

    sd is the per-seed sd of a log ratio (ln S, or a paired difference of ln S). With n seeds the
    level-interval of its mean then excludes 0 with probability `power` when the true ratio is `ratio` (the
    usual normal-theory sample size, with t in place of z). t_{power, n-1} is one-sided: the two-sided
    quantile at level 2 power - 1. The left side falls with n (both quantiles and 1/sqrt(n) do), so n is
    found by bisection; None when even SEARCH_LIMIT seeds are not enough, or sd is not a finite number.
    """
    if not ratio > 1 or not 0.5 < power < 1:
        raise ValueError(f"seeds_to_resolve needs ratio > 1 and power in (0.5, 1); got {ratio}, {power}")
    if not math.isfinite(sd) or sd < 0:
        return None
    target = math.log(ratio)

    def resolves(n: int) -> bool:
        return (t_quantile(level, n - 1) + t_quantile(2 * power - 1, n - 1)) * sd / math.sqrt(n) <= target

    if not resolves(SEARCH_LIMIT):
        return None
    lo, hi = 1, SEARCH_LIMIT  # resolves(hi) holds; lo is below the first candidate
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if resolves(mid) else (mid, hi)
    return hi
