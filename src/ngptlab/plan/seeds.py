"""`ngptlab plan --add-seeds N`: more seeds where they count, at the learning rate every seed is estimated at.

One seed gives a speed-up without an interval; the interval comes from seeds, and a seed costs a run per
(arm, budget) only where it enters the speed-up: at the learning rate and up to the budget the learning-rate
policy names (ngptlab.speedup.lr_policy.cell_policy under speedup.lr_policy, the speed-up stage's own
chooser). So once train.seeds' sweep has results, each (scale, context, arm, budget) the policy reads gets
seeds max(train.seeds) + 1 .. + N at its chosen learning rate there: one train.added_seeds entry. Under the
crossing rule an arm's entries stop at the first budget past its crossing of the target (a fast arm trains
short trunks); under wsd each distinct chosen learning rate of an arm is one trunk per added seed. An angle
arm's seeds run multiplier 1 (its angle per step its matched arm's), the policy's primary choice for it, up
to its reach there; the multiplier tuned over its sweep is estimated on the swept seeds alone.

The entries are written into the params file (comments kept) and the grid file is rewritten, so Snakemake
and `dvc repro` train only the new runs. An arm still waiting for results is left alone, and so is a cell
whose budgets train.protocol still holds back (prune first: the best learning rate above the pruning budget
is not known yet). A second call with the same N changes nothing.

A held-out seed whose run diverged is lost to the estimate (speedup/divergence.py): each arm that lost one
gets a replacement seed at the same learning rate (plan/replacements.py), so it still reads N seeds.

It refuses while an arm's best learning rate at a budget it adds seeds at sits at an edge of its sweep
(plan/tuned.py), unless told to go on: the seeds would estimate the speed-up at a learning rate that may be
off.
"""

from __future__ import annotations

from pathlib import Path

from ngptlab.config.load import load_params
from ngptlab.grid.sweeps import held_back
from ngptlab.plan.edit import add_entries, edit_params_file
from ngptlab.plan.grid import write_grid_file
from ngptlab.plan.replacements import replacements
from ngptlab.plan.sweeps import ResultOf, on_disk
from ngptlab.plan.tuned import refuse_untuned, untuned
from ngptlab.settings import Params, Train
from ngptlab.speedup.lr_policy import cell_policy

ENTRY_KEY = ("scale", "context", "arm", "budget")  # one train.added_seeds entry per grid point


def new_seeds(train: Train, n: int) -> list[int]:
    first = max(train.seeds) + 1
    return list(range(first, first + n))


def proposed_seeds(params: Params, results: ResultOf, n: int) -> tuple[list[dict], list[str]]:
    """(train.added_seeds entries, new or with more seeds, one line per (cell, arm) left short and why)."""
    train = params.train
    wanted = new_seeds(train, n)
    existing = {tuple(getattr(e, k) for k in ENTRY_KEY): e for e in train.added_seeds}
    entries, notes = [], []
    for scale in train.scales:
        for context in train.contexts:
            if any(held_back(train, scale, context, a, b) for a in train.arms for b in train.budgets):
                notes.append(f"{scale} ctx{context}: no seeds added: train.protocol holds budgets back until "
                             "`ngptlab plan --prune-sweeps` has pruned them")
                continue
            policy = cell_policy(params, results, scale, context)
            notes += [f"{scale} ctx{context} {note}" for note in policy.notes]
            for arm in train.arms:
                for budget, lr in policy.of_arm(arm).items():
                    before = existing.get((scale, context, arm, budget))
                    if before is not None and set(wanted) <= set(before.seeds):
                        continue
                    seeds = sorted(set(before.seeds) | set(wanted)) if before else wanted
                    # seeds added earlier keep their learning rate: the runs they trained stay in the grid
                    entries.append({"scale": scale, "context": context, "arm": arm, "budget": budget,
                                    "lr": before.lr if before else lr, "seeds": seeds})
            replacing, lost = replacements(params, results, scale, context, n, entries)
            notes += lost
            entries = merged(entries, replacing)
    return entries, notes


def merged(entries: list[dict], more: list[dict]) -> list[dict]:
    """entries with those of `more` added, the seeds of two entries at one grid point joined."""
    out = {tuple(e[k] for k in ENTRY_KEY): dict(e) for e in entries}
    for e in more:
        key = tuple(e[k] for k in ENTRY_KEY)
        if key in out:
            out[key]["seeds"] = sorted(set(out[key]["seeds"]) | set(e["seeds"]))
        else:
            out[key] = dict(e)
    return list(out.values())


def add_seeds(params_path: str | Path, root: str | Path, plan_file: str | Path,
              n: int, allow_untuned: bool = False) -> tuple[list[dict], list[str]]:
    """Add the seeds to the params file in place and rewrite plan_file; return (entries, notes). Refuse,
    writing nothing, where an arm's best at a budget given seeds sits at an edge of its sweep, unless
    allow_untuned."""
    params = load_params(params_path)
    results = on_disk(root)
    entries, notes = proposed_seeds(params, results, n)
    seeded = [tuple(e[k] for k in ENTRY_KEY) for e in entries]
    notes = refuse_untuned(untuned(params, results, seeded), "--add-seeds", allow_untuned) + notes
    if entries:
        edit_params_file(params_path, lambda document: add_entries(document, "added_seeds", entries,
                                                                   ENTRY_KEY))
        params = load_params(params_path)
    write_grid_file(params, plan_file, root)
    return entries, notes
