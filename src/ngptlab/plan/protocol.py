"""The projected cost of the whole protocol (train.protocol), not only of the runs listed so far.

A grid that prunes its sweeps and adds seeds grows in steps that depend on results: which learning rates
survive the pruning, and at which learning rate the seeds go. Their cost does not depend on it: every
learning rate of a run costs the same, and the seeds follow the learning-rate policy (ngptlab.lr_policy):
one run per budget at that budget's chosen learning rate, or with train.schedule wsd one trunk per added seed
at the arm's chosen learning rate, while each surviving learning rate continues one trunk. So the projection
applies the steps still to come with stand-in choices (the lowest learning rates of each sweep survive; the
seeds go to the first of them, one learning rate for all budgets: a trunk under wsd, under cosine the same
count of runs as one learning rate per budget) and prices the result with the same estimate as the grid
itself: exact, whatever learning rates the policy chooses.
"""

from __future__ import annotations

import copy

from ngptlab.grid.sweeps import lr_sweep, pruning_of
from ngptlab.lr_policy import grid_budgets
from ngptlab.plan.seeds import new_seeds
from ngptlab.schedule import is_wsd
from ngptlab.settings import setting


def has_protocol(train: dict) -> bool:
    return bool(setting(train, "train.protocol"))


def projected_params(params: dict) -> dict:
    """params with train.protocol's remaining steps applied (the pruning, then the seeds)."""
    projected = copy.deepcopy(params)
    train = projected["train"]
    protocol = setting(train, "train.protocol")
    cells = [(s, c, a) for s in train["scales"] for c in train["contexts"] for a in train["arms"]]
    prune = setting(protocol, "train.protocol.prune_sweeps")
    if prune:
        after, keep = prune["after_budget"], prune["keep"]
        above = min([b for b in train["budgets"] if b > after])
        for scale, context, arm in cells:
            if pruning_of(train, scale, context, arm, above) is None:
                sweep = sorted(lr_sweep(train, scale, context, arm, after))
                train.setdefault("pruned_sweeps", []).append(
                    {"scale": scale, "context": context, "arm": arm, "after_budget": after, "keep": keep,
                     "learning_rates": sweep[:keep]})
    if setting(protocol, "train.protocol.add_seeds"):
        wanted = set(new_seeds(train, protocol["add_seeds"]))
        added = {(e["scale"], e["context"], e["arm"], e["budget"]): e
                 for e in setting(train, "train.added_seeds")}
        for scale, context, arm in cells:
            budgets = grid_budgets(train, scale, context, arm)
            lr = min(lr_sweep(train, scale, context, arm, budgets[-1]))
            for budget in budgets:
                entry = added.setdefault((scale, context, arm, budget), {
                    "scale": scale, "context": context, "arm": arm, "budget": budget, "lr": lr, "seeds": []})
                entry["seeds"] = sorted(set(entry["seeds"]) | wanted)
        train["added_seeds"] = list(added.values())
    return projected


def describe(train: dict) -> str:
    """The protocol's steps in words, for the plan's output."""
    protocol, steps = setting(train, "train.protocol"), []
    if setting(protocol, "train.protocol.prune_sweeps"):
        prune = protocol["prune_sweeps"]
        steps.append(f"the budgets above {prune['after_budget']:,} keep {prune['keep']} learning rates "
                     f"(`ngptlab plan --prune-sweeps {prune['keep']}` once the results up to there are in)")
    if setting(protocol, "train.protocol.add_seeds"):
        steps.append(f"{protocol['add_seeds']} seeds added at the learning rate chosen on train.seeds' sweep "
                     f"({'per trunk' if is_wsd(train) else 'per budget'}) "
                     f"(`ngptlab plan --add-seeds {protocol['add_seeds']}` once train.seeds are in)")
    return "; then ".join(steps)
