"""A mean log ratio between arms over seeds (a paired contrast, or a factorial effect), with its interval,
verdict by the symmetric rule (speedup/equivalence.py) and claim p-values.

Exact per-seed values: the paired t-interval of the mean (ngptlab.stats, scipy's t) under the caller's
method name; with any seed a bound: the censored likelihood (speedup/censored.py), calibrated to equal the
paired t without censoring, whose interval gives a verdict only where both its ends are finite.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ngptlab.speedup.censored import METHOD as CENSORED_METHOD
from ngptlab.speedup.censored import censored_mean
from ngptlab.speedup.equivalence import claim_p_values, claim_p_values_at, margin_verdict
from ngptlab.speedup.estimate import Estimate
from ngptlab.stats import mean_sd_interval


@dataclass(frozen=True)
class PairedMean:
    """mean, sd, se (None with bounds), df, interval (ln scale), method, verdict, p_values (None without a
    two-sided interval) and note (how bounds entered, else None)."""

    mean: float | None
    sd: float | None
    se: float | None
    df: int | None
    interval: list[float] | None
    method: str
    verdict: str
    p_values: dict[str, float] | None
    note: str | None


def paired_mean(values: Sequence[Estimate], margin: float, level: float, exact_method: str) -> PairedMean:
    """The module docstring's estimate over the seeds' values (numbers or bounds)."""
    if any(v.bound is not None for v in values):
        fit = censored_mean(values, level)
        p_values = claim_p_values_at(fit.t_at, fit.df, margin) if fit.bounded else None
        return PairedMean(fit.mean, fit.sd, None, fit.df if fit.mean is not None else None, fit.interval,
                          CENSORED_METHOD, fit.verdict(lambda i: margin_verdict(i, margin)), p_values,
                          fit.describe())
    s = mean_sd_interval([v.value for v in values], level)
    p_values = None if s["interval"] is None else claim_p_values(s["mean"], s["se"], s["df"], margin)
    return PairedMean(s["mean"], s["sd"], s["se"], s["df"], s["interval"], exact_method,
                      margin_verdict(s["interval"], margin), p_values, None)
