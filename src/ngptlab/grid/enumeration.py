"""Every run and cell of the grid, in a stable order, and the run of a given name."""

from __future__ import annotations

import itertools
from dataclasses import replace

from ngptlab import schedule as schedules
from ngptlab import weight_dtype as weight_dtypes
from ngptlab.errors import ParamsError
from ngptlab.grid.runs import RunSpec, cell_name, parse_run_name
from ngptlab.grid.sweeps import held_back, lr_sweep
from ngptlab.settings import Params, Train


def enumerate_runs(params: Params) -> list[RunSpec]:
    """Every run the grid describes (train_runs)."""
    return train_runs(params.train)


def train_runs(train: Train) -> list[RunSpec]:
    """Every run a train section describes, in a stable order: the runs of train.schedule, then the cosine
    calibration runs of a WSD grid (train.calibrate), each in (scale, context, arm, budget, seed, lr) order,
    then the runs of train.added_seeds. Budgets that train.protocol holds back until the sweep is pruned
    (held_back) are left out. With several train.weight_dtype, all of these once per dtype, in its order."""
    runs = []
    for schedule, budgets in ((schedules.of(train), train.budgets),
                              (schedules.COSINE, schedules.calibration_budgets(train))):
        for scale, context, arm, budget, seed in itertools.product(
            train.scales, train.contexts, train.arms, budgets, train.seeds
        ):
            if held_back(train, scale, context, arm, budget):
                continue
            for lr in lr_sweep(train, scale, context, arm, budget):
                runs.append(RunSpec(scale, context, arm, budget, float(lr), seed, schedule))
    for added in train.added_seeds:
        for seed in added.seeds:
            runs.append(RunSpec(added.scale, added.context, added.arm, added.budget,
                                float(added.lr), seed, schedules.of(train)))
    return [replace(run, weight_dtype=dtype) for dtype in weight_dtypes.of(train) for run in runs]


def compared_runs(params: Params) -> list[RunSpec]:
    """The runs the speed-up compares: those of train.schedule (not the calibration runs)."""
    schedule = schedules.of(params.train)
    return [run for run in enumerate_runs(params) if run.schedule == schedule]


def enumerate_cells(params: Params) -> list[str]:
    """Every (scale, context, weight dtype) cell: a bf16 run's cell is its own (ngptlab.weight_dtype)."""
    train = params.train
    return [cell_name(s, c, d) for s, c, d in itertools.product(train.scales, train.contexts,
                                                                 weight_dtypes.of(train))]


def find_run(params: Params, name: str) -> RunSpec:
    """The run of this grid with this name; a name outside the grid is an error, not a silent new run."""
    for run in enumerate_runs(params):
        if run.name == name:
            return run
    parse_run_name(name)  # raises a format error first if the name is malformed
    raise ParamsError(f"run {name!r} is not in the grid of this params file (see `ngptlab plan`)")
