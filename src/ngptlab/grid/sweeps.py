"""The learning rates swept at each point of the grid: train.learning_rates, narrowed by train.pruned_sweeps
(successive halving), with the budgets that train.protocol holds back until a sweep is pruned."""

from __future__ import annotations

import itertools

from ngptlab.grid.runs import cell_name
from ngptlab.models.arms import turns_like
from ngptlab.settings import PrunedSweep, Train


def lr_sweep(train: Train, scale: str, context: int, arm: str, budget: int | None = None) -> list[float]:
    """The learning rates swept for (scale, context, arm): the arm's list, or its list for this context; at a
    budget that train.pruned_sweeps prunes, the learning rates it kept, then those kept there because a run
    of them had trained."""
    pruned = pruning_of(train, scale, context, arm, budget) if budget is not None else None
    if pruned is not None:
        window = [float(lr) for lr in pruned.learning_rates]
        trained = sorted({float(t.lr) for t in pruned.trained if t.budget == budget} - set(window))
        return window + trained
    sweep = train.learning_rates[scale][arm]
    return [float(lr) for lr in (sweep[f"ctx{context}"] if isinstance(sweep, dict) else sweep)]


def pruning_of(train: Train, scale: str, context: int, arm: str, budget: int) -> PrunedSweep | None:
    """The train.pruned_sweeps entry that sets the sweep at this budget: of those of (scale, context, arm)
    whose after_budget is below it, the one with the largest after_budget (successive halving prunes in
    rounds); None where the whole sweep runs."""
    entries = [e for e in train.pruned_sweeps if (e.scale, e.context, e.arm) ==
               (scale, context, arm) and e.after_budget < budget]
    return max(entries, key=lambda e: e.after_budget) if entries else None


def held_back(train: Train, scale: str, context: int, arm: str, budget: int) -> bool:
    """What waits, outside the grid, for a step of train.protocol: a budget above prune_sweeps.after_budget
    until `ngptlab plan --prune-sweeps` has pruned the arm's sweep from the results up to there; with
    match_angles, an angle arm until `ngptlab plan --match-angles` has written its target in the cell."""
    prune = train.protocol.prune_sweeps
    if prune and budget > prune.after_budget and pruning_of(train, scale, context, arm, budget) is None:
        return True
    return awaits_angle(train, scale, context, arm)


def awaits_angle(train: Train, scale: str, context: int, arm: str) -> bool:
    """An angle arm whose target train.protocol.match_angles has it wait for, not yet measured in the cell."""
    return (train.protocol.match_angles and arm in turns_like()
            and arm not in train.angles.get(cell_name(scale, context), {}))


def lopsided_sweeps(train: Train) -> list[str]:
    """One line per (scale, context) whose arms do not all get the same number of learning rates: a
    comparison that tunes some arms more than others is not a fair one."""
    lines = []
    for scale, context in itertools.product(train.scales, train.contexts):
        sizes = {arm: len(lr_sweep(train, scale, context, arm)) for arm in train.arms}
        if len(set(sizes.values())) > 1:
            counts = ", ".join(f"{arm} {n}" for arm, n in sizes.items())
            lines.append(f"{scale} ctx{context}: unequal learning-rate sweeps ({counts})")
    return lines
