"""What a training job runs with, fixed before its first step: the job, its settings, its processes, its
batches, its data and the trajectory it belongs to."""

from __future__ import annotations

from dataclasses import dataclass

from ngptlab.grid.runs import RunSpec
from ngptlab.grid.trunks import TrunkSpec
from ngptlab.settings import Condition, Train
from ngptlab.train.batches import BatchPlan
from ngptlab.train.dist import Topology
from ngptlab.train.jobs import Job
from ngptlab.train.outputs import RunPaths
from ngptlab.train.trunk import TrunkPaths


@dataclass(frozen=True)
class RunContext:
    job: Job  # a run or a trunk segment (train/jobs.py)
    train: Train  # the train section of params
    topo: Topology  # this process among the run's processes (train/dist.py)
    plan: BatchPlan  # the batch arithmetic, and the step the job ends at (train/batches.py)
    data: dict  # the token shards' record: source and hashes (train/data.py)
    expected: dict  # the job's identity (train/identity.py): a checkpoint or output of another is not its
    show_progress: bool  # draw a progress bar (rank 0)
    condition: Condition | None = None  # the condition section of params: kappa over training (None: none)

    @property
    def paths(self) -> RunPaths | TrunkPaths:
        return self.job.paths

    @property
    def spec(self) -> RunSpec | TrunkSpec:
        return self.job.spec

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def main(self) -> bool:
        """Rank 0: the process that reads and writes the files."""
        return self.topo.is_main
