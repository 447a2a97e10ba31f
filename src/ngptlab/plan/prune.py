"""`ngptlab plan --prune-sweeps K`: successive halving of the learning-rate sweeps (Jamieson and Talwalkar
2016, "Non-stochastic best arm identification and hyperparameter optimization").

Once every budget up to B has results for every arm of a cell, the budgets above B keep, for every arm
alike, K learning rates of its sweep: the best at B and the K - 1 below it, since the optimal learning rate
falls as runs get longer (Bjorck et al. 2024, arXiv 2409.19913); at the bottom of the sweep the window moves
up. The best at B is the lowest mean final loss over train.seeds (ngptlab.speedup.lr_policy.best_lr, the
speed-up stage's own ranking); above B the policy chooses within the window, so every seed's chosen
learning rate is one that ran. B is train.protocol.prune_sweeps.after_budget when the protocol names one
(the budgets above it are held out of the grid until then: ngptlab.grid.sweeps.held_back), else the largest
budget below the grid's largest whose results, and those of every budget below it, are in.

A trained run is never pruned. Where a run above B has already trained (its summary.json is under the
results root: plan/sweeps.py) at a learning rate outside the window, the entry keeps that learning rate at
that budget, and only there ({budget, lr} in its `trained`): the run stays in the grid, so Snakemake and DVC
neither orphan nor retrain it, its files stay as they are, and the speed-up stage still reads it. Only runs
not yet trained are dropped.

Each decision is one train.pruned_sweeps entry {scale, context, arm, after_budget, keep, best_lr,
learning_rates[, trained]}, written into the params file (comments kept), and the grid file is rewritten, so
Snakemake and `dvc repro` train only what the pruned grid holds: with train.schedule wsd a pruned learning
rate's trunk stops at the last budget it serves (its segments derive from the runs). A second call with the
same K changes nothing: the budgets above B already sweep K learning rates.

An angle arm's window keeps, in place of its best at B, its multiplier 1 (the learning rate at which its
angle per step is its matched arm's, as the learning-rate policy gives it on the results up to B) and the
K - 1 below it: its primary estimate reads multiplier 1 above B too (ngptlab.speedup.lr_policy), and a
window around its best could drop it (the matched arm's choice need not be the angle arm's best).

The pruning refuses while an arm's best at B sits at an edge of its sweep (plan/tuned.py), unless told to
go on: a window around an edge may not hold the optimum.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ngptlab.config.load import load_params
from ngptlab.grid.enumeration import train_runs
from ngptlab.grid.runs import RunSpec
from ngptlab.grid.sweeps import lr_sweep, pruning_of
from ngptlab.models.arms import turns_like
from ngptlab.plan.edit import add_entries, edit_params_file
from ngptlab.plan.grid import write_grid_file
from ngptlab.plan.sweeps import ResultOf, on_disk, trained_on_disk
from ngptlab.plan.tuned import refuse_untuned, untuned
from ngptlab.settings import Params, PrunedSweep, Train
from ngptlab.speedup.lr_policy import best_lr, cell_policy, sweep_losses

DEFAULT_KEEP = 2


def kept_window(sweep: list[float], best: float, keep: int) -> list[float]:
    """The best learning rate and the keep - 1 below it in the sorted sweep, moved up at its bottom."""
    ordered = sorted(sweep)
    i = ordered.index(best)
    lo = max(0, min(i - keep + 1, len(ordered) - keep))
    return ordered[lo:lo + keep]


def decision_budget(params: Params, results: ResultOf, scale: str, context: int) -> tuple[int | None, str]:
    """(B, why): the budget whose results decide the pruning of this cell, or None and what it waits for."""
    train = params.train
    budgets = sorted(train.budgets)
    protocol = train.protocol.prune_sweeps
    candidates = [protocol.after_budget] if protocol else budgets[:-1][::-1]
    for candidate in candidates:
        below = [b for b in budgets if b <= candidate]
        if all(sweep_losses(train, results, scale, context, arm, b) is not None
               for arm in train.arms for b in below):
            return candidate, ""
    if protocol:
        return None, f"results up to budget {protocol.after_budget:,} (train.protocol) are not all in"
    return None, "no budget below the largest has all its results (and those below it) in"


def trained_outside(train: Train, entry: dict, trained: Callable[[RunSpec], bool]) -> list[dict]:
    """[{budget, lr}]: where a run of the arm above the entry's after_budget, at a learning rate outside its
    window, has trained (any seed, schedule or weight dtype: every run the whole sweep would have there)."""
    where = (entry["scale"], entry["context"], entry["arm"])
    whole = PrunedSweep(*where, entry["after_budget"], entry["keep"], None, tuple(lr_sweep(train, *where)),
                        ())
    unpruned = replace(train, pruned_sweeps=(*(e for e in train.pruned_sweeps
                                               if (e.scale, e.context, e.arm) != where), whole))
    found = {(run.budget, run.lr) for run in train_runs(unpruned)
             if (run.scale, run.context, run.arm) == where and run.budget > entry["after_budget"]
             and run.lr not in entry["learning_rates"] and trained(run)}
    return [{"budget": budget, "lr": lr} for budget, lr in sorted(found)]


def proposed_prunes(params: Params, results: ResultOf, keep: int,
                    trained: Callable[[RunSpec], bool] = lambda run: False) -> tuple[list[dict], list[str]]:
    """(train.pruned_sweeps entries to add, one line per cell or arm left as it is and why); `trained` says
    which runs have trained (none by default: a planted world's), whose learning rates the entries keep."""
    train, entries, notes = params.train, [], []
    for scale in train.scales:
        for context in train.contexts:
            budget, why = decision_budget(params, results, scale, context)
            if budget is None:
                notes.append(f"{scale} ctx{context}: not pruned: {why}")
                continue
            above = [b for b in train.budgets if b > budget]
            policy = None  # the cell's choice up to B: an angle arm's multiplier 1
            for arm in train.arms:
                current = lr_sweep(train, scale, context, arm, min(above))
                decided = pruning_of(train, scale, context, arm, min(above))
                if len(current) <= keep or (decided and decided.after_budget >= budget):
                    continue  # already K or fewer above B: nothing to halve
                best = best_lr(sweep_losses(train, results, scale, context, arm, budget))
                if best is None:
                    notes.append(f"{scale} ctx{context} {arm}: not pruned: every run at {budget:,} diverged")
                    continue
                anchor = best
                if arm in turns_like():  # the window keeps multiplier 1, which its primary estimate reads
                    policy = policy or cell_policy(params, results, scale, context, up_to=budget)
                    unit = policy.angle_arms[arm].unit.get(budget) if arm in policy.angle_arms else None
                    anchor = unit if unit in current else best
                entry = {"scale": scale, "context": context, "arm": arm, "after_budget": budget,
                         "keep": keep, "best_lr": best, "learning_rates": kept_window(current, anchor, keep)}
                kept = trained_outside(train, entry, trained)
                entries.append(entry | ({"trained": kept} if kept else {}))
    return entries, notes


def prune_sweeps(params_path: str | Path, root: str | Path, plan_file: str | Path,
                 keep: int = DEFAULT_KEEP, allow_untuned: bool = False) -> tuple[list[dict], list[str]]:
    """Prune the sweeps of the params file in place and rewrite plan_file; return (entries, notes). Refuse,
    writing nothing, where an arm's best at the pruning budget sits at an edge of its sweep, unless
    allow_untuned."""
    params = load_params(params_path)
    results = on_disk(root)
    entries, notes = proposed_prunes(params, results, keep, trained_on_disk(root))
    decided = [(e["scale"], e["context"], e["arm"], e["after_budget"]) for e in entries]
    notes = refuse_untuned(untuned(params, results, decided), "--prune-sweeps", allow_untuned) + notes
    if entries:
        edit_params_file(params_path, lambda document: add_entries(document, "pruned_sweeps", entries, ()))
        params = load_params(params_path)
    write_grid_file(params, plan_file, root)
    return entries, notes
