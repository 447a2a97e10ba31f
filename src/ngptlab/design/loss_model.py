"""The planted loss of a run: what a design is checked against before any GPU-hour is spent.

Final validation loss of a run (arm, budget T tokens, learning rate lr, seed), in nats:

  L = E + A (S_arm T)^-alpha                         the data term of a Chinchilla-style law (Hoffmann et
                                                     al. 2022, arXiv 2203.15556, eq. 10 and its Approach 3
                                                     fit: B = 410.7, beta = 0.28, with E standing in for the
                                                     irreducible and model-size terms at a fixed shape:
                                                     illustrative E = 2.0 nats);
                                                     S_arm is the arm's planted token speed-up over gpt
      + c (ln lr - ln lr*(T))^2                      the learning-rate curvature: a parabola in ln lr
                                                     (illustrative c = 0.04: a learning rate x2 off the
                                                     optimum costs 0.019 nats)
        ln lr*(T) = ln lr*_0 - b ln(T / T_0)         the optimum falls as runs get longer (Bjorck et al.
                                                     2024, arXiv 2409.19913; illustrative b = 0.3)
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

    def lr_star(self, tokens: float) -> float:
        """ln lr*(T) = ln lr*_0 - b ln(T / T_0)."""
        return math.log(self.lr_optimum) - self.lr_drift * math.log(tokens / self.lr_reference_tokens)

    def law(self, speedup: float, tokens: np.ndarray) -> np.ndarray:
        """E + A (S T)^-alpha at every token count (no learning-rate term, no noise)."""
        t = np.asarray(tokens, dtype=float)
        return self.irreducible + self.amplitude * (speedup * t) ** -self.exponent

    def lr_penalty(self, lr: float, budget: float, sensitivity: float = 1.0) -> float:
        """c (ln lr - ln lr*(T))^2, c scaled by an arm's planted sensitivity to the learning rate."""
        return sensitivity * self.lr_curvature * (math.log(lr) - self.lr_star(budget)) ** 2

    def curve(self, speedup: float, lr: float, budget: int, tokens: np.ndarray, noise: float,
              sensitivity: float = 1.0) -> np.ndarray:
        """The validation loss at each evaluation point t <= T of a run of this budget; its last point, at
        t = T, is the run's final loss."""
        t = np.asarray(tokens, dtype=float)
        return (self.law(speedup, t) + self.lr_penalty(lr, budget, sensitivity) + noise
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
