"""What each job of the workflow asks Slurm for: nodes, GPUs, processes, memory, its time limit, and how
often its rule retries.

train.resources.<scale> in params says what the scale's runs need, per node: GPUs, processes (>1 on one
node, or any run over several nodes, means torchrun), memory, plus the number of nodes and the wall time of
its largest run. Every job's Slurm time limit comes from the plan (ngptlab/plan/runtime.py, which `ngptlab
plan` prints): a run's is its budget's share of that time, capped at train.max_job_minutes; a run longer than
that stops by its own clock before it, with a checkpoint and exit 75, and the rule's next attempt resumes it,
so the train, trunk and evaluate rules retry as often as their longest job needs.

Slurm signals a training job signal_lead_s before its limit (sbatch --signal, to every process of the job; a
run checkpoints and exits 75 on it if its own clock has not stopped it first), and torchrun gives its
processes as long to finish before it kills them.

What the Slurm plugin turns into sbatch options: on one node `gpu` (--gpus, the job's total); over several
`gres` gpu:N (--gres, per node), so that every node gets its GPUs. `tasks` (--ntasks) is one per node for CPU
jobs and 0 (left out) for GPU jobs, where the plugin would make it --ntasks-per-gpu: Slurm's default is then
one task per node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cache
from typing import Any, TypeVar

from snakemake.exceptions import WorkflowError

from ngptlab.grid.resources import max_restarts, scale_layout
from ngptlab.grid.trunks import job_tokens
from ngptlab.plan import runtime
from ngptlab.plan.estimate import largest_models, model_size
from ngptlab.workflow.grid import Grid

T = TypeVar("T")


def plan_value(compute: Callable[[], T], what: str) -> T:
    try:
        return compute()
    except ValueError as err:  # a partition limit that leaves no time to train
        raise WorkflowError(f"invalid params: {what}: {err}") from None


class Jobs:
    """The resources of every job of a grid; `main_process` false inside a cluster job (Snakemake's
    `workflow.is_main_process`)."""

    def __init__(self, grid: Grid, main_process: bool = True):
        self.grid = grid
        self.params = grid.params
        self.main_process = main_process
        self.stage_times = plan_value(lambda: runtime.stage_runtimes(self.params,
                                                                     largest_models(self.params.train)),
                                      "stage time limits")
        # Every resource of one train or trunk job, computed once (Snakemake asks for each one separately).
        self.train_job = cache(self._train_job)
        self.trunk_job = cache(self._trunk_job)

    def _training_job(self, scale: str, arm: str, tokens: int) -> dict[str, Any]:
        train = self.params.train
        job = scale_layout(train, scale)
        n_params = model_size(train, scale, arm)[2]
        time = plan_value(lambda: runtime.train_job(train, scale, tokens, n_params), f"train {scale}")
        lead = runtime.signal_lead_s(train, n_params, time.limit_min)
        return {
            "nodes": job.nodes,
            "processes": job.processes_per_node,
            "tasks": 0 if job.gpus else job.nodes,
            "gpu": job.gpus_per_node if job.nodes == 1 else 0,
            "gres": f"gpu:{job.gpus_per_node}" if job.nodes > 1 and job.gpus else "",
            "mem_mb": train.resources[scale].mem_mb,
            "runtime": time.limit_min,
            "jobs": time.jobs,
            "signal_lead_s": lead,
            "slurm_extra": f"--signal=TERM@{lead}" if lead else "",
        }

    def _train_job(self, cell: str, run: str) -> dict[str, Any]:
        spec = self.grid.run(run)
        if cell != spec.cell:
            raise WorkflowError(f"run {run} belongs to cell {spec.cell}, not {cell}")
        return self._training_job(spec.scale, spec.arm, job_tokens(self.params.train, spec))

    def _trunk_job(self, cell: str, trunk: str, span: str) -> dict[str, Any]:
        """A trunk segment needs what a run of its scale needs, for its share of the largest budget's time."""
        segment = self.grid.segment(cell, trunk, span)
        return self._training_job(segment.trunk.scale, segment.trunk.arm,
                                  job_tokens(self.params.train, segment))

    def train_resource(self, name: str) -> Any | Callable[[str, str], Any]:
        """A train resource: the value where every run of the grid has it alike (a constant costs Snakemake
        nothing per job), else a function of (cell, run). `runtime` stays a function, a budget's share, so
        that every train job still passes the check that its run belongs to its cell."""
        values = {self.train_job(spec.cell, run)[name] for run, spec in self.grid.runs.items()}
        if len(values) == 1 and name != "runtime":
            return values.pop()
        return lambda cell, run: self.train_job(cell, run)[name]

    def trunk_resource(self, name: str) -> Callable[[str, str, str], Any]:
        """A trunk resource, a function of (cell, trunk, span)."""
        return lambda cell, trunk, span: self.trunk_job(cell, trunk, span)[name]

    def max_restarts(self) -> int:
        """torchrun's restart limit (train.max_restarts)."""
        return max_restarts(self.params.train)

    # ------------------------------------------------------------------------------------------------------
    # Retries

    def rule_retries(self, jobs: Iterable[int]) -> int | None:
        """A rule's retries when train.max_job_minutes splits jobs (plan/runtime.py); None (the profile's or
        --retries) without a partition limit; 0 inside a cluster job: the Snakemake there runs the one job,
        and the next attempt must be the controller's, a new job with a time limit of its own."""
        if not self.main_process:
            return 0
        if self.params.train.max_job_minutes is None:
            return None
        return runtime.retries(jobs)

    def train_retries(self) -> int | None:
        return self.rule_retries(self.train_job(spec.cell, run)["jobs"]
                                 for run, spec in self.grid.runs.items())

    def trunk_retries(self) -> int | None:
        return self.rule_retries(self.trunk_job(s.trunk.cell, s.trunk.name, s.span)["jobs"]
                                 for s in self.grid.segments.values())

    def evaluate_retries(self) -> int | None:
        return self.rule_retries(entry["jobs"] for entry in self.stage_times["evaluate"].values())

    # ------------------------------------------------------------------------------------------------------
    # The other stages

    def stage_runtime(self, stage: str) -> float:
        """The time limit (minutes) of a stage with one job or one limit: prepare, speedup, report."""
        return self.stage_times[stage]["limit_min"]

    def condition_runtime(self, run: str) -> float:
        """The time limit of a run's condition job: its scale's."""
        return self.stage_times["condition"][self.grid.run(run).scale]["limit_min"]

    def evaluate_runtime(self, cell: str) -> float:
        return self.stage_times["evaluate"][cell]["limit_min"]

    def process_memory(self, run: str) -> int:
        """condition and evaluate load one copy of the model, like one training process; at least 2 GB."""
        res = self.params.train.resources[self.grid.run(run).scale]
        return max(2000, res.mem_mb // res.processes)

    def condition_memory(self) -> int | Callable[[str], int]:
        """The memory of a condition job: the value where every run has it alike, else a function of the
        run."""
        values = {self.process_memory(run) for run in self.grid.runs}
        if len(values) == 1:
            return values.pop()
        return self.process_memory

    def evaluate_memory(self, cell: str) -> int:
        return self.process_memory(self.grid.runs_of_cell(cell)[0])

    def condition_gpus(self) -> int:
        return 1 if self.params.condition.device == "cuda" else 0

    def evaluate_gpus(self, cell: str) -> int:
        """A GPU when the cell's runs trained on one and evaluate.device allows it."""
        scale = next(self.grid.runs[run].scale for run in self.grid.runs_of_cell(cell))
        on_gpu = self.params.train.resources[scale].gpus > 0
        wants = on_gpu and self.params.evaluate.device != "cpu"
        return 1 if wants else 0
