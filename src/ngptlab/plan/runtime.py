"""The Slurm time limit of every job, from the plan, never the profile's blind default.

Each figure is an estimate in closed form from the grid (no torch, no data read), with its rate stated
beside it; `<stage>.runtime_min` in params overrides a stage's estimate (train's comes from
train.resources.<scale>.runtime_min, the wall time of the grid's largest budget).

train.max_job_minutes is the partition's limit: no job asks for more. A run or trunk segment whose estimate
exceeds it trains over several jobs (train/job_limit.py stops it by its own clock with a checkpoint, exit 75,
and the workflow's next attempt resumes it), so its rule gets that many retries; evaluate the same
(evaluate/partial.py keeps each finished run's accuracies). A job's limit is its estimate, capped at the
partition's limit, and never below MIN_RUNTIME_MIN.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass

from ngptlab import weight_dtype as weight_dtypes
from ngptlab.checkpoint_cost import checkpoint_minutes, state_bytes, write_gbps
from ngptlab.evaluate.tasks import CONTINUATION, N_CHOICES, OFFLINE_EXAMPLES, OFFLINE_TASKS
from ngptlab.grid.enumeration import compared_runs
from ngptlab.grid.resources import MIN_RUNTIME_MIN, run_shape, time_limit_min
from ngptlab.grid.runs import cell_name
from ngptlab.jobclock import MARGIN_FRACTION, MARGIN_MAX_S
from ngptlab.settings import Params, Train

# Retries beyond those a long job needs: one, for a failure (a node lost, a preemption without requeue).
FAILURE_RETRIES = 1
# What a job spends before its first step: imports, the shard check, building the model (~1.5 min for a
# 1B gpt-orth on one CPU thread, measured here), torchrun's rendezvous.
STARTUP_MIN = 3.0
SIGNAL_MIN_LIMIT_MIN = 3  # sbatch --signal only for jobs at least this long (signal_lead_s)

# prepare: tiktoken encodes ~12 MB/s of English per thread here; 2 MB/s per worker leaves room for reading
# parquet, splitting, writing and hashing. An average OpenWebText document is ~4.8 KB (~38 GB / 8.0M).
PREPARE_MB_PER_S_PER_WORKER = 2.0
DOCUMENT_BYTES = 4800
DOWNLOAD_MB_PER_S = 50.0  # an hf source is downloaded (or read from the HF cache) first

# condition: float64 singular values of every matrix, ~4 m n min(m, n) FLOPs each, ~4 n_params d_model in
# all; svdvals of a 4096 x 1024 matrix runs at ~44 GFLOP/s on one thread here, 10 is a cautious node figure.
CONDITION_FLOPS = 10e9

# evaluate: lm-eval requests (one forward pass each) per example of the known tasks, on their full sets
# (the paper's five: ~58k per checkpoint); an unknown task counts UNKNOWN_TASK_REQUESTS.
TASK_SIZES = {"arc_easy": (2376, 4), "hellaswag": (10042, 4), "winogrande": (1267, 2), "wsc273": (273, 2),
              "lambada_openai": (5153, 1)}  # (examples, choices)
UNKNOWN_TASK_REQUESTS = 20_000
REQUEST_TOKENS = 256  # tokens of one request's forward pass, at most the context
EVAL_FLOPS = {"gpu": 989e12 * 0.1, "cpu": 20e9}  # small-batch inference: a tenth of an H100's peak; a CPU


@dataclass(frozen=True)
class JobTime:
    """A job's estimated wall minutes, the Slurm limit of each of its jobs, and how many jobs it takes."""

    estimate_min: float
    limit_min: int
    jobs: int

    def as_dict(self) -> dict:
        return {"estimate_min": self.estimate_min, "limit_min": self.limit_min, "jobs": self.jobs}


def job_time(estimate_min: float, partition_min: float | None, checkpoint_min: float = 0.0) -> JobTime:
    """Split `estimate_min` of work into jobs of at most `partition_min` (None: one job of any length). Each
    job but the last loses its startup (at most a quarter of it), a checkpoint and its clock's margin
    (jobclock.MARGIN_*). Slurm's --time is whole minutes: a partition limit under one minute (a test's)
    asks for one."""
    estimate_min = max(estimate_min, 0.0)
    if partition_min is None:
        return JobTime(estimate_min, max(MIN_RUNTIME_MIN, math.ceil(estimate_min)), 1)
    slot = max(1, math.floor(partition_min))
    if estimate_min <= partition_min:
        return JobTime(estimate_min, min(max(MIN_RUNTIME_MIN, math.ceil(estimate_min)), slot), 1)
    margin_min = min(MARGIN_MAX_S / 60, MARGIN_FRACTION * partition_min)  # the job clock's
    usable = partition_min - min(STARTUP_MIN, 0.25 * partition_min) - checkpoint_min - margin_min
    if usable <= 0.1 * partition_min:
        raise ValueError(f"train.max_job_minutes {partition_min:g} leaves no time to train: startup, a "
                         f"checkpoint ({checkpoint_min:.1f} min) and a margin ({margin_min:.1f} min) fill it")
    return JobTime(estimate_min, slot, math.ceil((estimate_min - usable) / usable) + 1)


def train_job(train: Train, scale: str, tokens: int, n_params: int) -> JobTime:
    """A run's or trunk segment's jobs: its share of runtime_min (grid.resources.time_limit_min) over the
    partition's limit."""
    estimate = float(time_limit_min(train, scale, tokens))
    return job_time(estimate, train.max_job_minutes, checkpoint_minutes(train, n_params))


def retries(jobs: Iterable[int]) -> int:
    """The retries of a rule whose jobs take `jobs` Slurm jobs each: the longest's less one, plus
    FAILURE_RETRIES."""
    return max(jobs, default=1) - 1 + FAILURE_RETRIES


def signal_lead_s(train: Train, n_params: int, limit_min: float | None = None) -> int:
    """How long before its time limit Slurm signals a training job (sbatch --signal=TERM@lead): enough to
    finish the step and write a checkpoint twice over, at least two minutes; train.signal_lead_s sets it.
    Never more than half of a job's `limit_min`; 0 (no signal) for a job shorter than SIGNAL_MIN_LIMIT_MIN:
    Slurm may send it up to a minute early, and such a job stops by its own clock."""
    lead = train.signal_lead_s
    lead = int(lead) if lead else max(120, math.ceil(2 * 60 * checkpoint_minutes(train, n_params) + 60))
    if limit_min is None:
        return lead
    return min(lead, int(30 * limit_min)) if limit_min >= SIGNAL_MIN_LIMIT_MIN else 0


# ----------------------------------------------------------------------------------------------------------
# The other stages


def _override(params: Params, stage: str) -> float | None:
    return getattr(params, stage).runtime_min


def prepare_minutes(params: Params) -> float:
    """Reading (downloading) and tokenizing the source: its documents (min_documents or max_documents,
    whichever is set; the embedded corpus is small) at DOCUMENT_BYTES each."""
    if (override := _override(params, "prepare")) is not None:
        return float(override)
    source, workers = params.prepare.source, max(1, int(params.prepare.workers))
    documents = source.min_documents or source.max_documents or 0
    megabytes = documents * DOCUMENT_BYTES / 1e6
    download = megabytes / DOWNLOAD_MB_PER_S if source.kind == "hf" else 0.0
    return (download + megabytes / (PREPARE_MB_PER_S_PER_WORKER * workers)) / 60 * 1.5  # +50%


def condition_minutes(params: Params, scale: str, n_params: int) -> float:
    if (override := _override(params, "condition")) is not None:
        return float(override)
    flops = 4 * n_params * run_shape(params.train, scale).d_model
    return STARTUP_MIN + flops / CONDITION_FLOPS / 60 * 1.5


def evaluate_requests(params: Params) -> int:
    """lm-eval requests per evaluated checkpoint: each task's examples (capped by evaluate.limit) times
    its choices."""
    limit, total = params.evaluate.limit, 0
    for task in params.evaluate.tasks:
        if task in OFFLINE_TASKS:
            examples, choices = OFFLINE_EXAMPLES, (N_CHOICES if task == CONTINUATION else 1)
        else:
            examples, choices = TASK_SIZES.get(task, (UNKNOWN_TASK_REQUESTS, 1))
        total += min(examples, limit or examples) * choices
    return total


def evaluated_runs(params: Params, cell: str) -> int:
    """How many runs evaluate picks in a cell: one per (arm, budget, seed) at the budgets it evaluates."""
    specs = [s for s in compared_runs(params) if s.cell == cell]
    budgets = sorted({s.budget for s in specs})
    wanted = set(budgets[-1:] if params.evaluate.budgets == "largest" else budgets)
    return len({(s.arm, s.budget, s.seed) for s in specs if s.budget in wanted})


def evaluate_minutes(params: Params, cell: str, n_params: int, context: int, on_gpu: bool) -> float:
    if (override := _override(params, "evaluate")) is not None:
        return float(override)
    per_request = 2 * n_params * min(context, REQUEST_TOKENS) / EVAL_FLOPS["gpu" if on_gpu else "cpu"]
    per_run = per_request * evaluate_requests(params) / 60 + 0.2  # + loading the checkpoint
    return STARTUP_MIN + 1.5 * per_run * evaluated_runs(params, cell)


def report_minutes(params: Params, n_runs: int) -> float:
    if (override := _override(params, "report")) is not None:
        return float(override)
    return 2.0 + n_runs * 0.5 / 60  # reading each run's results and curves; rendering the figures


# ----------------------------------------------------------------------------------------------------------
# Every rule's limit, for the workflow and `ngptlab plan`


def stage_runtimes(params: Params, n_params: dict[str, int]) -> dict:
    """The time limits of the stages other than train: prepare, report and speedup once, condition per
    scale, evaluate per cell; `n_params`: the largest model of each scale. Only evaluate continues over
    several jobs; a stage that cannot is capped at the partition's limit and flagged `fits: false`."""
    train = params.train
    partition = train.max_job_minutes

    def once(minutes: float) -> dict:
        job = job_time(minutes, partition)
        return {**job.as_dict(), "jobs": 1, "fits": job.jobs == 1}

    cells = {}
    for scale in train.scales:
        on_gpu = train.resources[scale].gpus > 0 and params.evaluate.device != "cpu"
        for context, dtype in itertools.product(train.contexts, weight_dtypes.of(train)):
            cell = cell_name(scale, context, dtype)
            minutes = evaluate_minutes(params, cell, n_params[scale], context, on_gpu)
            cells[cell] = {**job_time(minutes, partition).as_dict(), "fits": True,
                           "requests": evaluate_requests(params) * evaluated_runs(params, cell)}
    return {"prepare": once(prepare_minutes(params)),
            "condition": {scale: once(condition_minutes(params, scale, n)) for scale, n in n_params.items()},
            "speedup": once(2.0),  # the schema gives speedup no runtime_min
            "evaluate": cells,
            "report": once(report_minutes(params, len(compared_runs(params))))}


def describe_runtimes(params: Params, runs: list[dict], segments: list[dict], stages: dict) -> list[str]:
    """What `ngptlab plan` says about time limits, jobs per run and checkpoints against the signal."""
    train = params.train
    partition = train.max_job_minutes
    lines = []
    jobs = runs + segments
    split = [j for j in jobs if j["jobs"] > 1]
    if partition is None:
        lines.append("time limits: train.max_job_minutes is not set, so every run is one job of its whole "
                     "estimate (set it to the partition's limit)")
    else:
        lines.append(f"time limits: no job asks for more than train.max_job_minutes = {partition:g} min; "
                     f"{len(split)} of {len(jobs)} training jobs take more than one (jobs column), up to "
                     f"{max((j['jobs'] for j in jobs), default=1)}; the train rule retries "
                     f"{retries(r['jobs'] for r in runs)} times, trunk "
                     f"{retries(s['jobs'] for s in segments)}, evaluate "
                     f"{retries(c['jobs'] for c in stages['evaluate'].values())}")
    condition = ", ".join(f"{s} {c['limit_min']}" for s, c in stages["condition"].items())
    evaluate = ", ".join(f"{c} {e['limit_min']} x {e['jobs']}" for c, e in stages["evaluate"].items())
    lines.append(f"stage limits (min): prepare {stages['prepare']['limit_min']}, condition {condition}, "
                 f"speedup {stages['speedup']['limit_min']}, evaluate {evaluate} (limit x jobs), report "
                 f"{stages['report']['limit_min']}; estimates in plan/runtime.py, `<stage>.runtime_min` "
                 "overrides")
    for stage, value in stages.items():
        for name, entry in (value.items() if stage in ("condition", "evaluate") else [(stage, value)]):
            if not entry["fits"]:
                lines.append(f"warning: {stage} {name} is estimated at {entry['estimate_min']:.0f} min, over "
                             f"train.max_job_minutes, and cannot continue in a second job: give it a "
                             f"partition with a longer limit ({stage}.runtime_min)")
    for scale in train.scales:
        of_scale = [r for r in jobs if r["scale"] == scale]
        if not of_scale:
            continue
        n_params = max(r["n_params"] for r in of_scale)
        longest = max(r["time_limit_min"] for r in of_scale)
        write_s, lead = 60 * checkpoint_minutes(train, n_params), signal_lead_s(train, n_params, longest)
        verdict = "fits" if 2 * write_s <= lead else "does NOT fit: raise train.signal_lead_s"
        signal = (f"Slurm signals {lead} s before the limit (torchrun waits as long): twice the write "
                  f"{verdict}" if lead else
                  f"no early signal: jobs under {SIGNAL_MIN_LIMIT_MIN} min stop by their own clock")
        gbps, size_gb = write_gbps(train), state_bytes(n_params) / 1e9
        lines.append(f"checkpoint {scale}: a resume checkpoint ({size_gb:.3g} GB) writes in ~{write_s:.0f} s "
                     f"at {gbps:g} GB/s; {signal}")
        if (warning := kill_wait_warning(train, scale, write_s)) is not None:
            lines.append(warning)
    return lines


def kill_wait_warning(train: Train, scale: str, write_s: float) -> str | None:
    """A warning where the checkpoint write of `scale` outlasts train.kill_wait_s (Slurm's KillWait, plus a
    preemptible partition's GraceTime): a cancelled or preempted job is killed mid-write and loses the work
    since its last checkpoint. None where it fits or no KillWait is stated."""
    if train.kill_wait_s is None or write_s <= train.kill_wait_s:
        return None
    return (f"warning: checkpoint {scale}: the write (~{write_s:.0f} s) outlasts train.kill_wait_s = "
            f"{train.kill_wait_s} s, the grace between SIGTERM and SIGKILL on a cancel or preemption: such a "
            f"job is killed mid-write and loses the work since its last checkpoint; ask for KillWait (plus "
            f"the partition's GraceTime) of at least {math.ceil(write_s)} s, or bound the loss with "
            "train.checkpoint_every_tokens (docs/cluster.md, 'Preemption')")
