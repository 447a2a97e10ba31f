"""Can the angle square separate the accounts? Only while its angle arms keep their architecture's
conditioning.

gpt-angle is gpt's architecture turned at ngpt's angle per step. If its conditioning drifted to ngpt's, a
gpt-angle as fast as ngpt would be what the conditioning account predicts as well as the effective-learning-
rate account, and the square could not tell them apart; likewise an ngpt-angle whose conditioning drifted
to gpt's. So each angle arm's conditioning is measured against both architectures, seed by seed.

Per seed s, from the runs entering the estimate (each arm's chosen-learning-rate run at its largest budget,
as speedup/rivals.py), with k = ln kappa of the layer 3-4 Q and K heads (the paper's Figs. 11-12, the
median of the four head medians) read at the cell's common token count T_common (speedup/common_kappa.py:
the arms' estimate runs end at different budgets, and kappa moves with tokens, so each run's last kappa
would compare arms at different points of training):
  the architectures' gap          g_s = k_own,s - k_other,s
  the arm against its own         a_s = k_arm,s - k_own,s
  the arm against the other       b_s = k_arm,s - k_other,s
own = the angle arm's architecture (gpt for gpt-angle, ngpt for ngpt-angle), other = the other one. Over the
seeds with all three runs, each mean and its paired t-interval at the level (ngptlab.stats.mean_sd_interval,
scipy's t), read against the margin M (speedup.kappa_margin) by two one-sided tests, as every verdict between
arms (speedup/equivalence.py interval_claim): "equivalent" inside (-ln M, ln M), "exceeds" or "falls short"
wholly outside. Rule:
  keeps its architecture's      g shown beyond the margin (either side), a equivalent, b not
  drifted to the other's        g shown beyond the margin, b equivalent, a not
  not resolved                  otherwise: an interval across an edge, the gap not shown, both equivalent
                                (a gap under 2 ln M lets an arm sit within M of both), or one seed
The cell: "separates the accounts" when every angle arm of the cell keeps its architecture's conditioning;
"cannot separate the accounts" when one has drifted; else not resolved.
The margin's default, x2: an arm's ln kappa of the heads varies between seeds by about 0.15 (the design's
kappa_sd, design/loss_model.py), so a paired difference over 4 seeds has a 95% half-width of about 0.34; x2
(ln 2 = 0.69) can then be shown where an arm sits on its architecture, and stays under half the gap between
gpt's and ngpt's heads (about x8 on the smoke grid: half is x2.8), so no arm can be equivalent to both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ngptlab.models.arms import arm as arm_row
from ngptlab.models.arms import turns_like
from ngptlab.settings import default
from ngptlab.speedup.common_kappa import HEADS, by_seed
from ngptlab.speedup.equivalence import NOT_RESOLVED, interval_claim
from ngptlab.stats import LEVEL, mean_sd_interval

METHOD = "paired t on ln kappa (layer 3-4 Q and K heads, at the common token count) over seeds"
KEEPS, DRIFTED = "keeps its architecture's conditioning", "drifted to the other architecture's conditioning"
SEPARATES, CANNOT = "separates the accounts", "cannot separate the accounts"
# What a caller without settings gets: the schema's default, written there alone.
KAPPA_MARGIN: float = default("speedup.kappa_margin")


def rule(margin: float = KAPPA_MARGIN, level: float = LEVEL) -> str:
    band = f"(-ln {margin:g}, ln {margin:g})"
    return ("every arm's kappa of the layer 3-4 Q and K heads read at the cell's common token count; an "
            f"angle arm keeps its architecture's conditioning when the {level:.0%} paired t-interval over "
            f"seeds of the gap in ln kappa between gpt and ngpt lies wholly outside {band} and that of the "
            f"arm's ln kappa less its own architecture's lies inside it (equivalent within x{margin:g}, the "
            "kappa margin) while the one less the other architecture's does not; it has drifted when the one "
            "less the other architecture's lies inside and the one less its own does not; otherwise, and "
            "always with one seed, that is not resolved. The angle square separates the accounts when every "
            "angle arm keeps its architecture's conditioning, cannot when one has drifted")


def _summary(values: list[float], margin: float, level: float) -> dict:
    s = mean_sd_interval(values, level)
    claim = None if s["interval"] is None else interval_claim(s["interval"], margin)
    return {"mean": s["mean"], "interval": s["interval"], "claim": claim, "method": METHOD, "level": level,
            "n_seeds": len(values)}


def arm_separation(log_kappa: Mapping[str, Mapping[int, float]], arm: str, margin: float = KAPPA_MARGIN,
                   level: float = LEVEL) -> dict:
    """{own, other, margin, gap, to_own, to_other {mean, interval, claim, method, level, n_seeds},
    kappa_ratio {to_own, to_other}, verdict} of one angle arm, from ln kappa per (arm, seed)."""
    own, other = arm_row(arm).architecture, turns_like()[arm]
    seeds = sorted(set(log_kappa.get(arm, {})) & set(log_kappa.get(own, {})) & set(log_kappa.get(other, {})))
    k = {a: [log_kappa[a][s] for s in seeds] for a in (arm, own, other)}

    def difference(a: str, b: str) -> dict:
        return _summary([x - y for x, y in zip(k[a], k[b], strict=True)], margin, level)

    gap, to_own, to_other = difference(own, other), difference(arm, own), difference(arm, other)
    verdict = NOT_RESOLVED
    if gap["claim"] in ("exceeds", "falls_short"):
        near_own, near_other = to_own["claim"] == "equivalent", to_other["claim"] == "equivalent"
        verdict = KEEPS if near_own and not near_other else DRIFTED if near_other and not near_own \
            else NOT_RESOLVED

    def ratio(d: dict) -> float | None:
        return None if d["mean"] is None else math.exp(d["mean"])

    return {"own": own, "other": other, "margin": margin, "gap": gap, "to_own": to_own, "to_other": to_other,
            "kappa_ratio": {"to_own": ratio(to_own), "to_other": ratio(to_other)}, "verdict": verdict}


def separation(estimate: Mapping, common: Mapping, margin: float = KAPPA_MARGIN,
               level: float = LEVEL) -> dict | None:
    """{arms {angle arm: arm_separation}, verdict, kappa_tokens (T_common), margin, rule} for the cell's angle
    arms from its estimate_cell document and its kappa at T_common (rivals.cell_kappa's document); None where
    the cell runs no angle arm beside gpt and ngpt."""
    angle_arms = [arm for arm in turns_like() if arm in estimate["arms"]]
    if not angle_arms or not {"gpt", "ngpt"} <= set(estimate["arms"]):
        return None
    log_kappa = {arm: {s: math.log(v) for s, v in by_seed(common, arm, HEADS).items() if 0 < v < math.inf}
                 for arm in ("gpt", "ngpt", *angle_arms)}
    arms = {arm: arm_separation(log_kappa, arm, margin, level) for arm in angle_arms}
    verdicts = {entry["verdict"] for entry in arms.values()}
    verdict = CANNOT if DRIFTED in verdicts else SEPARATES if verdicts == {KEEPS} else NOT_RESOLVED
    return {"arms": arms, "verdict": verdict, "kappa_tokens": common["tokens"], "margin": margin,
            "rule": rule(margin, level)}


def ratio_text(difference: Mapping) -> str | None:
    """A mean ln kappa difference as a ratio with its interval: "x0.41 [0.3, 0.55]", "x0.41 (one seed: no
    interval)"; None without kappa."""
    if difference["mean"] is None:
        return None
    interval = difference["interval"]
    bracket = ("(one seed: no interval)" if interval is None
               else f"[{math.exp(interval[0]):.3g}, {math.exp(interval[1]):.3g}]")
    return f"x{math.exp(difference['mean']):.3g} {bracket}"


def clause(found: Mapping | None) -> str | None:
    """The reading's words for it, each arm's verdict with the intervals it rests on, e.g. "the angle square
    cannot separate the accounts: gpt-angle drifted to the other architecture's conditioning (kappa of the
    heads at 65,536 tokens x0.14 [0.11, 0.18] of gpt's, x1.1 [0.9, 1.4] of ngpt's; margin x2, 95% paired
    t ..., 3 seeds)"; None without it or without a kappa of the heads in any angle arm's runs (runs trained
    before kappa was logged)."""
    if found is None or all(e["to_own"]["mean"] is None for e in found["arms"].values()):
        return None
    parts = []
    for arm, e in found["arms"].items():
        d = e["to_own"]
        if d["mean"] is None:
            parts.append(f"{arm}: no kappa of the heads in its runs")
            continue
        seeds = f"{d['n_seeds']} seed{'s' if d['n_seeds'] != 1 else ''}"
        parts.append(f"{arm} {e['verdict']} (kappa of the heads at {found['kappa_tokens']:,.0f} tokens "
                     f"{ratio_text(d)} of {e['own']}'s, {ratio_text(e['to_other'])} of {e['other']}'s; "
                     f"margin x{e['margin']:g}, {d['level']:.0%} {d['method']}, {seeds})")
    lead = ("the angle square " + found["verdict"] if found["verdict"] != NOT_RESOLVED
            else "not resolved whether the angle square separates the accounts")
    return f"{lead}: " + "; ".join(parts)
