"""The two 2x2s read as factorials, per seed, paired over seeds: the conditioning square (gpt, gpt-rownorm,
gpt-orth, ngpt) and the angle square (gpt, gpt-angle, ngpt-angle, ngpt), each arm at the corner its row of
models/arms.yaml (`squares`) gives it.

Coding: y_ab = ln S of the arm in cell (a, b), a = 1 when the weight norms are fixed, b = 1 when the
conditioning is fixed:
  y_00 gpt          norms free, conditioning free (the baseline: ln S = 0 by construction)
  y_10 gpt-rownorm  norms fixed (unit rows), conditioning free
  y_01 gpt-orth     conditioning fixed (kappa = 1); its norm is one learned scalar per matrix, counted free
  y_11 ngpt         norms fixed; conditioning counted fixed (not constrained; observed well conditioned:
                    its row of models/arms.yaml)
The factorial is not clean: ngpt also differs from gpt in more than the two factors (no warmup, no weight
decay, a normalised residual stream and hidden states), and all of that is booked to cell (1, 1), so the
interaction and both main effects carry it. Effects, per seed s (the textbook 2x2 contrasts):
  conditioning = ((y_01 - y_00) + (y_11 - y_10)) / 2   the mean of its two simple effects
  norm         = ((y_10 - y_00) + (y_11 - y_01)) / 2
  interaction  = (y_11 - y_10) - (y_01 - y_00)         the difference of the simple effects (twice
                                                       Montgomery's AB, so exp() of it is a ratio of ratios)
The angle square (ANGLE), coding a = nGPT's architecture, b = nGPT's per-step angle:
  y_00 gpt          gpt's architecture turning at its own angle
  y_01 gpt-angle    gpt's architecture (one learned scalar per matrix) turned at ngpt's per-step angle
  y_10 ngpt-angle   ngpt turned at gpt's per-step angle
  y_11 ngpt         ngpt at its own angle
  angle = ((y_01 - y_00) + (y_11 - y_10)) / 2, architecture = ((y_10 - y_00) + (y_11 - y_01)) / 2,
  interaction = (y_11 - y_10) - (y_01 - y_00), by the same weights.
Seed s of every arm saw the same batches and the same baseline run, so each effect is a paired difference:
over the seeds its mean, sd and the level t-interval mean +- t_{(1+level)/2, n-1} sd / sqrt(n)
(ngptlab.stats, scipy.stats.t), method "paired t on ln S over seeds", exp() giving the ratio; its verdict by
the symmetric rule (speedup/equivalence.py) and its claim p-values for adjustment across cells.
A seed where any of the four arms has no estimate is left out of every effect, each effect using all four
cells; the count is stated. An arm's bound (censored: it never reached, or beat at once, the target) bounds
the effect: with a positive weight in its own direction, with a negative one in the opposite direction
(censored.weighted_sum); such an effect is estimated by the censored likelihood (speedup/censored.py,
method and p-values calibrated to the paired t, equal to it without censoring). Bounds that pull the effect
in opposite directions leave that seed out of that effect, with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ngptlab.models import arms
from ngptlab.speedup.censored import log_of, weighted_sum
from ngptlab.speedup.estimate import Estimate
from ngptlab.speedup.paired import paired_mean
from ngptlab.stats import LEVEL

METHOD = "paired t on ln S over seeds"
# The 2x2 contrasts' weights on y_ab (module docstring): b's main effect, a's, their interaction.
B_EFFECT = {(0, 0): -0.5, (1, 0): -0.5, (0, 1): 0.5, (1, 1): 0.5}
A_EFFECT = {(0, 0): -0.5, (1, 0): 0.5, (0, 1): -0.5, (1, 1): 0.5}
INTERACTION = {(0, 0): 1.0, (1, 0): -1.0, (0, 1): -1.0, (1, 1): 1.0}


@dataclass(frozen=True)
class Square:
    """A 2x2 of arms read as a factorial: arm -> (a, b), the effects' names and weights, the coding."""

    name: str
    arms: Mapping[str, tuple[int, int]]
    weights: Mapping[str, Mapping[tuple[int, int], float]]
    coding: str


def corners(square: str) -> dict[str, tuple[int, int]]:
    """A square's arms as models/arms.yaml places them: arm -> (a, b)."""
    placed = arms.square(square)
    return {placed[corner]: (int(corner[0]), int(corner[1])) for corner in arms.SQUARE_CORNERS}


ARMS = corners("conditioning")  # arm -> (a, b)
_C = arms.square("conditioning")  # corner "ab" -> arm
WEIGHTS = {"conditioning": B_EFFECT, "norm": A_EFFECT, "interaction": INTERACTION}
CODING = (f"y_ab = ln S, a = norms fixed, b = conditioning fixed: y_00 {_C['00']}, y_10 {_C['10']}, y_01 "
          f"{_C['01']} (a learned scalar norm, counted free), y_11 {_C['11']} (conditioning "
          f"{arms.arm(_C['11']).conditioning}; ngpt also drops warmup and weight decay and normalises its "
          "hidden states, all booked to this cell, so the factorial is not clean); conditioning = ((y_01 - "
          "y_00) + (y_11 - y_10)) / 2, norm = ((y_10 - y_00) + (y_11 - y_01)) / 2, interaction = (y_11 - "
          "y_10) - (y_01 - y_00)")
CONDITIONING = Square("conditioning", ARMS, WEIGHTS, CODING)
_A = arms.square("angle")
ANGLE = Square(
    "angle", corners("angle"),
    {"angle": B_EFFECT, "architecture": A_EFFECT, "interaction": INTERACTION},
    f"y_ab = ln S, a = nGPT's architecture, b = nGPT's per-step angle: y_00 {_A['00']}, y_10 {_A['10']} "
    f"(ngpt turned at gpt's angle), y_01 {_A['01']} (gpt with one learned scalar per matrix, turned at "
    f"ngpt's angle), y_11 {_A['11']}; angle = ((y_01 - y_00) + (y_11 - y_10)) / 2, architecture = ((y_10 "
    "- y_00) + (y_11 - y_01)) / 2, interaction = (y_11 - y_10) - (y_01 - y_00)")


def usable_seeds(per_seed: Mapping[str, Mapping[int, Estimate]], square: Square = CONDITIONING
                 ) -> tuple[list[int], list[dict]]:
    """(seeds with an estimate, a number or a bound, for all four arms, [{seed, reason}] for the others)."""
    seeds = sorted(set().union(*(per_seed[arm] for arm in square.arms)))
    used, left_out = [], []
    for s in seeds:
        missing = [arm for arm in square.arms
                   if per_seed[arm].get(s) is None or per_seed[arm][s].value is None]
        if missing:
            left_out.append({"seed": s, "reason": f"no estimate for {', '.join(missing)}"})
        else:
            used.append(s)
    return used, left_out


def effect_of(logs: Mapping[str, Estimate], effect: str, square: Square = CONDITIONING) -> Estimate | None:
    """One seed's effect from its ln S per 2x2 arm: a number, a bound, or None where bounds conflict."""
    return weighted_sum([(square.weights[effect][cell], logs[arm]) for arm, cell in square.arms.items()])


def summarize_effect(values: list[Estimate], margin: float, level: float) -> dict:
    """{estimate {ln, ratio}, log {mean, sd, se, df}, log_interval, interval, method, level, n_seeds,
    n_censored, verdict, p_values}: the paired t-interval of the module docstring over one effect's per-seed
    values, or the censored likelihood's where some are bounds."""
    m = paired_mean(values, margin, level, METHOD)
    return {"estimate": {"ln": m.mean, "ratio": None if m.mean is None else math.exp(m.mean)},
            "log": {"mean": m.mean, "sd": m.sd, "se": m.se, "df": m.df}, "log_interval": m.interval,
            "interval": None if m.interval is None else [math.exp(x) for x in m.interval],
            "method": m.method, "level": level, "n_seeds": len(values),
            "n_censored": sum(v.bound is not None for v in values), "verdict": m.verdict,
            "p_values": m.p_values}


def factorial(per_seed: Mapping[str, Mapping[int, Estimate]], margin: float, level: float = LEVEL,
              square: Square = CONDITIONING) -> dict | None:
    """A 2x2 factorial of the module docstring (per_seed: arm -> seed -> speed-up over the baseline):
    {coding, arms {arm: [a, b]}, seeds, left_out [{seed, reason}], note, effects {name: summarize_effect}}
    (the conditioning square's effects conditioning, norm, interaction; the angle square's angle,
    architecture, interaction); None when the cell lacks one of the square's four arms. left_out names the
    effect where a seed is left out of one effect only (bounds in conflicting directions)."""
    if any(arm not in per_seed for arm in square.arms):
        return None
    seeds, left_out = usable_seeds(per_seed, square)
    logs = {s: {arm: log_of(per_seed[arm][s]) for arm in square.arms} for s in seeds}
    effects = {}
    for name in square.weights:
        values = {s: effect_of(logs[s], name, square) for s in seeds}
        conflicting = [s for s, v in values.items() if v is None]
        for s in conflicting:
            bounded = ", ".join(arm for arm in square.arms if logs[s][arm].bound)
            left_out.append({"seed": s, "effect": name,
                             "reason": f"bounds in conflicting directions for the {name} effect ({bounded})"})
        effects[name] = summarize_effect([v for v in values.values() if v is not None], margin, level)
    missing = sum("effect" not in entry for entry in left_out)
    conflicts = len(left_out) - missing
    note = "; ".join(filter(None, [
        f"{missing} seed(s) left out of every effect for a missing estimate" if missing else None,
        f"{conflicts} (seed, effect) pair(s) left out for bounds in conflicting directions" if conflicts
        else None])) or None
    return {"coding": square.coding, "arms": {arm: list(cell) for arm, cell in square.arms.items()},
            "seeds": seeds,
            "left_out": left_out, "note": note, "effects": effects}
