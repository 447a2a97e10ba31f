"""The learning rate every seed is estimated at: chosen on the swept seeds, then the same for every seed.

The seeds of train.seeds sweep the learning rates; the seeds added by `ngptlab plan --add-seeds` run one.
For every seed to estimate the same quantity, the choice is made once, on the swept seeds, and every seed,
the swept ones included, enters the speed-up with its run at the chosen learning rate:

  cosine  per (scale, context, arm, budget): the learning rate of the lowest mean final validation loss
          over the swept seeds at that budget (ties to the smaller); a learning rate with a diverged run
          ranks after every one without, so it wins only where every learning rate has one (then on the
          mean of its completed runs)
  wsd     per trunk (one per (arm, lr, seed), cooldown branches per budget): the learning rate chosen so at
          the arm's largest budget, at every budget of the arm (an added seed trains one trunk)

The estimand is then "S at the learning rate chosen on the swept seeds' sweep" (RULES). The swept seeds chose
it, so their own estimate at it is optimistic (the winner's curse); the held-out seeds' is not
(ngptlab.speedup.selection). `ngptlab plan --add-seeds` and `--prune-sweeps` and the speed-up stage all choose
with chosen_lrs / best_lr, read through a result lookup (ResultOf): the files under a results root or a
planted world's runs in memory.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ngptlab import schedule as schedules
from ngptlab import weight_dtype as weight_dtypes
from ngptlab.grid.runs import RunSpec
from ngptlab.grid.sweeps import held_back, lr_sweep
from ngptlab.results import RunResult
from ngptlab.settings import Train

# The result of a run, or None while it has none.
ResultOf = Callable[[RunSpec], RunResult | None]

RULES = {
    schedules.COSINE: "S at the learning rate chosen on the swept seeds' sweep, per budget: the lowest mean "
                      "final validation loss over the swept seeds at that budget (fewest diverged runs "
                      "first, ties to the smaller)",
    schedules.WSD: "S at the learning rate chosen on the swept seeds' sweep, per trunk: the lowest mean "
                   "final validation loss over the swept seeds at the arm's largest budget (fewest "
                   "diverged runs first, ties to the smaller), at every budget of the arm",
}


Losses = dict[float, tuple[int, float]]  # {lr: (diverged runs, mean final loss of the completed ones)}


def mean_losses(results: ResultOf, runs_by_lr: Mapping[float, Sequence[RunSpec]]) -> Losses | None:
    """{lr: (how many of its runs diverged, mean final loss of the others (inf: none))}; None while any run
    has no result yet."""
    losses: Losses = {}
    for lr, specs in runs_by_lr.items():
        found = [results(spec) for spec in specs]
        if any(r is None for r in found):
            return None
        values = [r.final_val_loss for r in found if r.usable]
        losses[lr] = (len(found) - len(values), statistics.fmean(values) if values else math.inf)
    return losses


def best_lr(losses: Losses) -> float | None:
    """The learning rate with the fewest diverged runs, then the lowest mean loss, then the smaller; None
    when every run of every one diverged."""
    ranked = [(diverged, loss, lr) for lr, (diverged, loss) in losses.items() if math.isfinite(loss)]
    return min(ranked)[2] if ranked else None


def sweep_runs(train: Train, scale: str, context: int, arm: str, budget: int,
               dtype: str | None = None) -> dict[float, list[RunSpec]]:
    """{lr: the runs of train.seeds at it} of the sweep at this budget (the pruned window where pruned), of
    weight dtype `dtype`; by default the first of train.weight_dtype, whose runs decide the plan's pruning
    and added seeds for every dtype (the sweeps are the (scale, context)'s)."""
    schedule, dtype = schedules.of(train), dtype or weight_dtypes.of(train)[0]
    return {lr: [RunSpec(scale, context, arm, budget, lr, seed, schedule, dtype) for seed in train.seeds]
            for lr in lr_sweep(train, scale, context, arm, budget)}


def sweep_losses(train: Train, results: ResultOf, scale: str, context: int, arm: str,
                 budget: int, dtype: str | None = None) -> Losses | None:
    """mean_losses over train.seeds of the sweep at this budget; None while a run is missing."""
    return mean_losses(results, sweep_runs(train, scale, context, arm, budget, dtype))


def grid_budgets(train: Train, scale: str, context: int, arm: str) -> list[int]:
    """The budgets of (scale, context, arm) in the grid now: those train.protocol holds back are not."""
    return sorted(b for b in train.budgets if not held_back(train, scale, context, arm, b))


def choose(losses_at: Callable[[int], Losses | None], budgets: Sequence[int],
           wsd: bool) -> tuple[dict[int, float], str]:
    """({budget: chosen lr}, why some budget has none) from the swept seeds' mean losses per budget: per
    budget, or with wsd the choice at the largest budget for all."""
    if wsd:
        largest = budgets[-1]
        losses = losses_at(largest)
        if losses is None:
            return {}, f"waiting for the results at its largest budget {largest:,} (the best trunk)"
        best = best_lr(losses)
        if best is None:
            return {}, f"every run at its largest budget {largest:,} diverged"
        return dict.fromkeys(budgets, best), ""
    chosen: dict[int, float] = {}
    for budget in budgets:
        losses = losses_at(budget)
        best = None if losses is None else best_lr(losses)
        if best is not None:
            chosen[budget] = best
    waiting = [f"{b:,}" for b in budgets if b not in chosen]
    return chosen, f"no best learning rate yet at {', '.join(waiting)}" if waiting else ""


def chosen_lrs(train: Train, results: ResultOf, scale: str, context: int, arm: str,
               dtype: str | None = None) -> tuple[dict[int, float], str]:
    """({budget: the learning rate every seed of the arm is estimated at}, why some budget has none)."""
    return choose(lambda b: sweep_losses(train, results, scale, context, arm, b, dtype),
                  grid_budgets(train, scale, context, arm), schedules.is_wsd(train))


@dataclass(frozen=True)
class LrPolicy:
    """The learning rates of one cell: chosen[(arm, budget)] = lr, on selection_seeds; notes say why an
    (arm) has a budget without one."""

    rule: str
    chosen: dict[tuple[str, int], float]
    selection_seeds: tuple[int, ...]
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {"rule": self.rule, "selection_seeds": list(self.selection_seeds),
                "chosen": [{"arm": arm, "budget": budget, "lr": lr}
                           for (arm, budget), lr in sorted(self.chosen.items())],
                "notes": list(self.notes)}


def _policy(per_arm: Iterable[tuple[str, tuple[dict[int, float], str]]], wsd: bool,
            selection_seeds: Iterable[int]) -> LrPolicy:
    chosen, notes = {}, []
    for arm, (by_budget, why) in per_arm:
        chosen.update({(arm, budget): lr for budget, lr in by_budget.items()})
        if why:
            notes.append(f"{arm}: {why}")
    return LrPolicy(RULES[schedules.WSD if wsd else schedules.COSINE], chosen, tuple(sorted(selection_seeds)),
                    tuple(notes))


def cell_policy(train: Train, results: ResultOf, scale: str, context: int,
                dtype: str | None = None) -> LrPolicy:
    """The policy of one cell of the params' grid ((scale, context) at one weight dtype: by default the
    first of train.weight_dtype), chosen on train.seeds' runs of that dtype."""
    return _policy(((arm, chosen_lrs(train, results, scale, context, arm, dtype)) for arm in train.arms),
                   schedules.is_wsd(train), train.seeds)


def runs_policy(results: Sequence[RunResult], selection_seeds: Iterable[int] | None = None) -> LrPolicy:
    """The policy read off one cell's runs without their params file: the sweep at each (arm, budget) is
    the learning rates its selection seeds ran (every seed of the runs unless named), the schedule theirs."""
    seeds = sorted({r.spec.seed for r in results} if selection_seeds is None else set(selection_seeds))
    found = {r.spec: r for r in results}
    runs: dict[tuple[str, int], dict[float, list[RunSpec]]] = {}
    for spec in sorted(found):
        if spec.seed in seeds:
            runs.setdefault((spec.arm, spec.budget), {}).setdefault(spec.lr, []).append(spec)
    wsd = any(schedules.shares_trunks(spec.schedule) for spec in found)
    arms = sorted({arm for arm, _ in runs})
    per_arm = ((arm, choose(lambda b, arm=arm: mean_losses(found.get, runs[(arm, b)]),
                            sorted(b for a, b in runs if a == arm), wsd)) for arm in arms)
    return _policy(per_arm, wsd, seeds)
