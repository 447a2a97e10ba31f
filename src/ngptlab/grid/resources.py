"""Where a run trains: train.resources.<scale> asks for `nodes` nodes (default 1), each with `gpus` GPUs and
`processes` training processes (one per GPU on GPUs; CPU processes otherwise) and `mem_mb` of memory.
Counts are per node, as on a Slurm node, so adding nodes never changes what one node must hold."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ngptlab.models.scales import Scale, resolve_scale
from ngptlab.settings import Train

MIN_RUNTIME_MIN = 10  # the shortest Slurm time limit a run gets


@dataclass(frozen=True)
class Layout:
    nodes: int
    gpus_per_node: int
    processes_per_node: int

    @property
    def world_size(self) -> int:
        return self.nodes * self.processes_per_node

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def describe(self) -> str:
        return (f"{self.nodes} node(s) x {self.processes_per_node} process(es) = {self.world_size} "
                f"process(es)")


def scale_layout(train: Train, scale: str) -> Layout:
    resources = train.resources[scale]
    return Layout(resources.nodes, resources.gpus, resources.processes)


def max_restarts(train: Train) -> int:
    """torchrun's --max-restarts: how often a failed process group is restarted (from the last checkpoint)
    within one job before the job fails (train.max_restarts)."""
    return int(train.max_restarts)


def time_limit_min(train: Train, scale: str, tokens: int) -> int:
    """The Slurm time limit of a job of `scale` that trains `tokens` (ngptlab.grid.trunks.job_tokens): their
    share of the scale's runtime_min (the wall time of the grid's largest budget), at least MIN_RUNTIME_MIN; a
    job cut off resumes on the profile's retry."""
    share = tokens / max(train.budgets)
    return max(MIN_RUNTIME_MIN, math.ceil(train.resources[scale].runtime_min * share))


def run_shape(train: Train, scale: str) -> Scale:
    """The shape of a scale named in the train section: train.shapes first, then the named defaults."""
    return resolve_scale(scale, train.shapes)
