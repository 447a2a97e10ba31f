"""The projected cost of the whole protocol (train.protocol), not only of the runs listed so far.

A grid that prunes its sweeps and adds seeds grows in steps that depend on results: which learning rates
survive the pruning, and where the seeds go (ngptlab.speedup.lr_policy). Every learning rate of a run costs
the same, so the projection applies the steps still to come with stand-in choices (the lowest learning
rates of each sweep survive; the seeds go to the first of them at every budget of the arm: one trunk per
added seed under wsd) and prices the result with the same estimate as the grid itself. That is exact under
speedup.lr_policy largest, and an upper bound under crossing, whose seeds stop at the budget past each arm's
crossing of the target; under budget with wsd each distinct chosen rate adds a trunk per seed, which the
stand-in does not count. `ngptlab design` prices what the protocol trains in each planted truth.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from ngptlab.grid.runs import cell_name
from ngptlab.grid.sweeps import awaits_angle, lr_sweep, pruning_of
from ngptlab.plan.seeds import new_seeds
from ngptlab.settings import STAND_IN_RUN, AddedSeeds, MatchedAngle, Params, PrunedSweep, Train
from ngptlab.speedup.lr_policy import grid_budgets

# What the projection is under each learning-rate rule (module docstring)
PROJECTION_BOUND = {"largest": "; which learning rates survive and where the seeds go does not change it",
                    "crossing": " at most: the added seeds stop at the budget past each arm's crossing "
                                "(`ngptlab design` prices each planted truth)",
                    "budget": " at least, with wsd: each distinct chosen rate adds a trunk per added seed"}


def projection_bound(params: Params) -> str:
    """What the projection is (PROJECTION_BOUND), where the choices still to come could change it: only the
    pruning and the added seeds; the angle arms' runs cost the same at any angle, so matching the angles
    alone projects exactly."""
    protocol = params.train.protocol
    if not (protocol.prune_sweeps or protocol.add_seeds):
        return ""
    return PROJECTION_BOUND.get(params.speedup.lr_policy, "")


def has_protocol(train: Train) -> bool:
    return bool(train.protocol)


def with_stand_in_angles(train: Train) -> Train:
    """train with a stand-in target wherever an angle arm waits for `--match-angles` (its runs then enter
    the grid; what angle it turns does not change what they cost)."""
    angles = {cell: dict(by_arm) for cell, by_arm in train.angles.items()}
    for scale, context, arm in itertools.product(train.scales, train.contexts, train.arms):
        if awaits_angle(train, scale, context, arm):
            angles.setdefault(cell_name(scale, context), {})[arm] = MatchedAngle(1.0, STAND_IN_RUN, {})
    return replace(train, angles=angles)


def projected_params(params: Params) -> Params:
    """params with train.protocol's remaining steps applied (the angle arms' targets, the pruning, then the
    seeds)."""
    train = params.train
    protocol = train.protocol
    if protocol.match_angles:
        train = with_stand_in_angles(train)
    cells = [(s, c, a) for s in train.scales for c in train.contexts for a in train.arms]
    prune = protocol.prune_sweeps
    if prune:
        after, keep = prune.after_budget, prune.keep
        above = min([b for b in train.budgets if b > after])
        pruned = [PrunedSweep(scale, context, arm, after, keep, None,
                              tuple(sorted(lr_sweep(train, scale, context, arm, after))[:keep]), ())
                  for scale, context, arm in cells if pruning_of(train, scale, context, arm, above) is None]
        train = replace(train, pruned_sweeps=(*train.pruned_sweeps, *pruned))
    if protocol.add_seeds:
        wanted = set(new_seeds(train, protocol.add_seeds))
        added = {(e.scale, e.context, e.arm, e.budget): e for e in train.added_seeds}
        for scale, context, arm in cells:
            budgets = grid_budgets(train, scale, context, arm)
            lr = min(lr_sweep(train, scale, context, arm, budgets[-1]))
            for budget in budgets:
                where = (scale, context, arm, budget)
                entry = added.get(where) or AddedSeeds(*where, lr, ())
                added[where] = replace(entry, seeds=tuple(sorted(set(entry.seeds) | wanted)))
        train = replace(train, added_seeds=tuple(added.values()))
    return replace(params, train=train)


def describe(params: Params) -> str:
    """The protocol's steps in words, for the plan's output."""
    train = params.train
    protocol, steps = train.protocol, []
    if protocol.match_angles:
        steps.append("the angle arms join each cell once their matched arms' angles are measured "
                     "(`ngptlab plan --match-angles` once gpt's and ngpt's runs are in)")
    if protocol.prune_sweeps:
        prune = protocol.prune_sweeps
        steps.append(f"the budgets above {prune.after_budget:,} keep {prune.keep} learning rates "
                     f"(`ngptlab plan --prune-sweeps {prune.keep}` once the results up to there are in)")
    if protocol.add_seeds:
        steps.append(f"{protocol.add_seeds} seeds added where speedup.lr_policy "
                     f"{params.speedup.lr_policy} reads, chosen on train.seeds' sweep "
                     f"(`ngptlab plan --add-seeds {protocol.add_seeds}` once train.seeds are in)")
    return "; then ".join(steps)
