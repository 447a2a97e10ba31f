"""Can the angle square separate the accounts? Only while its angle arms keep their architecture's
conditioning.

gpt-angle is gpt's architecture turned at ngpt's angle per step. If its conditioning drifted to ngpt's, a
gpt-angle as fast as ngpt would be what the conditioning account predicts as well as the effective-learning-
rate account, and the square could not tell them apart; likewise an ngpt-angle whose conditioning drifted
to gpt's. So each angle arm's conditioning is measured against both architectures, seed by seed.

Per seed s, from the runs entering the estimate (each arm's chosen-learning-rate run at its largest budget,
as speedup/rivals.py), with k = ln kappa of the layer 3-4 Q and K heads (rivals.kappa: the paper's Figs.
11-12, the median of the four head medians, the run's last measurement):
  the architectures' gap          g_s = k_own,s - k_other,s
  where the angle arm sits        m_s = sign(mean g) x (k_arm,s - (k_own,s + k_other,s) / 2)
own = the angle arm's architecture (gpt for gpt-angle, ngpt for ngpt-angle), other = the other one; so
m_s > 0 puts the arm nearer its own architecture's conditioning than the other's (on the ln scale, the
midpoint being the geometric mean of the two kappas). Over the seeds with all three runs: the mean of m
and its paired t-interval (ngptlab.stats.mean_sd_interval, scipy's t) at the level; the same for g. Rule:
  keeps its architecture's      g's interval excludes 0 and m's lies wholly above 0
  drifted to the other's        g's interval excludes 0 and m's lies wholly below 0
  not resolved                  otherwise: an interval across 0, the gap not shown, or one seed (no interval)
The cell: "separates the accounts" when every angle arm of the cell keeps its architecture's conditioning;
"cannot separate the accounts" when one has drifted; else not resolved.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from ngptlab.models.arms import arm as arm_row
from ngptlab.models.arms import turns_like
from ngptlab.results import RunResult
from ngptlab.speedup.equivalence import NOT_RESOLVED
from ngptlab.speedup.rivals import HEADS, estimate_runs, kappa
from ngptlab.stats import LEVEL, mean_sd_interval

METHOD = "paired t on ln kappa (layer 3-4 Q and K heads) over seeds"
KEEPS, DRIFTED = "keeps its architecture's conditioning", "drifted to the other architecture's conditioning"
SEPARATES, CANNOT = "separates the accounts", "cannot separate the accounts"


def rule(level: float = LEVEL) -> str:
    return (f"an angle arm keeps its architecture's conditioning when the {level:.0%} paired t-interval over "
            "seeds of the gap in ln kappa (layer 3-4 Q and K heads) between gpt and ngpt excludes 0 and that "
            "of the arm's position, ln kappa against the two architectures' midpoint signed towards its own, "
            "lies wholly above 0; it has drifted when that interval lies wholly below 0; otherwise, and "
            "always with one seed, that is not resolved. The angle square separates the accounts when every "
            "angle arm keeps its architecture's conditioning, cannot when one has drifted")


def _summary(values: list[float], level: float) -> dict:
    s = mean_sd_interval(values, level)
    return {"mean": s["mean"], "interval": s["interval"], "method": METHOD, "level": level,
            "n_seeds": len(values)}


def _sign(interval: list[float] | None) -> int:
    """+1 or -1 where an interval lies wholly above or below 0, else 0."""
    if interval is None:
        return 0
    return 1 if interval[0] > 0 else -1 if interval[1] < 0 else 0


def arm_separation(log_kappa: Mapping[str, Mapping[int, float]], arm: str, level: float = LEVEL) -> dict:
    """{own, other, gap, position {mean, interval, method, level, n_seeds}, kappa_ratio {to_own, to_other},
    verdict} of one angle arm, from ln kappa per (arm, seed)."""
    own, other = arm_row(arm).architecture, turns_like()[arm]
    seeds = sorted(set(log_kappa.get(arm, {})) & set(log_kappa.get(own, {})) & set(log_kappa.get(other, {})))
    k = {a: [log_kappa[a][s] for s in seeds] for a in (arm, own, other)}
    gaps = [o - t for o, t in zip(k[own], k[other], strict=True)]
    gap = _summary(gaps, level)
    direction = math.copysign(1.0, gap["mean"]) if gaps else 1.0
    position = _summary([direction * (x - (o + t) / 2) for x, o, t in zip(k[arm], k[own], k[other],
                                                                          strict=True)], level)
    verdict = NOT_RESOLVED
    if _sign(gap["interval"]) != 0:
        verdict = {1: KEEPS, -1: DRIFTED}.get(_sign(position["interval"]), NOT_RESOLVED)

    def ratio_to(b: str) -> float | None:
        return math.exp(sum(x - y for x, y in zip(k[arm], k[b], strict=True)) / len(seeds)) if seeds else None

    return {"own": own, "other": other, "gap": gap, "position": position,
            "kappa_ratio": {"to_own": ratio_to(own), "to_other": ratio_to(other)}, "verdict": verdict}


def separation(results: Iterable[RunResult], estimate: Mapping, level: float = LEVEL) -> dict | None:
    """{arms {angle arm: arm_separation}, verdict, rule} for the cell's angle arms; None where the cell runs
    no angle arm beside gpt and ngpt."""
    angle_arms = [arm for arm in turns_like() if arm in estimate["arms"]]
    if not angle_arms or not {"gpt", "ngpt"} <= set(estimate["arms"]):
        return None
    runs_of = estimate_runs(results, estimate)
    log_kappa = {arm: {s: math.log(v) for s, r in runs_of(arm).items()
                       if (v := kappa(r)[HEADS]) is not None and 0 < v < math.inf}
                 for arm in ("gpt", "ngpt", *angle_arms)}
    arms = {arm: arm_separation(log_kappa, arm, level) for arm in angle_arms}
    verdicts = {entry["verdict"] for entry in arms.values()}
    verdict = CANNOT if DRIFTED in verdicts else SEPARATES if verdicts == {KEEPS} else NOT_RESOLVED
    return {"arms": arms, "verdict": verdict, "rule": rule(level)}


def position_text(position: Mapping) -> str | None:
    """An arm's position: "-0.52 [-0.8, -0.24]", "-0.52 (one seed: no interval)"; None without kappa."""
    if position["mean"] is None:
        return None
    interval = position["interval"]
    bracket = "(one seed: no interval)" if interval is None else f"[{interval[0]:+.3g}, {interval[1]:+.3g}]"
    return f"{position['mean']:+.3g} {bracket}"


def clause(found: Mapping | None) -> str | None:
    """The reading's words for it, each arm's verdict with the interval it rests on, e.g. "the angle square
    cannot separate the accounts: gpt-angle drifted to the other architecture's conditioning (kappa x0.41 of
    gpt's, x1.2 of ngpt's; position -0.52 [-0.8, -0.24] ln, 95% paired t ..., 3 seeds)"; None without it or
    without a kappa of the heads in any angle arm's runs (runs trained before kappa was logged)."""
    if found is None or all(e["position"]["mean"] is None for e in found["arms"].values()):
        return None
    parts = []
    for arm, e in found["arms"].items():
        p = e["position"]
        if p["mean"] is None:
            parts.append(f"{arm}: no kappa of the heads in its runs")
            continue
        ratio, seeds = e["kappa_ratio"], f"{p['n_seeds']} seed{'s' if p['n_seeds'] != 1 else ''}"
        parts.append(f"{arm} {e['verdict']} (kappa x{ratio['to_own']:.3g} of {e['own']}'s, "
                     f"x{ratio['to_other']:.3g} of {e['other']}'s; position {position_text(p)} ln, "
                     f"{p['level']:.0%} {p['method']}, {seeds})")
    lead = ("the angle square " + found["verdict"] if found["verdict"] != NOT_RESOLVED
            else "not resolved whether the angle square separates the accounts")
    return f"{lead}: " + "; ".join(parts)
