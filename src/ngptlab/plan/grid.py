"""The resolved grid as a file, results/plan.json: dvc.yaml iterates over it (`foreach: ${runs}`), because a
DVC matrix cannot express learning-rate lists that differ per scale and arm, and the per-run and per-cell
stages read their settings from it. It is derived from params.yaml, so it carries what it was made from and
`--check` refuses a stale one.

Runs and cells are mappings keyed by their names, so DVC names its stages `train@<run>`, `speedup@<cell>`:
adding a learning rate adds stages and renames none (a list would name them by position, and every run after
the new one would look changed).

JSON, not YAML: DVC reads a stage's params file once per stage (it keeps no parsed copy), and its YAML parser
is pure Python: ~16 ms for params.yaml (~0.1 s on a loaded machine), ~0.7 s for the paper preset's resolved
grid, against ~1 ms for this file as JSON. Over the paper preset's 2607 stages that is 40 s to minutes of
`dvc status` once dvc.lock records them.
"""

from __future__ import annotations

import json
from pathlib import Path

from ngptlab import layout
from ngptlab.errors import ParamsError
from ngptlab.files import write_text_atomic
from ngptlab.params import enumerate_runs
from ngptlab.revision import code_fingerprint

GENERATED_BY = "`ngptlab plan --write` from the params file; do not edit. dvc.yaml reads it."

# The params sections the per-run and per-cell stages read from this file (dvc.yaml's `params:`).
SECTIONS = ("train", "condition", "speedup", "evaluate")

# The params keys that shape the grid, declared as params of the report in both tools (in DVC from params.yaml
# itself, with the settings of SECTIONS): editing them without rewriting the plan makes the report changed
# in `dvc status`, and its command then refuses the stale plan.
GRID_KEYS = ("scales", "contexts", "arms", "budgets", "seeds", "learning_rates")


def cell_key(cell: str) -> str:
    """The cell's name as a DVC params key: DVC reads a dot as a nesting level ("0.5B-ctx1024")."""
    return cell.replace(".", "_")


def resolved_grid(params: dict, root: str | Path = ".") -> dict:
    runs = enumerate_runs(params)
    cells: dict[str, dict] = {}
    runs_of_cell: dict[str, list[str]] = {}
    for run in runs:
        cells.setdefault(run.cell, {"scale": run.scale, "context": run.context, "key": cell_key(run.cell)})
        runs_of_cell.setdefault(cell_key(run.cell), []).append(run.name)
    if len(runs_of_cell) != len(cells):
        raise ParamsError(f"train.scales: two cells of {', '.join(cells)} differ only in '.' against '_'; "
                          "rename a scale")
    # A run maps to its cell only: its name already encodes every grid coordinate, and DVC parses this file
    # on every command (a full spec per run made it ~3x larger and added ~1 s to `dvc status` on the paper
    # preset's 1296 runs). `runs_of_cell` is what decides a cell's stages (speedup, evaluate): their declared
    # param in dvc.yaml (and in Snakemake), so a run added to one cell changes that cell's stages only.
    return {
        "generated_by": GENERATED_BY,
        "source": params["prepare"]["source"]["name"],
        "runs": {run.name: run.cell for run in runs},
        "cells": cells,
        "runs_of_cell": runs_of_cell,
        **{name: params[name] for name in SECTIONS},
        # The per-run stages' code, fingerprinted: their declared param in dvc.yaml and in Snakemake, in place
        # of a code directory dependency (which DVC would hash again for each of the grid's runs).
        "code": {stage: code_fingerprint(paths, root) for stage, paths in layout.STAGE_CODE.items()},
    }


def write_grid_file(params: dict, path: str | Path, root: str | Path = ".") -> None:
    write_text_atomic(path, json.dumps(resolved_grid(params, root), indent=1) + "\n")


def check_grid_file(params: dict, path: str | Path, root: str | Path = ".") -> None:
    """Refuse a grid file that no longer matches the params file or the code under root."""
    path = Path(path)
    fix = f"run `ngptlab plan --params <params file> --write {path}`"
    if not path.is_file():
        raise ParamsError(f"{path}: grid file not found; {fix}")
    try:
        written = json.loads(path.read_text())
    except json.JSONDecodeError:
        written = None
    expected = resolved_grid(params, root)
    if not isinstance(written, dict) or any(written.get(k) != v for k, v in expected.items() if k != "code"):
        raise ParamsError(f"{path}: stale, it no longer matches the params file; {fix}")
    changed = [stage for stage, fingerprint in expected["code"].items()
               if written.get("code", {}).get(stage) != fingerprint]
    if changed:
        raise ParamsError(f"{path}: stale, the code of {', '.join(changed)} changed since it was written; "
                          f"{fix}")
