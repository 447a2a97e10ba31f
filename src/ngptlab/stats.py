"""Small-sample statistics over seeds (the t distribution from scipy.stats).

t_quantile          the two-sided Student t quantile, for integer degrees of freedom
t_interval          mean +- t_{(1+level)/2, n-1} s / sqrt(n), the textbook interval of a mean
mean_sd_interval    mean, sample sd, standard error, df and that interval, as one JSON-ready dict
rank_correlation    Spearman's rho with its interval by Fisher's z (the report's correlations across arms)

The report's calibration section and the speed-up stage share them, so both state their intervals alike;
how many seeds a comparison needs is ngptlab.sample_size.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from scipy import stats

LEVEL = 0.95  # of every interval: the speed-up's and the calibration's


def t_quantile(level: float, df: int) -> float:
    """The two-sided Student t quantile: P(|T| <= t) = level with df degrees of freedom, i.e. the one-sided
    quantile t_{(1+level)/2, df}."""
    return float(stats.t.ppf((1 + level) / 2, df))


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


SPEARMAN_MIN = 4  # Fisher's z variance 1.06 / (n - 3) needs n > 3
SPEARMAN_METHOD = ("Spearman ρ (scipy.stats.spearmanr), interval by Fisher's z = atanh ρ ± z_{(1+level)/2} "
                   "sqrt(1.06 / (n − 3)) (Fieller, Hartley and Pearson 1957), back through tanh")


def rank_correlation(x: Sequence[float], y: Sequence[float], level: float = LEVEL) -> dict:
    """{rho, interval [lo, hi], n, method, level, note}: Spearman's rho of paired x, y and its interval by
    Fisher's z with the Fieller-Hartley-Pearson variance 1.06 / (n - 3) (SPEARMAN_METHOD). rho and interval
    are None below SPEARMAN_MIN pairs or where a variable is constant; the interval None at rho = +-1 (z
    infinite); note says why."""
    n = len(x)
    out = {"rho": None, "interval": None, "n": n, "method": SPEARMAN_METHOD, "level": level, "note": None}
    if n < SPEARMAN_MIN:
        out["note"] = f"{n} point(s): Fisher's z needs at least {SPEARMAN_MIN} (variance 1.06 / (n - 3))"
        return out
    if len(set(x)) < 2 or len(set(y)) < 2:
        out["note"] = "a constant variable has no rank correlation"
        return out
    rho = float(stats.spearmanr(x, y).statistic)
    out["rho"] = rho
    if abs(rho) >= 1:
        out["note"] = "ρ = ±1: Fisher's z is infinite, no interval"
        return out
    half = float(stats.norm.ppf((1 + level) / 2)) * math.sqrt(1.06 / (n - 3))
    z = math.atanh(rho)
    out["interval"] = [math.tanh(z - half), math.tanh(z + half)]
    return out
