"""A design's protocol played out on one planted world, through the very functions the stages use.

The grid the params file describes (ngptlab.grid.enumeration), then the steps train.protocol names, in the
order the project runs them: the angle arms' targets (a stand-in: the world plants their speed-ups), the
pruning of the sweeps (ngptlab.plan.prune.proposed_prunes) and the added
seeds (ngptlab.plan.seeds.proposed_seeds), each reading the world's results and its entries merged into an
in-memory copy of the params as `ngptlab plan` merges them into the file (ngptlab.plan.edit.merge_entries);
the grid grows, and its new runs get planted losses when the estimate asks for them. The steps are played on
the sweeps as they are: `ngptlab plan` refuses them where a best learning rate sits at a sweep's edge
(plan/tuned.py), which a researcher fixes by extending the sweep; a planted world does not. Finally every
cell's document from ngptlab.speedup.cell.analyse_cell, and with several cells the Holm adjustment of the
primary effect across them (ngptlab.speedup.across_cells), as the report makes it.
"""

from __future__ import annotations

from dataclasses import asdict, replace

from ngptlab.design.world import World
from ngptlab.grid.enumeration import compared_runs, enumerate_cells
from ngptlab.plan.edit import merge_entries
from ngptlab.plan.protocol import with_stand_in_angles
from ngptlab.plan.prune import proposed_prunes
from ngptlab.plan.seeds import ENTRY_KEY, proposed_seeds
from ngptlab.settings import Params, of_section
from ngptlab.speedup.across_cells import primary_across_cells
from ngptlab.speedup.cell import analyse_cell
from ngptlab.speedup.document import SpeedupDocument


def played_protocol(params: Params, world: World) -> tuple[Params, dict]:
    """(the params once train.protocol's steps are applied, {pruned_sweeps, added_seeds}: their entries)."""
    protocol = params.train.protocol
    decisions: dict[str, list[dict]] = {"pruned_sweeps": [], "added_seeds": []}
    if protocol.match_angles:  # a planted world plants the angle arms' speed-ups, not their angles
        params = replace(params, train=with_stand_in_angles(params.train))
    if protocol.prune_sweeps:
        decisions["pruned_sweeps"], _ = proposed_prunes(params, world.result_of, protocol.prune_sweeps.keep)
        params = with_entries(params, "pruned_sweeps", decisions["pruned_sweeps"], ())
    if protocol.add_seeds:
        decisions["added_seeds"], _ = proposed_seeds(params, world.result_of, protocol.add_seeds)
        params = with_entries(params, "added_seeds", decisions["added_seeds"], ENTRY_KEY)
    return params, decisions


def with_entries(params: Params, key: str, entries: list[dict], match: tuple[str, ...]) -> Params:
    """params with entries merged into train.<key> as `ngptlab plan` merges them into the file."""
    train = asdict(params.train)
    train[key] = list(train[key])
    merge_entries(train[key], entries, match)
    return replace(params, train=of_section("train", train))


def analysed_world(params: Params, world: World) -> dict:
    """{params (grown), decisions, cells {cell: analyse_cell's document}, documents {cell: the same as a
    SpeedupDocument}, across [primary_across_cells rows] | None (one cell: no family to adjust)}."""
    grown, decisions = played_protocol(params, world)
    runs = compared_runs(grown)
    cells = {cell: analyse_cell(grown, cell, [world.result_of(s) for s in runs if s.cell == cell])
             for cell in enumerate_cells(grown)}
    documents = {cell: SpeedupDocument.from_dict(doc) for cell, doc in cells.items()}
    across = primary_across_cells(documents) if len(cells) > 1 else None
    return {"params": grown, "decisions": decisions, "cells": cells, "documents": documents, "across": across}
