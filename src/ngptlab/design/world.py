"""One planted world: the result of every run a design may ask for, drawn from the loss model
(design/loss_model.py) under one truth (design/truths.py).

A result is drawn the first time it is asked for and then kept, so the protocol's decisions and the
speed-up estimate read the same runs. Noise terms are kept per what shares them: an (arm, seed) its seed
noise (and a seed the part every arm shares), a WSD trunk (arm, lr, seed) its trunk noise, a run its own.
"""

from __future__ import annotations

import math

import numpy as np

from ngptlab.design.loss_model import LossModel
from ngptlab.design.truths import Truth
from ngptlab.grid.runs import RunSpec
from ngptlab.results import RunResult
from ngptlab.schedule import shares_trunk
from ngptlab.speedup.common_kappa import HEAD_KEYS
from ngptlab.speedup.rivals import RATE_KINDS


class World:
    """The runs of one planted world; result_of is a ngptlab.plan.sweeps.ResultOf."""

    def __init__(self, model: LossModel, truth: Truth, eval_every_tokens: int, rng: np.random.Generator):
        self.model, self.truth, self.eval_every, self.rng = model, truth, eval_every_tokens, rng
        self.noise: dict[tuple, float] = {}
        self.results: dict[RunSpec, RunResult] = {}
        self.mechanism_rng = rng.spawn(1)[0]  # spawning leaves rng's own stream as it was

    def _draw(self, key: tuple, sd: float, rng: np.random.Generator | None = None) -> float:
        if key not in self.noise:
            self.noise[key] = float((rng or self.rng).normal(0.0, sd)) if sd > 0 else 0.0
        return self.noise[key]

    def observed(self, spec: RunSpec) -> dict:
        """The run's kappa and angular-rate rows where the truth plants them (module docstring), else none."""
        planted = self.truth.mechanism(spec.arm)
        if planted is None:
            return {}
        m, key = self.model, (spec.cell, spec.arm, spec.seed)
        ln_kappa = planted[0] + self._draw(("kappa", *key), m.kappa_sd, self.mechanism_rng)
        ln_angle = planted[1] + self._draw(("angle", *key), m.angle_sd, self.mechanism_rng)
        at = float(spec.budget)
        return {"kappa": [(at, dict.fromkeys(HEAD_KEYS, math.exp(ln_kappa)))],
                "angular_rate": [(at, dict.fromkeys(RATE_KINDS, math.exp(ln_angle)))]}

    def run_noise(self, spec: RunSpec) -> float:
        """Seed, trunk and run noise of one run (module docstring)."""
        m = self.model
        shared = self._draw(("seed", spec.cell, spec.seed), m.seed_sd * math.sqrt(m.seed_shared))
        own = self._draw(("arm-seed", spec.cell, spec.arm, spec.seed),
                         m.seed_sd * math.sqrt(1.0 - m.seed_shared))
        seed = shared + own
        trunk = (self._draw(("trunk", spec.cell, spec.arm, spec.lr, spec.seed), m.trunk_sd)
                 if shares_trunk(spec) else 0.0)
        return seed + trunk + self._draw(("run", spec), m.run_sd)

    def result_of(self, spec: RunSpec) -> RunResult:
        if spec not in self.results:
            points = [*range(self.eval_every, spec.budget, self.eval_every), spec.budget]
            losses = self.model.curve(self.truth.speedup(spec.arm), spec.lr, spec.budget, np.array(points),
                                      self.run_noise(spec), self.truth.lr_law(spec.arm))
            curve = [(float(t), float(loss)) for t, loss in zip(points, losses, strict=True)]
            self.results[spec] = RunResult(spec, "completed", curve[-1][1], curve, self.observed(spec))
        return self.results[spec]
