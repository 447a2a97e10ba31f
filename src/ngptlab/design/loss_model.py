"""The planted loss of a run: what a design is checked against before any GPU-hour is spent.

Final validation loss of a run (arm, budget T tokens, learning rate lr, seed), in nats:

  L = E + A (S_arm T)^-alpha                         the data term of a Chinchilla-style law (Hoffmann et
                                                     al. 2022, arXiv 2203.15556, eq. 10 and its Approach 3
                                                     fit: B = 410.7, beta = 0.28, with E standing in for the
                                                     irreducible and model-size terms at a fixed shape:
                                                     illustrative E = 2.0 nats);
                                                     S_arm is the arm's planted token speed-up over gpt
      + k_arm c (ln lr - ln lr*(T))^2                the learning-rate curvature: a parabola in ln lr
                                                     (illustrative c = 0.04: a learning rate x2 off the
                                                     optimum costs 0.019 nats)
        ln lr*(T) = ln (o_arm lr*_0)                 the optimum falls as runs get longer (Bjorck et al.
                    - d_arm b ln(T / T_0)            2024, arXiv 2409.19913; illustrative b = 0.3);
                                                     k_arm, o_arm, d_arm: an arm's own curvature, optimum
                                                     and drift as factors on gpt's (LrLaw; 1 unless a
                                                     truth plants another)
      + seed noise                                   shared by every run of an (arm, seed): its data order
                                                     and initialisation; the fraction `seed_shared` of its
                                                     variance is shared across arms too (the same batches)
      + trunk noise                                  shared by a WSD trunk's cooldown branches (train.schedule
                                                     wsd); none under cosine, where each run is its own
      + run noise                                    independent (the cooldown, the evaluation)

Default seed sd 0.0025 nats: the modded-nanogpt optimization track measures 0.0013-0.0025 nats between 10
seeds of its 124M speed-runs, and the default is no smaller. Trunk and run sd 0.001 each (illustrative).
The within-run validation curve (RunResult.curve, which the speed-up stage's cheaper estimate reads) is the
same law at the evaluation points before T plus an anneal offset g (1 - t / T) (illustrative g = 0.05): a
mid-schedule loss sits above what the annealed run reaches at that token count.

Every planted world also plants each arm's ln kappa and ln angle per step (design/placements.py); a run
measures them with seed noise shared by every run of an (arm, seed): sd kappa_sd = 0.15 in ln kappa (the
sd the dose-response reading's coverage was measured at, speedup/dose_response.py, is 0.15 too) and
angle_sd = 0.05 in ln angle (illustrative: the angle is a mean over a whole run and seven matrix kinds, so it
moves less between seeds than one checkpoint's kappa).

Every parameter is the params file's `design:` section (config/schema.yaml, defaults there); lr_optimum null
is the geometric centre of the (primary) baseline's sweep and lr_reference_tokens null the geometric mean of
the smallest and largest budget, so the optimum starts inside the sweep and drifts through it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields

import numpy as np

from ngptlab.settings import Params


@dataclass(frozen=True)
class LrLaw:
    """How an arm's learning-rate term differs from gpt's, each a factor: its curvature k (how sharply the
    loss rises away from the optimum), its optimum o at T_0 and its drift d (how fast the optimum falls)."""

    curvature: float = 1.0
    optimum: float = 1.0
    drift: float = 1.0

    @property
    def label(self) -> str:
        return " ".join(f"{name} x{value:.3g}" for name, value in
                        (("curvature", self.curvature), ("optimum", self.optimum), ("drift", self.drift))
                        if value != 1.0)


SAME_LAW = LrLaw()


@dataclass(frozen=True)
class LossModel:
    """The law's and the noise's parameters (module docstring)."""

    irreducible: float
    amplitude: float
    exponent: float
    lr_curvature: float
    lr_drift: float
    lr_optimum: float
    lr_reference_tokens: float
    seed_sd: float
    seed_shared: float
    trunk_sd: float
    run_sd: float
    anneal_gap: float
    kappa_sd: float  # every planted world's seed noise in ln kappa (design/placements.py)
    angle_sd: float  # and in ln angle per step

    def lr_star(self, tokens: float, arm: LrLaw = SAME_LAW) -> float:
        """ln lr*(T) = ln (o lr*_0) - d b ln(T / T_0), o and d the arm's (gpt's: 1)."""
        return (math.log(arm.optimum * self.lr_optimum)
                - arm.drift * self.lr_drift * math.log(tokens / self.lr_reference_tokens))

    def law(self, speedup: float, tokens: np.ndarray) -> np.ndarray:
        """E + A (S T)^-alpha at every token count (no learning-rate term, no noise)."""
        t = np.asarray(tokens, dtype=float)
        return self.irreducible + self.amplitude * (speedup * t) ** -self.exponent

    def lr_penalty(self, lr: float, budget: float, arm: LrLaw = SAME_LAW) -> float:
        """k c (ln lr - ln lr*(T))^2, by the arm's learning-rate law (gpt's: k = o = d = 1)."""
        return arm.curvature * self.lr_curvature * (math.log(lr) - self.lr_star(budget, arm)) ** 2

    def curve(self, speedup: float, lr: float, budget: int, tokens: np.ndarray, noise: float,
              arm: LrLaw = SAME_LAW) -> np.ndarray:
        """The validation loss at each evaluation point t <= T of a run of this budget; its last point, at
        t = T, is the run's final loss."""
        t = np.asarray(tokens, dtype=float)
        return (self.law(speedup, t) + self.lr_penalty(lr, budget, arm) + noise
                + self.anneal_gap * (1.0 - t / budget))


DESIGN_KEYS = tuple(f.name for f in fields(LossModel))


def loss_model(params: Params, overrides: dict | None = None) -> LossModel:
    """The loss model of a params file: its `design:` section over the schema's defaults, then `overrides`
    (the command line's); the two null defaults resolved from the grid (module docstring)."""
    values = {key: getattr(params.design, key) for key in DESIGN_KEYS}
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    train = params.train
    if values["lr_optimum"] is None:
        baseline = params.speedup.baselines[0]  # the primary's: the one every speed-up is read against
        sweeps = [lr for scale in train.scales for lr in _sweep(train.learning_rates[scale][baseline])]
        values["lr_optimum"] = math.exp((math.log(min(sweeps)) + math.log(max(sweeps))) / 2)
    if values["lr_reference_tokens"] is None:
        budgets = train.budgets
        values["lr_reference_tokens"] = math.sqrt(min(budgets) * max(budgets))
    return LossModel(**{k: float(v) for k, v in values.items()})


def _sweep(sweep: tuple[float, ...] | Mapping[str, tuple[float, ...]]) -> list[float]:
    """An arm's learning rates, over every context when the sweep is given per context."""
    per_context = sweep.values() if isinstance(sweep, Mapping) else [sweep]
    return [float(lr) for lrs in per_context for lr in lrs]
