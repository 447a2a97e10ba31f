"""The rival account beside the factorial: does the effective learning rate move with what a contrast credits?

An optimizer step of size lr turns a weight matrix of norm ||W|| by about lr / ||W||, so fixing the norms or
the conditioning can change how fast the weights rotate, the effective learning rate (Kosson et al. 2023,
"Rotational equilibrium", arXiv 2305.17212). If the arms a contrast credits rotate their weights at another
rate than the arms it debits, the contrast is confounded by the effective learning rate.

Per (arm, seed), from the run entering that seed's estimate at the arm's largest budget (the chosen-lr run:
estimator per_seed `best`), read from its metrics rows (observe/observer.py):
  angular_rate = mean over the run's evaluation points t of the mean over the attention and MLP matrix kinds
                 k (RATE_KINDS) of theta_k(t), the angle the kind's effective matrices turned per step since
                 the previous point                                                            [rad / step]
  kappa        = the run's kappa at the cell's common token count T_common (speedup/common_kappa.py, the
                 same count for every arm): the input embedding's covariance (embed_in_cov_condition) and
                 the median over the Q and K head medians of the paper's layers 3 and 4 (HEAD_KEYS)
Per arm: each a geometric mean over the estimate seeds that have it (n_seeds those seeds).
Per seed, with r_arm,s = ln angular_rate:
  the primary factorial effect   d_s = sum_ab w_ab r_ab,s    (w the effect's factorial.WEIGHTS; seeds with
                                                              all four 2x2 arms)
  a contrast of a over b         d_s = r_a,s - r_b,s         (inference.CONTRASTS; seeds both arms have)
so exp(d) is the ratio of effective learning rates the effect or contrast carries alongside its speed-ups.
Over the seeds: mean d and its level paired t-interval (ngptlab.stats.mean_sd_interval, scipy's t).
Rule, on that interval against the equivalence margin M (speedup.equivalence_margin) like every verdict
between arms (speedup/equivalence.py), since one seed, or a mean alone, can set a point estimate anywhere:
  confounded                 the interval lies wholly outside (-ln M, ln M): the arms it credits turn their
                             weights more than xM faster, or slower, than those it debits (confounded true)
  not confounded             the interval lies wholly inside (-ln M, ln M) (confounded false)
  not resolved               the interval reaches across an edge of the margin (confounded null)
  not resolved (one seed)    one seed: no interval, whatever its value (confounded null)
Without a rate (runs trained before it was logged) there is no verdict: verdict and confounded null, the note
says why.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence

from ngptlab.results import RunResult
from ngptlab.speedup.common_kappa import KAPPA_LABELS, by_seed, common_kappa
from ngptlab.speedup.equivalence import NOT_RESOLVED, interval_claim
from ngptlab.speedup.factorial import ARMS, WEIGHTS
from ngptlab.speedup.inference import CONTRASTS
from ngptlab.stats import LEVEL, mean_sd_interval

RATE_KINDS = ("q", "k", "v", "o", "mlp_u", "mlp_v", "mlp_o")  # the attention and MLP matrix kinds
METHOD = "paired t on ln angular rate over seeds"
NO_RATE = "no angular rate over training in the runs entering the estimate (trained before it was logged)"
CONFOUNDED, NOT_CONFOUNDED, ONE_SEED = "confounded", "not confounded", f"{NOT_RESOLVED} (one seed)"
# The verdict from the claim its interval makes (equivalence.interval_claim; None: across an edge).
VERDICTS = {"exceeds": CONFOUNDED, "falls_short": CONFOUNDED, "equivalent": NOT_CONFOUNDED,
            None: NOT_RESOLVED}


def rule(margin: float, level: float = LEVEL) -> str:
    return (f"the effective learning rate confounds an effect or contrast when the {level:.0%} paired "
            "t-interval over seeds of the difference in ln angular rate between the arms it credits and "
            f"those it debits lies wholly outside (-ln {margin:g}, ln {margin:g}), x{margin:g} the "
            "equivalence margin; it does not when the interval lies wholly inside; otherwise, and always "
            "with one seed, that is not resolved; the angular rate of a run is the mean over its evaluation "
            "points of the mean over the attention and MLP matrix kinds (rad / step)")


def angular_rate(result: RunResult) -> float | None:
    """The run's mean over evaluation points of the mean over RATE_KINDS of the angular rate (rad / step)."""
    means = []
    for _, rates in result.observed.get("angular_rate", []):
        found = [rates[k] for k in RATE_KINDS if k in rates and math.isfinite(rates[k])]
        if found:
            means.append(statistics.fmean(found))
    return statistics.fmean(means) if means else None


def _geometric_mean(values: Iterable[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    if not found:
        return None
    if any(math.isinf(v) for v in found):  # a numerically singular kappa
        return math.inf
    return math.exp(statistics.fmean(math.log(v) for v in found))


def estimate_runs(results: Iterable[RunResult], estimate: Mapping) -> Callable[[str], dict[int, RunResult]]:
    """arm -> {seed: the run entering that seed's estimate at the arm's largest budget} (the chosen-lr run:
    estimator per_seed `best`), over the estimate seeds."""
    by_name = {r.spec.name: r for r in results}
    seeds = set(estimate["lr_policy"]["estimate_seeds"])

    def runs(arm: str) -> dict[int, RunResult]:
        return {p["seed"]: by_name[max(p["best"], key=lambda b: b["budget"])["run"]]
                for p in estimate["arms"][arm]["per_seed"] if p["seed"] in seeds and p["best"]}
    return runs


def cell_kappa(results: Iterable[RunResult], estimate: Mapping) -> dict:
    """common_kappa's document over every arm of the cell's estimate: each arm's kappa at T_common."""
    runs_of = estimate_runs(results, estimate)
    return common_kappa({arm: runs_of(arm) for arm in estimate["arms"]})


def log_difference(values: Sequence[float], margin: float, level: float) -> dict:
    """{log_difference {mean, interval, method, level}, ratio, interval (ratio scale), n_seeds, verdict,
    confounded} of per-seed d_s, by the module docstring's rule."""
    summary = mean_sd_interval(values, level)
    mean, interval = summary["mean"], summary["interval"]
    verdict = (None if mean is None else ONE_SEED if interval is None
               else VERDICTS[interval_claim(interval, margin)])
    return {"log_difference": {"mean": mean, "interval": interval, "method": METHOD, "level": level},
            "ratio": None if mean is None else math.exp(mean),
            "interval": None if interval is None else [math.exp(x) for x in interval],
            "n_seeds": len(values), "verdict": verdict,
            "confounded": {CONFOUNDED: True, NOT_CONFOUNDED: False}.get(verdict)}


def rivals(results: Iterable[RunResult], estimate: Mapping, common: Mapping, primary: str, margin: float,
           level: float = LEVEL) -> dict:
    """{arms {arm: {angular_rate, kappa {EMBED_KEY, HEADS}, n_seeds}}, primary {effect, log_difference,
    ratio, interval, n_seeds, verdict, confounded, note}, contrasts [{a, b, ... as primary}], rule, note}
    from the cell's runs, its estimate_cell document and its kappa at T_common (cell_kappa's document)
    (module docstring)."""
    runs_of = estimate_runs(results, estimate)
    rate: dict[str, dict[int, float]] = {}
    arms = {}
    for arm in estimate["arms"]:
        runs = runs_of(arm)
        rate[arm] = {s: v for s, r in runs.items() if (v := angular_rate(r)) is not None}
        arms[arm] = {"angular_rate": _geometric_mean(rate[arm].values()),
                     "kappa": {key: _geometric_mean(by_seed(common, arm, key).values())
                               for key in KAPPA_LABELS},
                     "n_seeds": len(rate[arm])}
    log = {arm: {s: math.log(v) for s, v in by_seed.items()} for arm, by_seed in rate.items()}

    def summarized(d: dict[int, float], lacking: str) -> dict:
        return log_difference(list(d.values()), margin, level) | {"note": None if d else lacking}

    if all(arm in log for arm in ARMS):
        shared = sorted(set.intersection(*(set(log[arm]) for arm in ARMS)))
        d = {s: sum(WEIGHTS[primary][cell] * log[arm][s] for arm, cell in ARMS.items()) for s in shared}
        first = summarized(d, f"no seed with an angular rate for all four 2x2 arms ({NO_RATE})")
    else:
        first = summarized({}, "the cell lacks one of gpt, gpt-rownorm, gpt-orth, ngpt: no factorial")
    contrasts = []
    for a, b in CONTRASTS:
        if a in log and b in log:
            d = {s: log[a][s] - log[b][s] for s in sorted(set(log[a]) & set(log[b]))}
            lacking = f"no seed with an angular rate for both ({NO_RATE})"
            contrasts.append({"a": a, "b": b} | summarized(d, lacking))
    observed = any(by_seed for by_seed in rate.values())
    return {"arms": arms, "primary": {"effect": primary} | first, "contrasts": contrasts,
            "rule": rule(margin, level), "note": None if observed else NO_RATE}


LEADS = {CONFOUNDED: "confounded by the effective learning rate",
         NOT_CONFOUNDED: "not confounded by the effective learning rate",
         NOT_RESOLVED: "not resolved whether the effective learning rate confounds it",
         ONE_SEED: f"{ONE_SEED} whether the effective learning rate confounds it"}


def clause(confound: Mapping) -> str | None:
    """The verdict of an effect's or contrast's rivals entry with the interval it rests on, e.g. 'confounded
    by the effective learning rate: the arms it credits turn their weights x1.73 [1.61, 1.86] as fast as
    those it debits (95% paired t on ln angular rate over seeds, 3 seeds)'; None without a verdict (no
    angular rate)."""
    verdict = confound.get("verdict")
    if verdict is None:
        return None
    d, n, interval = confound["log_difference"], confound["n_seeds"], confound["interval"]
    bracket = "" if interval is None else f" [{interval[0]:.3g}, {interval[1]:.3g}]"
    seeds = f"{n} seed{'s' if n != 1 else ''}" + ("" if interval else ": no interval")
    how = f"{d['level']:.0%} {d['method']}, {seeds}"
    return (f"{LEADS[verdict]}: the arms it credits turn their weights x{confound['ratio']:.3g}{bracket} as "
            f"fast as those it debits ({how})")
