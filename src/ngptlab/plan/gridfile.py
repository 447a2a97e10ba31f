"""`ngptlab plan --write FILE`: the grid file (plan/grid.py) written, refusing a grid that changed inside a
DVC run (`--within-grid`); outside one, where it is the plan dvc.yaml's plan stage makes, DVC's record of
that stage updated with it (plan/dvclock.py), so that `dvc status` names what `snakemake -n` does. Not after
`--set`, which prepares a DVC experiment: that runs the plan stage itself, and a queued one must leave the
workspace's dvc.lock as it was."""

from __future__ import annotations

from ngptlab.errors import ParamsError
from ngptlab.grid.enumeration import enumerate_cells, enumerate_runs
from ngptlab.plan.dvclock import commit_plan_stage, is_dvc_plan
from ngptlab.plan.grid import read_grid_file, write_grid_file
from ngptlab.settings import Params


def write_plan(params: Params, params_file: str, path: str, root: str, within_grid: bool,
               record: bool = True) -> int:
    before = read_grid_file(path)
    write_grid_file(params, path, root)
    wrote = f"wrote {path}: {len(enumerate_runs(params))} runs, {len(enumerate_cells(params))} cells"
    if within_grid:  # dvc.yaml's plan stage itself: DVC records it
        print(wrote)
        if before is not None:
            refuse_grid_change(before, read_grid_file(path) or {}, path)
        return 0
    recorded = record and is_dvc_plan(params_file, path, root) and commit_plan_stage(root, path)
    print(f"{wrote}{'; dvc.lock records the plan stage (dvc commit --force plan)' if recorded else ''}")
    return 0


def refuse_grid_change(before: dict, after: dict, path: str) -> None:
    """DVC resolves dvc.yaml's stages (`foreach` over runs and cells) from the plan before its first stage
    rewrites it, so within that run a changed grid would be half seen: refuse, naming the second pass."""
    added = set(after.get("runs", {})) - set(before.get("runs", {}))
    removed = set(before.get("runs", {})) - set(after.get("runs", {}))
    changes = [f"{len(added)} runs added"] if added else []
    changes += [f"{len(removed)} runs removed"] if removed else []
    kept = set(after.get("runs", {})) & set(before.get("runs", {}))
    moved = [run for run in kept if before["runs"][run] != after["runs"][run]]
    changes += [f"{len(moved)} runs start elsewhere"] if moved else []
    if before.get("trunks", {}) != after.get("trunks", {}):
        changes += ["other trunk segments"]
    changes += ["a new source"] if before.get("source") != after.get("source") else []
    if changes:
        change = ", ".join(changes)
        raise ParamsError(f"{path}: the grid changed ({change}) after DVC had resolved its stages from the "
                          "previous plan; the plan is rewritten now, so run `dvc repro` (or `dvc exp run`) "
                          "once more and it trains the new runs. Before `dvc exp run --queue`, change grid "
                          "keys with `ngptlab plan --set KEY=VALUE` instead of -S")
