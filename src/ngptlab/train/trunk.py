"""A WSD sweep's trunk (ngptlab.grid.trunks): its segment jobs, its kept states, and where a branch starts.

A segment job trains its trunk from the latest kept state at or before its end (none: from step 0) to its
branch point P, with the trunk's schedule (warmup, then constant), and then keeps the state at P:

    runs/trunks/<cell>/<trunk>/state/       resume checkpoints while a segment trains (as a run's state/)
    runs/trunks/<cell>/<trunk>/to<P>/       the kept state at P, which branches start from: a complete state
                                            directory (weights, AdamW moments, RNG, metrics rows so far)
    results/trunk/<cell>/<trunk>/from<P0>-to<P>.json
                                            the segment's record, the job's declared output: what it is
                                            (spec, span, tokens, identity, status); no times, so the same
                                            segment trained twice writes the same bytes
    results/timing/<cell>/<segment>.json    what it measured: wall time, tokens trained by this job; the
                                            execution settings it ran with (train/execution.py)

Kept states are working state, not results: runs/trunks/ is in .dvcignore, so DVC never hashes, caches or
pushes them (6 GB each at 0.5B). A kept state is deleted once every branch that starts at it is done and a
later kept state exists; the latest is kept, so that a budget larger than every other continues the trunk
from it instead of from step 0 (`ngptlab plan` prints the peak disk). Whoever finishes last (a branch or the
next segment) deletes, under the trunk's lock.

A branch (a WSD run) starts from its own checkpoint if it has one, else from the kept state at its branch
point, else from the latest kept state before it (retraining the trunk's remainder itself: the schedule is
the same there), else from step 0: the same bytes in every case, since batches are a function of (seed,
step) only.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ngptlab import layout, runlock
from ngptlab import schedule as schedules
from ngptlab.errors import CheckpointError
from ngptlab.files import write_json_atomic
from ngptlab.grid.runs import RunSpec
from ngptlab.grid.trunks import Segment, TrunkSpec, trunk_budgets, trunk_of
from ngptlab.schedule import branch_point
from ngptlab.settings import Train
from ngptlab.train import state
from ngptlab.train.identity import trunk_identity
from ngptlab.train.outputs import RunPaths

RECORD_FORMAT = "ngptlab.trunk/1"
KEPT = re.compile(r"^to(\d+)$")
GC_WAIT_S = 1800  # collecting deletes whole kept states, which can take minutes on a network filesystem


@dataclass(frozen=True)
class TrunkPaths:
    tokens_dir: Path
    trunk_dir: Path
    record: Path
    timing: Path
    tensorboard: Path  # the trunk's curves as event files (ngptlab.tensorboard_view)

    @classmethod
    def for_segment(cls, root: str | Path, source: str, segment: Segment) -> TrunkPaths:
        root, trunk = Path(root), segment.trunk
        return cls(root / layout.tokens_dir(source), root / layout.trunk_dir(trunk.cell, trunk.name),
                   root / segment.record,
                   root / layout.timing_file(trunk.cell, segment.name),
                   root / layout.trunk_tensorboard_dir(trunk.cell, trunk.name))

    @property
    def state_dir(self) -> Path:
        return self.trunk_dir / "state"

    def kept(self, step: int) -> Path:
        return self.trunk_dir / f"to{step}"


def kept_states(trunk_dir: Path, expected: dict) -> dict[int, Path]:
    """The trunk's complete kept states of this identity (train/identity.py), by step. A kept state of other
    settings (an edited grad_clip, say, or one from before states recorded an identity) is stale working
    state, not a result: it is deleted."""
    found = {}
    for path in sorted(trunk_dir.glob("to*")):
        match = KEPT.match(path.name)
        if not match or not (path / state.LATEST).is_file():
            continue
        try:
            same = state.saved_identity(path) == expected
        except CheckpointError:
            same = False
        if same:
            found[int(match.group(1))] = path
        else:
            shutil.rmtree(path, ignore_errors=True)
    return found


def latest_kept(trunk_dir: Path, expected: dict, up_to: int) -> Path | None:
    """The kept state with the largest step at or before `up_to`, or None."""
    steps = [step for step in kept_states(trunk_dir, expected) if step <= up_to]
    return trunk_dir / f"to{max(steps)}" if steps else None


def keep_state(paths: TrunkPaths, step: int) -> None:
    """Make the segment's final checkpoint (in state/) the kept state at `step`: one rename."""
    target = paths.kept(step)
    if not (paths.state_dir / state.LATEST).is_file() and (target / state.LATEST).is_file():
        return  # the segment started from its own end: the state is kept already
    shutil.rmtree(target, ignore_errors=True)  # the same state, from an earlier identical training
    (paths.state_dir / ".lock").unlink(missing_ok=True)
    paths.state_dir.rename(target)


def write_record(paths: TrunkPaths, segment: Segment, expected: dict, params: dict, data: dict, tokens: int,
                 diagnostics: dict | None) -> None:
    write_json_atomic(paths.record, {
        "format": RECORD_FORMAT, "segment": segment.name, "trunk": segment.trunk.name,
        "spec": segment.trunk.as_dict(), "start": segment.start, "step": segment.step, "tokens": tokens,
        "status": "diverged" if diagnostics else "completed", "diagnostics": diagnostics,
        "identity": expected, "params": params, "data": data})


def read_record(path: Path) -> dict | None:
    """A segment's record, or None where it is missing or unreadable (the segment then trains again)."""
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return record if isinstance(record, dict) and record.get("format") == RECORD_FORMAT else None


def branches_at(root: str | Path, train: Train, trunk: TrunkSpec) -> dict[int, list[Path]]:
    """The summaries of the trunk's branches, by branch point."""
    found: dict[int, list[Path]] = {}
    for budget in trunk_budgets(train, trunk):
        run = RunSpec(trunk.scale, trunk.context, trunk.arm, budget, trunk.lr, trunk.seed, schedules.WSD)
        found.setdefault(branch_point(train, trunk.context, budget), []).append(
            RunPaths.for_run(root, train.source, run.cell, run.name).summary)
    return found


def collect_garbage(root: str | Path, train: Train, trunk: TrunkSpec, expected: dict) -> list[int]:
    """Delete the kept states no branch needs any more (all branches there done, a later state kept);
    return their steps. Under the trunk's lock, so that of two jobs finishing together one sees the other."""
    trunk_dir = Path(root) / layout.trunk_dir(trunk.cell, trunk.name)
    if not trunk_dir.is_dir():
        return []
    try:
        lock = runlock.acquire(trunk_dir / ".gc.lock", wait_s=GC_WAIT_S)
    except runlock.LockHeld as held:  # the states stay until the next finisher collects them
        print(f"ngptlab train: kept states of {trunk.name} not collected: {held}", file=sys.stderr)
        return []
    with lock:
        kept = kept_states(trunk_dir, expected)
        branches = branches_at(root, train, trunk)
        retired = [step for step, path in kept.items() if step < max(kept)
                   and all(summary.is_file() for summary in branches.get(step, []))]
        for step in retired:
            shutil.rmtree(kept[step], ignore_errors=True)
    return retired


def branch_start(root: str | Path, train: Train, run: RunSpec, full: Mapping,
                 data: dict) -> tuple[Path, dict] | None:
    """Where a WSD run with no checkpoint of its own starts: the trunk's latest kept state at or before its
    branch point, with the trunk's identity (to check it against; `full`: every params key,
    train/identity.py); None: from step 0."""
    trunk = trunk_of(run)
    expected = trunk_identity(trunk, full, data)
    found = latest_kept(Path(root) / layout.trunk_dir(trunk.cell, trunk.name), expected,
                        branch_point(train, run.context, run.budget))
    return (found, expected) if found else None
