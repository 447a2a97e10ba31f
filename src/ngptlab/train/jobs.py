"""What one `ngptlab train` process trains: a run (cosine, or a WSD branch) or a WSD trunk segment.

The training loop (train/loop.py) is the same for all three; a job says what differs: its schedule, where it
stops, where it starts when it has no checkpoint of its own, when it is already done, and what it writes at
its end. A run ends at its budget, evaluates there (its final evaluation too: train/final_eval.py) and writes
the run's outputs (train/outputs.py); a segment ends at its branch point and keeps its state there for the
branches (train/trunk.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

from ngptlab import schedule as schedules
from ngptlab.batch import steps_per_run
from ngptlab.errors import CheckpointError
from ngptlab.files import write_json_atomic
from ngptlab.grid.enumeration import find_run
from ngptlab.grid.runs import RunSpec
from ngptlab.grid.trunks import Segment, find_segment, trunk_of
from ngptlab.settings import Params, Train
from ngptlab.train import state, trunk
from ngptlab.train.identity import full_params, mismatch, run_identity, trunk_identity
from ngptlab.train.outcome import Outcome
from ngptlab.train.outputs import RunPaths, finished, unmeasured_timing, write_run_outputs


class RunJob:
    """A run of the grid: from step 0 (or, a WSD branch, from its trunk's state) to its budget."""

    ends_run = True

    def __init__(self, spec: RunSpec, train: Train, root: str | Path, params: Params | None = None):
        self.spec, self.name, self.train, self.root = spec, spec.name, train, root
        self.full = full_params(train, params)  # what its identity is read from (train/identity.py)
        self.paths = RunPaths.for_run(root, train.source, spec.cell, spec.name)
        self.lock_dir = self.paths.state_dir
        self.steps = steps_per_run(train, spec.context, spec.budget)
        self.schedule = schedules.for_run(train, spec)

    def identity(self, data: dict) -> dict:
        return run_identity(self.spec, self.full, data)

    def done(self, expected: dict, main: bool) -> bool:
        if not finished(self.paths, self.name, expected):
            return False
        if main:
            state.discard_state(self.paths.state_dir)  # leftovers of a kill between the final writes
            if not self.paths.timing.is_file():  # finished before timing files existed: a declared output
                write_json_atomic(self.paths.timing, unmeasured_timing(self.name))
            print(f"ngptlab train: {self.name} is already done ({self.paths.summary})", file=sys.stderr)
        return True

    def start(self, data: dict) -> tuple[Path, dict] | None:
        """Where to start without a checkpoint of its own: a WSD branch from its trunk's kept state."""
        if not schedules.shares_trunk(self.spec):
            return None
        return trunk.branch_start(self.root, self.train, self.spec, self.full, data)

    def finish(self, outcome: Outcome, expected: dict) -> str:
        """Write the run's outputs; a WSD branch then deletes the kept states its trunk no longer needs."""
        write_run_outputs(self.spec, self.paths, outcome, expected)
        if schedules.shares_trunk(self.spec):
            trunk_spec = trunk_of(self.spec)
            trunk_expected = trunk_identity(trunk_spec, self.full, outcome.config["data"])
            trunk.collect_garbage(self.root, self.train, trunk_spec, trunk_expected)
        return str(self.paths.summary)


class SegmentJob:
    """A trunk segment: the trunk's stable phase from the latest kept state up to one branch point."""

    ends_run = False

    def __init__(self, segment: Segment, train: Train, root: str | Path, params: Params | None = None):
        self.segment, self.name, self.train, self.root = segment, segment.name, train, root
        self.full = full_params(train, params)  # what its identity is read from (train/identity.py)
        self.spec = segment.trunk
        self.paths = trunk.TrunkPaths.for_segment(root, train.source, segment)
        self.lock_dir = self.paths.trunk_dir
        self.steps = segment.step
        self.schedule = schedules.for_trunk(train, self.spec)

    def identity(self, data: dict) -> dict:
        return trunk_identity(self.spec, self.full, data)

    def done(self, expected: dict, main: bool) -> bool:
        record = trunk.read_record(self.paths.record)
        if record is None:
            before = [trunk.read_record(path) for path in
                      self.paths.record.parent.glob(f"from*-to{self.segment.start}.json")]
            before = next((r for r in before if r and r["status"] == "diverged"
                           and r.get("identity") == expected), None)
            if not before:
                return False
            if main:  # the trunk diverged before this segment's start: so does this segment
                write_json_atomic(self.paths.record, {**before, "segment": self.name,
                                                      "start": self.segment.start, "step": self.segment.step})
            return True
        differs = (f"segment {record.get('segment')!r} on disk" if record.get("segment") != self.name
                   else mismatch(record.get("identity"), expected))
        if differs:
            raise CheckpointError(f"{self.paths.record}: the record of {self.name} is for other settings "
                                  f"({differs}); delete it to train the segment again")
        if main:
            print(f"ngptlab train: {self.name} is already done ({self.paths.record})", file=sys.stderr)
        return True

    def start(self, data: dict) -> tuple[Path, dict] | None:
        expected = self.identity(data)
        found = trunk.latest_kept(self.paths.trunk_dir, expected, self.segment.step)
        return (found, expected) if found else None

    def finish(self, outcome: Outcome, expected: dict) -> str:
        """Keep the state at the branch point (none if it diverged), write the segment's record and timing."""
        step, diagnostics = outcome.steps, outcome.diagnostics
        if diagnostics:
            state.discard_state(self.paths.state_dir)
        else:
            trunk.keep_state(self.paths, step)
        trunk.write_record(self.paths, self.segment, expected, outcome.params, outcome.config["data"],
                           outcome.tokens, diagnostics)
        started = outcome.progress.started_at or 0
        write_json_atomic(self.paths.timing, {
            "segment": self.name, "trunk": self.spec.name, "wall_s": round(outcome.wall_s, 3),
            "train_s": round(outcome.progress.train_s or 0.0, 6), "started_at_step": started, "steps": step,
            "trained_tokens": (step - started) * outcome.batch_tokens,
            "flops_per_token": outcome.flops_per_token, "execution": outcome.execution})
        trunk.collect_garbage(self.root, self.train, self.spec, expected)
        return str(self.paths.record)


def find_job(params: Params, name: str) -> RunSpec | Segment:
    """The run or trunk segment of this grid with this name (`ngptlab plan` lists both)."""
    return find_segment(params, name) or find_run(params, name)


Job = RunJob | SegmentJob


def make_job(spec: RunSpec | Segment, train: Train, root: str | Path, params: Params | None = None) -> Job:
    """The job of a run or a trunk segment, trained with `train`; `params`, the whole params file, is what
    its identity is read from (None: `train` and the schema's defaults; train/identity.py)."""
    job = SegmentJob if isinstance(spec, Segment) else RunJob
    return job(spec, train, root, params)
