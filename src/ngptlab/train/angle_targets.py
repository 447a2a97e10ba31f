"""The angle per step an angle arm turns its matrices at (gpt-angle: ngpt's; ngpt-angle: gpt's).

Measured, once the matched arm has trained: train.angles[<cell>][<arm>] = {lr, run, kinds}, written by
`ngptlab plan --match-angles` from the matched arm's chosen run (its mean angle per optimizer step per
matrix kind, observe/step_angle.py). A run of the angle arm at learning rate lr' turns kind k by

    theta_k(lr') = kinds[k] x lr' / lr                                   at the schedule's peak

since Adam's step, and so the angle it turns, scales with the learning rate; so the arm's learning-rate
sweep (x0.5, x1, x2 around lr) sweeps the angle alike. Its primary estimate is at multiplier 1 (lr' = lr:
the matched arm's angle, the manipulation the effective-learning-rate account names); the multiplier the
learning-rate policy would choose over the sweep is a secondary one (speedup/lr_policy.py). The schedule
shapes theta over training as it shapes a learning rate (models/rotational.py).

A prior, before any measurement (the smoke grid trains every arm at once), the same for every kind:
  gpt's angle    AdamW's equilibrium angle per step, sqrt(2 eta lambda (1 - beta1) / (1 + beta1)) (Kosson et
                 al., arXiv 2305.17212), at lr' with gpt's weight decay and beta1;
  ngpt's angle   the size of Adam's step on unit-norm rows, ~0.022 rad per step at eta 3e-3 and d 1024
                 (DESIGN.md's estimate: about 4x gpt's equilibrium), scaled as lr' sqrt(d / 1024).
"""

from __future__ import annotations

import dataclasses
import math

from ngptlab.errors import ParamsError
from ngptlab.grid.runs import RunSpec
from ngptlab.grid.trunks import TrunkSpec
from ngptlab.models.gpt import Recipe
from ngptlab.models.gpt import Recipe as GPTRecipe
from ngptlab.models.rotational import equilibrium_angle
from ngptlab.models.scales import Scale
from ngptlab.settings import Train

NGPT_PRIOR = (0.022, 3e-3, 1024)  # rad per step, at this learning rate and d_model


def prior_angle(turns_like: str, lr: float, shape: Scale) -> float:
    """The module docstring's prior angle per step of the matched arm at learning rate lr."""
    if turns_like == "gpt":
        baseline = GPTRecipe()
        return equilibrium_angle(lr, baseline.weight_decay, baseline.betas[0])
    angle, at_lr, at_d = NGPT_PRIOR
    return angle * lr / at_lr * math.sqrt(shape.d_model / at_d)


def targets(train: Train, spec: RunSpec | TrunkSpec, shape: Scale, turns_like: str, kinds: tuple[str, ...]
            ) -> tuple[dict[str, float], str]:
    """({kind: peak angle per step}, where it comes from: the measured run's name, or "prior")."""
    matched = train.angles.get(spec.cell, {}).get(spec.arm)
    if matched is None:
        angle = prior_angle(turns_like, spec.lr, shape)
        return {kind: angle for kind in kinds}, "prior"
    missing = [kind for kind in kinds if kind not in matched.kinds]
    if missing:
        raise ParamsError(f"train.angles.{spec.cell}.{spec.arm}: no angle for {', '.join(missing)} "
                         f"(measured in {matched.run}); run `ngptlab plan --match-angles` again")
    return {kind: matched.kinds[kind] * spec.lr / matched.lr for kind in kinds}, matched.run


def with_targets(recipe: Recipe, train: Train, spec: RunSpec | TrunkSpec, shape: Scale) -> Recipe:
    """The arm's recipe with its rotational matrices' angles set (models/rotational.py); any other arm's
    unchanged."""
    turns_like = getattr(recipe, "turns_like", None)
    if turns_like is None:
        return recipe
    angles, _ = targets(train, spec, shape, turns_like, recipe.turned_kinds)
    return dataclasses.replace(recipe, rotation=angles)
