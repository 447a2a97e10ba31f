"""Size and cost of each job: parameter count and training FLOPs in closed form from the run's shape
(models/size.py), batch arithmetic and warmup from params, so sizing the paper's grid never builds a model
nor imports torch.

Every job is priced at the tokens it trains: a cosine run its budget, a WSD run its cooldown branch only
(from its branch point to its last step), and each trunk segment (ngptlab.grid.trunks) its span, so a trunk
that several budgets share is counted once.
"""

from __future__ import annotations

from ngptlab.batch import steps_per_run, tokens_per_step
from ngptlab.checkpoint_cost import state_bytes
from ngptlab.grid.enumeration import enumerate_runs
from ngptlab.grid.resources import run_shape, scale_layout
from ngptlab.grid.runs import RunSpec
from ngptlab.grid.trunks import Segment, enumerate_segments, job_tokens
from ngptlab.models.arms import warms_up
from ngptlab.models.scales import Scale
from ngptlab.models.size import padded_vocab, parameter_count, train_flops_per_token
from ngptlab.plan.checkpointing import checkpoints, run_memory
from ngptlab.plan.memory import GPU_MEMORY_GB
from ngptlab.plan.runtime import JobTime, stage_runtimes, train_job
from ngptlab.plan.sharing import sharing_summary
from ngptlab.schedule import branch_point, shares_trunk, trunk_warmup, warmup_steps
from ngptlab.settings import Params, Train
from ngptlab.vocabulary import VOCAB_SIZE

MFU = 0.4  # the model FLOPs utilisation assumed unless a command is told otherwise
PEAK_TFLOPS = 989.0  # H100/H200 dense bf16


def gpu_hours_text(hours: float) -> str:
    """GPU-hours to the precision an estimate at an assumed MFU carries, the same in every verb's printout:
    three significant digits, whole hours with separators from 1,000 up."""
    return f"{hours:,.0f}" if hours >= 1000 else f"{hours:.3g}"


def _gpu_hours(flops: float, mfu: float, peak_tflops: float) -> float:
    return flops / (peak_tflops * 1e12 * mfu) / 3600


def model_size(train: Train, scale: str, arm: str) -> tuple[Scale, int, int]:
    """The shape, padded vocabulary rows and parameter count of `arm` at `scale`."""
    shape = run_shape(train, scale)
    vocab_rows = padded_vocab(VOCAB_SIZE, train.vocab_multiple)
    return shape, vocab_rows, parameter_count(arm, shape, vocab_rows)


def estimate_runs(train: Train, runs: list[RunSpec], mfu: float, peak_tflops: float,
                  gpu_memory_gb: float = GPU_MEMORY_GB) -> list[dict]:
    """One row per run: its size, steps, warmup, the tokens it trains and their FLOPs and GPU-hours."""
    rows = []
    for run in runs:
        shape, vocab_rows, n_params = model_size(train, run.scale, run.arm)
        steps = steps_per_run(train, run.context, run.budget)
        arm_warms_up = warms_up(run.arm)
        trained = job_tokens(train, run)  # a WSD run: its branch; the steps before are its trunk's segments
        if shares_trunk(run):
            start = branch_point(train, run.context, run.budget)
            warmup = trunk_warmup(train, run.context, arm_warms_up)  # the trunk's, shared by every budget
        else:
            start, warmup = None, warmup_steps(train, steps, arm_warms_up)
        flops = train_flops_per_token(run.arm, shape, VOCAB_SIZE, run.context) * trained
        gpu_hours = _gpu_hours(flops, mfu, peak_tflops)
        job = train_job(train, run.scale, trained, n_params)
        rows.append({"run": run.name, **run.as_dict(), "cell": run.cell,
                     "n_params": n_params,
                     "batch_sequences": train.batch_sequences,
                     "tokens_per_step": tokens_per_step(train, run.context), "steps": steps,
                     "warmup_steps": warmup, "branch_point": start, "trained_tokens": trained,
                     "train_flops": flops,
                     **_placement(train, run.scale, gpu_hours, job),
                     **_memory(train, run, gpu_memory_gb)})
    return rows


def estimate_segments(train: Train, segments: list[Segment], mfu: float, peak_tflops: float) -> list[dict]:
    """One row per trunk segment: the steps from its start to its branch point, their FLOPs and GPU-hours,
    its Slurm time limit, and the size of the state it keeps at its end."""
    rows = []
    for segment in segments:
        trunk = segment.trunk
        shape, _, n_params = model_size(train, trunk.scale, trunk.arm)
        tokens = job_tokens(train, segment)
        flops = train_flops_per_token(trunk.arm, shape, VOCAB_SIZE, trunk.context) * tokens
        gpu_hours = _gpu_hours(flops, mfu, peak_tflops)
        job = train_job(train, trunk.scale, tokens, n_params)
        rows.append({"segment": segment.name, "trunk": trunk.name, **trunk.as_dict(), "cell": trunk.cell,
                     "start": segment.start, "step": segment.step, "n_params": n_params,
                     "tokens_per_step": tokens_per_step(train, trunk.context),
                     "warmup_steps": trunk_warmup(train, trunk.context, warms_up(trunk.arm)),
                     "trained_tokens": tokens, "train_flops": flops,
                     "state_gb": state_bytes(n_params, trunk.weight_dtype) / 1e9,
                     **_placement(train, trunk.scale, gpu_hours, job)})
    return rows


def largest_models(train: Train) -> dict[str, int]:
    """The parameter count of each scale's largest arm."""
    return {scale: max(model_size(train, scale, arm)[2] for arm in train.arms)
            for scale in train.scales}


def estimate_plan(params: Params, mfu: float, peak_tflops: float,
                  gpu_memory_gb: float = GPU_MEMORY_GB) -> dict:
    """The whole grid priced at what trains: its runs, its trunk segments, their totals and the sharing
    summary (plan/sharing.py). The totals count a shared trunk once."""
    train = params.train
    runs = estimate_runs(train, enumerate_runs(params), mfu, peak_tflops, gpu_memory_gb)
    trunks = estimate_segments(train, enumerate_segments(params), mfu, peak_tflops)
    jobs = runs + trunks
    return {"runs": runs, "trunks": trunks, "stages": stage_runtimes(params, largest_models(train)),
            "total_train_flops": sum(r["train_flops"] for r in jobs),
            "total_gpu_hours": sum(r["gpu_hours"] for r in jobs),
            **sharing_summary(train, runs, trunks)}


def _memory(train: Train, run: RunSpec, gpu_memory_gb: float) -> dict:
    """Estimated peak memory of one of the run's processes (plan/memory.py) as it will train, checkpointing
    or not (plan/checkpointing.py), against what it has: a GPU's memory (declared, default an H100's 80 GB)
    on a GPU scale, its share of the node's mem_mb on a CPU, less the estimate's margin. A run that does not
    fit gets its remedies: the largest micro-batch that fits as it is, and where it does not checkpoint, the
    peak with checkpointing, whether it fits so, and the largest micro-batch that fits with it (0: none)."""
    memory = run_memory(train, run.arm, run.scale, run.context, run.weight_dtype, gpu_memory_gb)
    # auto decides against the memory the trainer assumes (the default GPU's), which --gpu-memory-gb does not
    # reach: the plan prints what the run will do
    decided = memory if gpu_memory_gb == GPU_MEMORY_GB else run_memory(train, run.arm, run.scale, run.context,
                                                                       run.weight_dtype)
    checkpointing = checkpoints(train, decided)
    row = {"memory_gb": memory.peak(checkpointing).total / 2**30, "memory_limit_gb": memory.limit_gb,
           "memory_on": "gpu" if memory.on_gpu else "cpu", "checkpointing": checkpointing,
           "fits": memory.fits(checkpointing)}
    if row["fits"]:
        return row
    row["fitting_micro_tokens"] = memory.fitting_micro_tokens(checkpointing)
    if not checkpointing:
        row["checkpointed_gb"] = memory.peak(True).total / 2**30
        row["checkpointed_fits"] = memory.fits(True)
        row["checkpointed_micro_tokens"] = memory.fitting_micro_tokens(True)
    return row


def _placement(train: Train, scale: str, gpu_hours: float, job: JobTime) -> dict:
    """Where the job trains (train.resources: nodes x GPUs per node) and how long: the estimated wall time
    on all its GPUs (assuming the MFU holds across nodes; None for a CPU scale), the Slurm time limit of
    each of its jobs and how many jobs it takes (plan/runtime.py)."""
    layout = scale_layout(train, scale)
    return {"nodes": layout.nodes, "gpus_per_node": layout.gpus_per_node, "gpus": layout.gpus,
            "processes": layout.world_size, "gpu_hours": gpu_hours,
            "wall_hours": gpu_hours / layout.gpus if layout.gpus else None,
            "estimate_min": job.estimate_min, "time_limit_min": job.limit_min, "jobs": job.jobs}
