"""The conditioning over training: what a training run adds to its metrics rows at its evaluation points.

At every evaluation point, the angular update rate and the relative change of every effective matrix since
the interval's start (observe/angular.py): the previous evaluation point, or where the run started (its
initial weights; a WSD branch, its trunk's kept state) or a WSD trunk's branch point (restart_points); and
over the same interval the mean angle per optimizer step of the matrices the optimizer turns (step_angle,
at every train.step_angle_every-th step: observe/step_angle.py), the knob beside that outcome. A job
resumed from its own checkpoint measures on from the start that checkpoint kept. At every k-th evaluation
point (train.condition_every_evals; 0: never) and at the run's last one, the headline
condition numbers the paper's conditioning account rests on:

    kappa  embed_in_cov_condition                  the input embedding's covariance (paper Fig. 4)
           layer{3,4}_{q,k}_head_condition_median  median over heads; the paper's 1-based layers 3, 4
                                                   (Figs. 11-12)

These are the headline's keys of the "effective" variant (observe/tracked.py), computed by the functions the
condition stage computes them with (observe/kappa.py: heads_record, covariance_record) on the same
effective matrices (observe/effective.py) with the condition section's settings: kappa at a step is what
`ngptlab condition` finds on the checkpoint of that step, up to the device's float64 round-off. A
numerically singular one is the string "inf" (ngptlab.results), one the model does not have (fewer than 4
layers) is left out. One pass over the effective matrices serves both.

Observing reads the weights and writes nothing to the model, its optimizer or any random generator: a run's
checkpoint is the same byte for byte with or without it. It runs on rank 0 only, at evaluation points, which
already synchronise with the host.

Cost per evaluation point, from the shapes (N matrix parameters, d model width, V vocabulary): each
matrix formed once in float64 and compared with its previous copy, ~15 N flops and ~10 passes over 8 N
bytes (0.5B: ~8e9 flops, ~40 GB moved; 1B: ~1.6e10, ~90 GB: tens of milliseconds on an H100/H200, memory-
bound; measured 0.3-0.9 s on one CPU thread at cpu-4l with a 50k vocabulary); with kappa, a
covariance 2 V d^2 (0.5B: 1.1e11 flops; 1B: 1.6e11) and its d x d eigenvalues, and 4 n_head SVDs of
head_dim x d blocks (<1e9). Memory: the previous point's matrices, 4 N bytes, held throughout training
(observe/angular.py). Per measured optimizer step, a copy of the matrices and ~5 passes over them
(observe/step_angle.py). For a WSD grid the trunk's kept states (checkpoints at branch points) give the
condition stage's full analysis at those steps for free.
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn

from ngptlab.grid.runs import RunSpec
from ngptlab.grid.trunks import TrunkSpec, trunk_budgets, trunk_of
from ngptlab.models.layers import MatrixInfo
from ngptlab.observe.angular import AngularRate, IntervalStart
from ngptlab.observe.effective import effective_matrices
from ngptlab.observe.kappa import Settings, covariance_record, heads_record, settings_of
from ngptlab.observe.step_angle import StepAngles
from ngptlab.observe.tracked import KAPPA_KEYS, PAPER_LAYERS, paper_kappas
from ngptlab.results import json_ready
from ngptlab.schedule import branch_point, shares_trunk
from ngptlab.settings import Condition, Train


def tracked(info: MatrixInfo) -> bool:
    """A matrix behind one of KAPPA_KEYS: the input embedding, q and k of the paper's layers 3 and 4."""
    return info.kind == "embed_in" or (info.kind in ("q", "k") and info.layer is not None
                                       and info.layer + 1 in PAPER_LAYERS)


def kappa_record(info: MatrixInfo, settings: Settings) -> dict:
    """The part of the condition stage's record of one tracked matrix that paper_kappas reads."""
    weight = info.weight
    if not bool(torch.isfinite(weight).all()):
        record: dict = {"finite": False}
    elif info.kind == "embed_in":
        record = {"finite": True, "covariance": covariance_record(weight, settings)[1]}
    else:
        record = {"finite": True, "heads": heads_record(weight, info.n_heads, settings)[1]}
    return {"kind": info.kind, "layer": info.layer, "variants": {"effective": record}}


def restart_points(train: Train, spec: RunSpec | TrunkSpec) -> frozenset[int]:
    """The steps besides the evaluation points at which an interval starts: a WSD trunk's branch points, where
    its segments and branches start, so that every job of the trunk's runs measures the same intervals
    whichever job trained a step (a branch equals its budget trained alone, metrics rows included). None
    for a cosine run."""
    if isinstance(spec, TrunkSpec):
        trunk = spec
    elif shares_trunk(spec):
        trunk = trunk_of(spec)
    else:
        return frozenset()
    return frozenset(branch_point(train, trunk.context, budget) for budget in trunk_budgets(train, trunk))


class Observer:
    """A training job's observations of its own weights, from the state it starts from."""

    @torch.no_grad()
    def __init__(self, model: nn.Module, step: int, condition: Condition | None, every: int,
                 restarts: frozenset[int] = frozenset(), start: IntervalStart | None = None,
                 step_angle_every: int = 0):
        """`condition`: the condition section of params (None: no kappa); `every`: kappa at every `every`-th
        evaluation point (train.condition_every_evals); `restarts`: restart_points; `start`: the interval
        start kept by the checkpoint the job resumed from (None: the interval starts at `step`);
        `step_angle_every`: the angle per optimizer step at every k-th step (train.step_angle_every; 0:
        never)."""
        device = next(model.parameters()).device
        self.settings = settings_of(condition, device.type) if condition is not None else None
        self.every, self.restarts = every, restarts
        if start is None or start.step == step:
            self.rate = AngularRate(effective_matrices(model), step)
            self.angles = StepAngles(model, step_angle_every)
        else:
            self.rate = AngularRate.resumed(start, device)
            self.angles = StepAngles(model, step_angle_every, start.step_angles)

    def interval_start(self, step: int) -> IntervalStart:
        """What a checkpoint at `step` keeps so that the job resumed from it measures the same intervals."""
        return self.rate.interval_start(step, self.angles.kept())

    def stepping(self, step: int) -> contextlib.AbstractContextManager:
        """Around the optimizer step from `step` (and the arm's post-step hook): its angle, where due."""
        return self.angles.measuring(step)

    @torch.no_grad()
    def passed(self, model: nn.Module, step: int) -> None:
        """A step without an evaluation point: at a restart point the next interval starts here."""
        if step in self.restarts:
            self.rate.restart(effective_matrices(model), step)
            self.angles.restart()

    def kappa_due(self, evaluation: int, last: bool) -> bool:
        """kappa at the `evaluation`-th evaluation point (1-based, in eval_every_tokens) or at the last."""
        return self.settings is not None and self.every > 0 and (evaluation % self.every == 0 or last)

    @torch.no_grad()
    def observe(self, model: nn.Module, step: int, evaluation: int, last: bool) -> dict:
        """The fields of the metrics row of an evaluation point at `step` (strict JSON)."""
        kappa = self.kappa_due(evaluation, last)
        records = {}
        for info in effective_matrices(model):
            self.rate.add(info)
            if kappa and tracked(info):
                records[info.name] = kappa_record(info, self.settings)
        row = {**self.rate.close(step), **self.angles.close()}
        if kappa:
            numbers = paper_kappas(records, "effective")
            row["kappa"] = {key: numbers[key] for key in KAPPA_KEYS if numbers[key] is not None}
        return json_ready(row)
