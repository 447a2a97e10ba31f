"""Inference over seeds: one arm's speed-up, paired contrasts between arms, and a verdict for each.

A speed-up is a ratio of tokens, so seeds are combined on the log scale, where a ratio's noise is roughly
symmetric and a contrast between two arms is a difference:
- per seed, ln S (S the seed's speed-up over the baseline; seed s of every arm saw the same batches);
- over seeds, the mean of ln S and the t-interval mean +- t_{(1+level)/2, n-1} sd / sqrt(n) on it
  (ngptlab.stats), reported back on the S scale: value = exp(mean ln S), the geometric mean of the seeds'
  speed-ups, and interval = [exp(lo), exp(hi)], at level 0.95 (method "t on ln S");
- a percentile bootstrap of the mean of ln S (resampling seeds), only with at least BOOTSTRAP_MIN_SEEDS
  point estimates, as bootstrap_interval: with n seeds a bootstrap has only C(2n-1, n) distinct resamples
  (10 at n = 3), too few for its percentiles to mean anything; below that it is null.
A seed's bound (">": the arm beat the target already at the smallest budget, ln S >= ln(N / smallest
budget); "<": it never reached it) is a censored observation of ln S: with any such seed among two or
more, the mean of ln S and its interval come from the censored-normal likelihood (ngptlab.speedup.censored:
value exp(mu_hat), the profile-likelihood interval calibrated to equal the t-interval without censoring,
method saying so, n_censored counting the bounds, no bootstrap). Where that has no estimate (every seed a
bound, one seed, or the likelihood without a maximum) the estimator's rule stands: a geometric mean over
bounds and point estimates is itself a bound in the same direction, with no interval and no verdict;
bounds in opposite directions give no estimate. An interval the data bound on one side only gives no verdict.

A paired contrast of arms a and b uses the seeds both share: D_s = ln S_a,s - ln S_b,s, its mean, sd and
t-interval, and the ratio exp(mean D) = S_a / S_b with its interval. A bound on a bounds D_s in its own
direction, one on b in the opposite direction; such seeds enter the censored likelihood likewise, and a seed
whose two bounds pull D_s apart carries no information and is left out (the note counts it).

Verdicts, with an equivalence margin M > 1:
- one arm against the baseline, from the interval of mean ln S, by the same symmetric rule as a contrast
  (speedup/equivalence.py): "faster by more than xM" when it lies wholly above ln M, "slower by more than
  xM" wholly below -ln M, "equivalent within xM" inside (-ln M, ln M), else "not resolved"; a difference,
  like an equivalence, must clear the margin, so an arm that is faster by less than the margin (a flatter
  learning-rate law read on a shared grid, say) is not called faster; without an interval "not resolved (no
  interval)", and a speed-up that is a bound "not resolved (a bound)": a bound alone is never a verdict;
- a contrast between arms, by that rule in its own words ("exceeds" / "falls short by more than xM").
Seeds needed (ngptlab.sample_size), from the sd of the log ratio measured over k >= 2 seeds (df k - 1):
- seeds_needed: the seeds whose two-sided paired t test at the interval's level has 80% power against a
  true ratio of resolve_ratio, at the observed sd (power from the noncentral t);
- seeds_needed_upper: the same at the one-sided 80% upper confidence bound of the sd (chi-square), since
  a sd from 2-3 seeds understates the need about half the time or more;
- seeds_needed_equivalence: the seeds whose two one-sided tests, at (1 - level) / 2 each side as the verdict
  reads the level-interval, show equivalence within x margin with 80% power when the true ratio is 1, at
  the observed sd (exact TOST power, by integration over the sd's chi distribution).
Each has a note: its method, level, power and df, or why it is null.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from ngptlab.models import arms
from ngptlab.sample_size import (
    POWER,
    SD_CONFIDENCE,
    sd_upper_bound,
    seeds_for_equivalence,
    seeds_to_resolve,
)
from ngptlab.settings import default
from ngptlab.speedup.censored import METHOD as CENSORED_METHOD
from ngptlab.speedup.censored import CensoredMean, censored_mean, log_of, weighted_sum
from ngptlab.speedup.equivalence import (
    NO_INTERVAL,
    interval_claim,
    margin_rule,
)
from ngptlab.speedup.estimate import Estimate
from ngptlab.speedup.paired import paired_mean
from ngptlab.stats import LEVEL, mean_sd_interval

BOOTSTRAP_MIN_SEEDS = 10
METHOD = "t on ln S"
PAIRED_METHOD = "paired t on ln S_a - ln S_b over seeds"
STATISTIC = "geometric mean over seeds: exp(mean of ln S)"
# What a caller without settings gets: the schema's defaults, written there alone.
EQUIVALENCE_MARGIN: float = default("speedup.equivalence_margin")
RESOLVE_RATIO: float = default("speedup.resolve_ratio")
# The contrasts the document gives besides every arm against the baseline: the conditioning square's
# controls against nGPT and against each other, the angle square's against nGPT (each pair only where both
# arms are in the cell); the accounts' patterns read them (speedup/reading.py).
_C, _A = arms.square("conditioning"), arms.square("angle")  # corner "ab" -> arm (models/arms.yaml)
CONTRASTS = ((_C["01"], _C["11"]), (_C["10"], _C["11"]), (_C["01"], _C["10"]), (_A["01"], _A["11"]),
             (_A["10"], _A["11"]))
A_BOUND = "not resolved (a bound)"
NEEDS_TWO = "needs 2 seeds to measure the noise"
SIZE_KEYS = ("seeds_needed", "seeds_needed_upper", "seeds_needed_equivalence")


def verdict_rule(margin: float, level: float = LEVEL) -> str:
    """The verdict rules, one sentence for an arm against the baseline and one between arms."""
    return (f"Against the baseline, from the {level:.0%} t-interval of mean ln S (with seeds that are "
            f"bounds, the censored-normal profile-likelihood interval calibrated to it): faster by more "
            f"than x{margin:g} if it lies wholly above ln {margin:g}, slower by more than x{margin:g} if "
            f"wholly below -ln {margin:g}, equivalent within x{margin:g} if it lies inside (-ln {margin:g}, "
            f"ln {margin:g}), otherwise not resolved; a speed-up that is a bound, or an interval the data "
            f"leave open on one side, is not resolved (a bound alone is never a verdict); without an "
            f"interval (one seed) not resolved. "
            + margin_rule(margin, level))


def verdict(log_interval: Sequence[float] | None, margin: float) -> str:
    """faster / slower by more than xM | equivalent within xM | not resolved, from an interval on ln S
    against the baseline, by the symmetric rule (equivalence.interval_claim) in an arm's words."""
    if log_interval is None:
        return NO_INTERVAL
    claim = interval_claim(log_interval, margin)
    if claim is None:
        return "not resolved"
    return {"exceeds": f"faster by more than x{margin:g}", "falls_short": f"slower by more than x{margin:g}",
            "equivalent": f"equivalent within x{margin:g}"}[claim]


def no_sizes(note: str | None) -> dict:
    """seeds_needed's keys, every number null for the same reason."""
    return {key: None for key in SIZE_KEYS} | {f"{key}_note": note for key in SIZE_KEYS}


def seeds_needed(sd: float | None, k: int, ratio: float, margin: float, level: float = LEVEL) -> dict:
    """The three sample sizes of the module docstring, from a sd measured over k seeds (None below two):
    {seeds_needed, seeds_needed_note, seeds_needed_upper, seeds_needed_upper_note, seeds_needed_equivalence,
    seeds_needed_equivalence_note}; each note says the method, or why the number is null."""
    if sd is None:
        return no_sizes(NEEDS_TWO)
    measured = f"sd from {k} seeds (df {k - 1})"
    test = f"two-sided paired t test at level {level:g}, power {POWER:g}, noncentral t"
    upper = sd_upper_bound(sd, k)
    alpha = (1 - level) / 2  # the verdict's level-interval inside the margin is TOST at this alpha
    tost = (f"two one-sided t tests at alpha {alpha:g} each side, power {POWER:g}, exact TOST power "
            f"(integral over the sd's chi distribution)")
    resolve, equivalence = f"to resolve x{ratio:g}", f"to show equivalence within x{margin:g}"
    sizes = {
        "seeds_needed": (seeds_to_resolve(sd, ratio, level), resolve, f"{test}; {measured}"),
        "seeds_needed_upper": (seeds_to_resolve(upper, ratio, level), f"{resolve} at the sd's upper bound",
                               f"at the one-sided {SD_CONFIDENCE:.0%} upper confidence bound of the sd "
                               f"({upper:.3g}, chi-square): {test}; {measured}"),
        "seeds_needed_equivalence": (seeds_for_equivalence(sd, margin, alpha), equivalence,
                                     f"at a true ratio of 1: {tost}; {measured}"),
    }
    out = {}
    for key, (n, aim, method) in sizes.items():
        out[key] = n
        out[f"{key}_note"] = f"{aim}: {method}" if n is not None else f"more than a thousand seeds {aim}"
    return out


def bootstrap_interval(logs: Sequence[float], n_bootstrap: int, seed: int, level: float = LEVEL
                       ) -> list[float] | None:
    """Percentile bootstrap of the mean of ln S (resampling seeds), on the S scale; None below
    BOOTSTRAP_MIN_SEEDS values or without resamples."""
    if len(logs) < BOOTSTRAP_MIN_SEEDS or n_bootstrap <= 0:
        return None
    values = np.asarray(logs, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(n_bootstrap, len(values)))].mean(axis=1)
    tail = 100 * (1 - level) / 2
    return [math.exp(float(np.percentile(means, tail))), math.exp(float(np.percentile(means, 100 - tail)))]


def summarize_seeds(estimates: Sequence[Estimate], n_bootstrap: int, seed: int,
                    margin: float = EQUIVALENCE_MARGIN, resolve_ratio: float = RESOLVE_RATIO,
                    level: float = LEVEL, baseline: bool = False) -> dict:
    """One arm's speed-up over seeds (estimates in seed order), as the module docstring says:
    {value, bound, display, interval, level, n_seeds, note, method, statistic, log {mean, sd, se, df} | None,
    bootstrap_interval, verdict, and seeds_needed's keys}; log is None for a bound or below two point
    estimates. The baseline's own entry (speed-up 1 by construction) has no verdict or seeds needed."""
    out = _summary(estimates, n_bootstrap, seed, margin, resolve_ratio, level)
    if baseline:
        out.update(verdict=None, **no_sizes(None))
    return out


def _summary(estimates: Sequence[Estimate], n_bootstrap: int, seed: int, margin: float, resolve_ratio: float,
             level: float) -> dict:
    known = [e for e in estimates if e.value is not None]
    out = {"value": None, "bound": None, "display": "n/a", "interval": None, "level": level,
           "n_seeds": len(known), "n_censored": sum(e.bound is not None for e in known), "note": None,
           "method": METHOD, "statistic": STATISTIC, "log": None, "bootstrap_interval": None,
           "verdict": NO_INTERVAL, **no_sizes(NEEDS_TWO)}
    if not known:
        out["note"] = "no seed reached an estimate"
        return out
    logs = [Estimate(math.log(e.value), e.bound) for e in known]
    if out["n_censored"] and len(logs) > 1:
        fit = censored_mean(logs, level)
        if fit.mean is not None:
            return out | _censored_summary(fit, margin, resolve_ratio)
        out["note"] = f"censored likelihood: {fit.note}"
    bounds = {e.bound for e in known} - {None}
    if len(bounds) > 1:
        out["note"] = _notes(out["note"], "seeds give bounds in opposite directions; no estimate")
        return out
    summary = mean_sd_interval([y.value for y in logs], level)
    value = known[0].value if len(known) == 1 else math.exp(summary["mean"])  # one seed: its own number
    out.update(Estimate(value, bounds.pop() if bounds else None).as_dict())
    if out["bound"] is not None:
        out["note"] = _notes(out["note"], "a bound: no interval" if len(logs) == 1 else
                             "geometric mean of bounds and point estimates is itself a bound; no interval")
        out.update(no_sizes("a bound: the seed noise is not measured"))
        out["verdict"] = A_BOUND
        return out
    if summary["sd"] is not None:
        out["log"] = {k: summary[k] for k in ("mean", "sd", "se", "df")}
        out["interval"] = [math.exp(x) for x in summary["interval"]]
    out["bootstrap_interval"] = bootstrap_interval([y.value for y in logs], n_bootstrap, seed, level)
    out["verdict"] = verdict(summary["interval"], margin)
    out.update(seeds_needed(summary["sd"], len(logs), resolve_ratio, margin, level))
    return out


def _notes(*notes: str | None) -> str | None:
    return "; ".join(n for n in notes if n) or None


def _censored_summary(fit: CensoredMean, margin: float, resolve_ratio: float) -> dict:
    """summarize_seeds' keys from the censored likelihood (speedup/censored.py): the value exp(mu_hat), the
    calibrated profile interval, a verdict only where both its ends are finite."""
    return {**Estimate(math.exp(fit.mean)).as_dict(), "interval": [math.exp(x) for x in fit.interval],
            "method": CENSORED_METHOD, "note": fit.describe(),
            "log": {"mean": fit.mean, "sd": fit.sd, "se": None, "df": fit.df},
            "verdict": fit.verdict(lambda i: verdict(i, margin)),
            **seeds_needed(fit.sd, fit.n, resolve_ratio, margin, fit.level)}


def contrast(a: str, b: str, per_seed_a: Mapping[int, Estimate], per_seed_b: Mapping[int, Estimate],
             margin: float = EQUIVALENCE_MARGIN, resolve_ratio: float = RESOLVE_RATIO,
             level: float = LEVEL) -> dict:
    """Arm a against arm b, paired by seed (per_seed_*: seed -> that seed's speed-up over the baseline):
    {a, b, label, n_seeds, n_censored, seeds, difference_log {mean, sd, interval}, ratio, interval, level,
    method, verdict, seeds_needed's keys, note}; ratio = S_a / S_b (geometric), interval on the ratio scale.
    A seed where either is a bound gives a bound on D_s (censored.weighted_sum) and the censored likelihood
    takes over; bounds in conflicting directions leave the seed out."""
    shared = sorted(s for s in set(per_seed_a) & set(per_seed_b)
                    if per_seed_a[s].value is not None and per_seed_b[s].value is not None)
    diffs = {s: weighted_sum([(1.0, log_of(per_seed_a[s])), (-1.0, log_of(per_seed_b[s]))]) for s in shared}
    conflicting = [s for s in shared if diffs[s] is None]
    seeds = [s for s in shared if diffs[s] is not None]
    observations = [diffs[s] for s in seeds]
    n_censored = sum(d.bound is not None for d in observations)
    notes = []
    if conflicting:
        notes.append(f"seed{'s' if len(conflicting) > 1 else ''} {', '.join(map(str, conflicting))} left "
                     f"out: bounds for {a} and {b} in directions that leave the difference free")
    paired = paired_mean(observations, margin, level, PAIRED_METHOD)
    mean, sd, interval = paired.mean, paired.sd, paired.interval
    if paired.note:
        notes.append(paired.note)
    elif len(seeds) == 1:
        notes.append("one seed: the difference, no interval")
    if not seeds:
        notes.append(f"no shared seed with an estimate for both {a} and {b}")
    needed = seeds_needed(sd, len(seeds), resolve_ratio, margin, level)
    if needed["seeds_needed"] is None and seeds:
        notes.append(needed["seeds_needed_note"])
    return {"a": a, "b": b, "label": f"{a} vs {b}", "n_seeds": len(seeds), "n_censored": n_censored,
            "seeds": seeds, "difference_log": {"mean": mean, "sd": sd, "interval": interval},
            "ratio": None if mean is None else math.exp(mean),
            "interval": None if interval is None else [math.exp(x) for x in interval],
            "level": level, "method": paired.method, "verdict": paired.verdict, **needed,
            "note": "; ".join(notes) or None}


def cell_contrasts(per_seed: Mapping[str, Mapping[int, Estimate]], margin: float = EQUIVALENCE_MARGIN,
                   resolve_ratio: float = RESOLVE_RATIO, level: float = LEVEL) -> list[dict]:
    """The CONTRASTS whose two arms are both in the cell (per_seed: arm -> seed -> speed-up), in order."""
    return [contrast(a, b, per_seed[a], per_seed[b], margin, resolve_ratio, level)
            for a, b in CONTRASTS if a in per_seed and b in per_seed]
