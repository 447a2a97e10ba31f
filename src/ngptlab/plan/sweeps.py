"""What the finished runs say about a sweep, for `ngptlab plan --prune-sweeps` and `--add-seeds`: per
(scale, context, arm, budget), the mean final validation loss of each learning rate over train.seeds, and
the best of them. Added seeds never enter it: they run one learning rate, the one chosen here. With several
train.weight_dtype, the runs of the first dtype decide for every dtype (the sweeps are the (scale,
context)'s)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from pathlib import Path

from ngptlab import schedule as schedules
from ngptlab import weight_dtype as weight_dtypes
from ngptlab.grid.runs import RunSpec
from ngptlab.grid.sweeps import held_back, lr_sweep
from ngptlab.results import RunResult, read_run_result, train_dir

# The result of a run, or None while it has none: the files under a results root (on_disk), or a planted
# world's runs held in memory (ngptlab.design), read by the same decisions.
ResultOf = Callable[[RunSpec], RunResult | None]


def on_disk(root: str | Path) -> ResultOf:
    """The results under root (final losses only): None for a run without a summary yet."""
    def result_of(spec: RunSpec) -> RunResult | None:
        if not (train_dir(root, spec) / "summary.json").is_file():
            return None
        return read_run_result(root, spec, with_curve=False)
    return result_of


def mean_losses(params: dict, results: ResultOf, scale: str, context: int, arm: str,
                budget: int) -> dict[float, float] | None:
    """{lr: mean final loss over train.seeds} of the sweep at this budget; inf for a learning rate with a
    diverged run (it cannot be the best); None while any of its runs has no result yet."""
    train = params["train"]
    losses: dict[float, float] = {}
    for lr in lr_sweep(train, scale, context, arm, budget):
        values = []
        for seed in train["seeds"]:
            result = results(RunSpec(scale, context, arm, budget, lr, seed, schedules.of(train),
                                     weight_dtypes.of(train)[0]))
            if result is None:
                return None
            values.append(result.final_val_loss if result.usable else math.inf)
        losses[lr] = statistics.fmean(values) if all(math.isfinite(v) for v in values) else math.inf
    return losses


def best_lr(losses: dict[float, float]) -> float | None:
    """The learning rate of the lowest mean loss (ties to the smaller, as the speed-up stage breaks them);
    None when every one diverged."""
    finite = [(loss, lr) for lr, loss in losses.items() if math.isfinite(loss)]
    return min(finite)[1] if finite else None


def grid_budgets(train: dict, scale: str, context: int, arm: str) -> list[int]:
    """The budgets of (scale, context, arm) in the grid now: those train.protocol holds back are not."""
    return sorted(b for b in train["budgets"] if not held_back(train, scale, context, arm, b))
