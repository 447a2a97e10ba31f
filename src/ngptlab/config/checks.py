"""The checks across fields of a params file that its schema cannot express: every scale x arm has learning
rates, the batch splits over every layout, the entries `ngptlab plan` writes name points of the grid, a WSD
setting can work. Each returns the first problem as one line naming the key, or None."""

from __future__ import annotations

from ngptlab.batch import split_batch, tokens_per_step
from ngptlab.errors import ParamsError
from ngptlab.grid.resources import scale_layout
from ngptlab.grid.sweeps import lr_sweep
from ngptlab.models.scales import resolve_scale
from ngptlab.schedule import wsd_problem
from ngptlab.settings import AddedSeeds, Params, PrunedSweep, Train

# A budget is trained in whole batches: a remainder below this share of it is round-off (the paper preset's
# 10B tokens at 512 x 4096 per step leave 0.01%), one above it a run shorter than its name says.
SHORTFALL_TOLERANCE = 0.01


def cross_field_problem(params: Params) -> str | None:
    source = params.prepare.source
    cap = source.max_documents
    floor = source.min_documents
    if cap is not None and floor is not None and cap < floor:  # the words of ngptlab.prepare.counts
        return (f"prepare.source.max_documents ({cap}) is below prepare.source.min_documents ({floor}): the "
                f"cap stops reading before the floor is reached")
    train = params.train
    if train.source != params.prepare.source.name:
        return (f"train.source {train.source!r} must name the prepared source "
                f"prepare.source.name {params.prepare.source.name!r}")
    for name in train.shapes:
        try:
            resolve_scale(name, train.shapes)
        except ParamsError as err:
            return str(err)
    for scale in train.scales:
        try:
            resolve_scale(scale, train.shapes)
        except ParamsError as err:
            return f"train.scales: {err}"
        if scale not in train.learning_rates:
            return f"train.learning_rates: missing scale {scale!r} (listed in train.scales)"
        for arm in train.arms:
            if arm not in train.learning_rates[scale]:
                return f"train.learning_rates.{scale}: missing arm {arm!r} (listed in train.arms)"
            sweep = train.learning_rates[scale][arm]
            if isinstance(sweep, dict):
                key = f"train.learning_rates.{scale}.{arm}"
                contexts = {f"ctx{c}" for c in train.contexts}
                missing, extra = sorted(contexts - set(sweep)), sorted(set(sweep) - contexts)
                if missing:
                    return f"{key}: missing {missing[0]} (train.contexts lists {missing[0][3:]})"
                if extra:
                    return f"{key}: {extra[0]} is not in train.contexts {list(train.contexts)}"
        if scale not in train.resources:
            return f"train.resources: missing scale {scale!r} (listed in train.scales)"
    for context in train.contexts:
        if train.micro_batch_tokens % context:
            return (f"train.micro_batch_tokens ({train.micro_batch_tokens}) must be a multiple of every "
                    f"context in train.contexts; {context} does not divide it")
        micro_seqs = train.micro_batch_tokens // context
        if train.batch_sequences % micro_seqs and micro_seqs < train.batch_sequences:
            return (f"train.micro_batch_tokens ({train.micro_batch_tokens}) = {micro_seqs} sequences of "
                    f"{context} must divide train.batch_sequences ({train.batch_sequences})")
        for budget in train.budgets:
            if budget < tokens_per_step(train, context):
                return (f"train.budgets: {budget} is smaller than one batch at context {context} "
                        f"(train.batch_sequences {train.batch_sequences} x {context} = "
                        f"{tokens_per_step(train, context)} tokens)")
            step = tokens_per_step(train, context)
            short = budget % step
            if short > budget * SHORTFALL_TOLERANCE:
                return (f"train.budgets: {budget:,} tokens at context {context} are {budget / step:.2f} "
                        f"batches of {step:,} tokens (train.batch_sequences {train.batch_sequences} x "
                        f"{context}): a run would train {budget - short:,} tokens, "
                        f"{short / budget:.1%} short; give a multiple of {step:,} or another batch_sequences")
    for scale in train.scales:
        problem = _layout_problem(train, scale)
        if problem:
            return problem
    problem = _growth_problem(train)
    if problem:
        return problem
    problem = wsd_problem(train)
    if problem:
        return problem
    for baseline in params.speedup.baselines:
        if baseline not in train.arms:
            return f"speedup.baseline {baseline!r} is not among train.arms: {', '.join(train.arms)}"
    reference = params.speedup.reference_budget
    if isinstance(reference, int) and not min(train.budgets) <= reference <= max(train.budgets):
        budgets = train.budgets
        return (f"speedup.reference_budget: {reference:,} tokens lies outside train.budgets "
                f"({min(budgets):,} to {max(budgets):,}): a target there would be an extrapolation")
    return None


def _growth_problem(train: Train) -> str | None:
    """What `ngptlab plan --prune-sweeps` and `--add-seeds` write (train.pruned_sweeps, train.added_seeds) and
    train.protocol must name points of the grid; the first one that does not, as one line."""
    def outside(key: str, entry: PrunedSweep | AddedSeeds) -> str | None:
        for field, listed in (("scale", "scales"), ("context", "contexts"), ("arm", "arms")):
            if getattr(entry, field) not in getattr(train, listed):
                return f"{key}: {field} {getattr(entry, field)!r} is not in train.{listed}"
        return None

    seen: set[tuple] = set()
    for i, entry in enumerate(train.pruned_sweeps):
        key = f"train.pruned_sweeps[{i}]"
        where = (entry.scale, entry.context, entry.arm, entry.after_budget)
        problem = outside(key, entry)
        if problem:
            return problem
        if entry.after_budget not in train.budgets:
            return f"{key}: after_budget {entry.after_budget} is not in train.budgets"
        full = lr_sweep(train, entry.scale, entry.context, entry.arm)
        stray = [lr for lr in entry.learning_rates if float(lr) not in full]
        if stray:
            return f"{key}: learning rate {stray[0]:g} is not in the sweep {[f'{x:g}' for x in full]}"
        for kept in entry.trained:
            if kept.budget not in train.budgets or kept.budget <= entry.after_budget:
                return (f"{key}.trained: budget {kept.budget} is not one of train.budgets above after_budget "
                        f"{entry.after_budget}")
            if float(kept.lr) not in full:
                return (f"{key}.trained: learning rate {kept.lr:g} is not in the sweep "
                        f"{[f'{x:g}' for x in full]}")
        if where in seen:
            return f"{key}: a second entry for {entry.arm} after budget {entry.after_budget}"
        seen.add(where)
    seen = set()
    for i, added in enumerate(train.added_seeds):
        key = f"train.added_seeds[{i}]"
        where = (added.scale, added.context, added.arm, added.budget)
        problem = outside(key, added)
        if problem:
            return problem
        if added.budget not in train.budgets:
            return f"{key}: budget {added.budget} is not in train.budgets"
        twice = sorted(set(added.seeds) & set(train.seeds))
        if twice:
            return f"{key}: seed {twice[0]} is already in train.seeds"
        sweep = lr_sweep(train, *where)
        if float(added.lr) not in sweep:
            return (f"{key}: lr {added.lr:g} is not swept at budget {added.budget} "
                    f"({[f'{x:g}' for x in sweep]})")
        if where in seen:
            return f"{key}: a second added for {added.arm} at budget {added.budget}"
        seen.add(where)
    prune = train.protocol.prune_sweeps
    if prune and prune.after_budget not in sorted(train.budgets)[:-1]:
        return (f"train.protocol.prune_sweeps.after_budget: {prune.after_budget} must be one of "
                f"train.budgets below the largest")
    return None


def _layout_problem(train: Train, scale: str) -> str | None:
    """A scale's processes must split the global batch evenly at every context; one process per GPU."""
    layout = scale_layout(train, scale)
    key = f"train.resources.{scale}"
    if layout.gpus_per_node and layout.processes_per_node != layout.gpus_per_node:
        return (f"{key}: processes ({layout.processes_per_node}) must equal gpus ({layout.gpus_per_node}): "
                f"one training process per GPU, on each node")
    for context in train.contexts:
        try:
            split_batch(train.batch_sequences, train.micro_batch_tokens, context, layout.world_size)
        except ParamsError as err:
            return f"{key}: {layout.describe()}: {err}"
    return None
