"""The resolved grid as a file, results/plan.json: dvc.yaml iterates over it (`foreach: ${runs}`), because a
DVC matrix cannot express learning-rate lists that differ per scale and arm, and its stages declare their
lineage keys (ngptlab.plan.lineage) from it. It is derived from params.yaml and the code, so it carries
what it was made from, `--check` refuses a stale one, and dvc.yaml's first stage, `plan`, rewrites it. It is
written with the one list of the grid that dvc.yaml spells out, the report's conditioning files
(plan/dvcyaml.py).

Runs, trunk segments and cells are mappings keyed by their names, so DVC names its stages `train@<run>`,
`trunk@<segment>`, `speedup@<cell>`:
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
from ngptlab.grid.enumeration import enumerate_runs
from ngptlab.grid.runs import RunSpec
from ngptlab.grid.trunks import Segment, branch_segment, by_end, enumerate_segments, segment_before
from ngptlab.plan.closure import accepted_digest, stage_fingerprints
from ngptlab.plan.dvcyaml import check_report_inputs, write_report_inputs
from ngptlab.plan.lineage import PER_CELL, PER_SCHEDULE, key_of, made_from
from ngptlab.schedule import shares_trunk
from ngptlab.settings import Params

GENERATED_BY = "`ngptlab plan --write` from the params file and the code; do not edit. dvc.yaml reads it."


def cell_key(cell: str) -> str:
    """The cell's name as a DVC params key: DVC reads a dot as a nesting level ("0.5B-ctx1024")."""
    return cell.replace(".", "_")


def lineage_keys(sources: dict) -> dict:
    """The keys of lineage.made_from's result as dvc.yaml declares them: one per stage, per lineage group
    for trunk, train and condition, and for speedup and evaluate one per cell, under the cell's DVC key."""
    def keys(stage: str, value: dict):
        if stage in PER_CELL:
            return {cell_key(cell): key_of(inputs) for cell, inputs in value.items()}
        if stage in PER_SCHEDULE:
            return {schedule: key_of(inputs) for schedule, inputs in value.items()}
        return key_of(value)

    return {stage: keys(stage, value) for stage, value in sources.items()}


def run_after(params: Params, run: RunSpec, ends: dict[tuple, Segment]) -> str:
    """The file a run's training comes after, its DVC dependency that orders it: the training shard (from
    step 0), or for a WSD run the record of the trunk segment that ends at its branch point."""
    if not shares_trunk(run):
        return f"{layout.tokens_dir(params.prepare.source.name)}/train.bin"
    return branch_segment(ends, params.train, run).record


def segment_after(params: Params, segment: Segment, ends: dict[tuple, Segment]) -> str:
    """A segment's DVC dependency that orders it: the record of the segment before (or the shard)."""
    before = segment_before(ends, segment)
    return before.record if before else f"{layout.tokens_dir(params.prepare.source.name)}/train.bin"


def resolved_grid(params: Params, root: str | Path = ".") -> dict:
    runs = enumerate_runs(params)
    cells: dict[str, dict] = {}
    for run in runs:
        cells.setdefault(run.cell, {"scale": run.scale, "context": run.context, "key": cell_key(run.cell)})
    if len({cell["key"] for cell in cells.values()}) != len(cells):
        raise ParamsError(f"train.scales: two cells of {', '.join(cells)} differ only in '.' against '_'; "
                          "rename a scale")
    code = stage_fingerprints(root, params.train.arms)
    segments = enumerate_segments(params)
    ends = by_end(segments)
    # A run maps to its cell, schedule, lineage group (its train and condition keys) and start only: its
    # name already encodes every grid coordinate, and DVC parses this file on every command (a full spec per
    # run made it ~3x larger and added ~1 s to `dvc status` on the paper preset's 1296 runs).
    return {
        "generated_by": GENERATED_BY,
        "source": params.prepare.source.name,
        "runs": {run.name: {"cell": run.cell, "schedule": run.schedule, "lineage": run.lineage_group,
                            "after": run_after(params, run, ends)} for run in runs},
        "trunks": {segment.name: {"cell": segment.trunk.cell, "trunk": segment.trunk.name,
                                  "span": segment.span, "lineage": segment.trunk.lineage_group,
                                  "after": segment_after(params, segment, ends)}
                   for segment in segments},
        "cells": cells,
        "lineage": lineage_keys(made_from(params, code, accepted_digest(root))),
        "code": code,
    }


def write_grid_file(params: Params, path: str | Path, root: str | Path = ".") -> None:
    """The grid file, and where it is the plan root's dvc.yaml reads, that dvc.yaml's list of the grid's
    conditioning files (plan/dvcyaml.py)."""
    write_text_atomic(path, json.dumps(resolved_grid(params, root), indent=1) + "\n")
    write_report_inputs(params, path, root)


def read_grid_file(path: str | Path) -> dict | None:
    """A grid file's content, or None where it is missing or not a JSON mapping."""
    try:
        written = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return written if isinstance(written, dict) else None


def changed_code(written: dict, now: dict) -> list[str]:
    """The jobs whose code differs between two `code` records of a grid file: a stage, or a run stage's arm
    ("train (gpt-angle)")."""
    changed = []
    for stage, fingerprint in now.items():
        if isinstance(fingerprint, dict):
            was = written.get(stage) if isinstance(written.get(stage), dict) else {}
            arms = [arm for arm, value in fingerprint.items() if was.get(arm) != value]
            changed += [f"{stage} ({', '.join(arms)})"] if arms else []
        elif written.get(stage) != fingerprint:
            changed.append(stage)
    return changed


def check_grid_file(params: Params, path: str | Path, root: str | Path = ".") -> None:
    """Refuse a grid file that no longer matches the params file or the code under root."""
    path = Path(path)
    fix = f"run `ngptlab plan --params <params file> --write {path}`"
    if not path.is_file():
        raise ParamsError(f"{path}: grid file not found; {fix}")
    written = read_grid_file(path)
    if written is None:
        raise ParamsError(f"{path}: not a grid file (not a JSON mapping); {fix}")
    expected = resolved_grid(params, root)
    changed = changed_code(written.get("code", {}), expected["code"])
    if changed:
        raise ParamsError(f"{path}: stale, the code of {', '.join(changed)} changed since it was written; "
                          f"{fix}")
    if any(written.get(k) != v for k, v in expected.items()):
        raise ParamsError(f"{path}: stale, it no longer matches the params file; {fix}")
    check_report_inputs(params, path, root, fix)
