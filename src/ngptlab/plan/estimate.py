"""Size and cost of each run: parameter count and training FLOPs in closed form from the run's shape
(models/size.py), batch arithmetic and warmup from params, so sizing the paper's grid never builds a model
nor imports torch.
"""

from __future__ import annotations

from ngptlab.models.size import padded_vocab, parameter_count, train_flops_per_token
from ngptlab.params import (
    ARMS_WITHOUT_WARMUP,
    RunSpec,
    run_shape,
    scale_layout,
    steps_per_run,
    time_limit_min,
    tokens_per_step,
    warmup_steps,
)
from ngptlab.plan.memory import GPU_MEMORY_GB, micro_tokens, training_memory

VOCAB_SIZE = 50257  # GPT-2 BPE (r50k_base), what `prepare` writes


def estimate_runs(train: dict, runs: list[RunSpec], mfu: float, peak_tflops: float,
                  gpu_memory_gb: float = GPU_MEMORY_GB) -> list[dict]:
    rows = []
    for run in runs:
        shape = run_shape(train, run.scale)
        vocab_rows = padded_vocab(VOCAB_SIZE, train.get("vocab_multiple", 1))
        n_params = parameter_count(run.arm, shape, vocab_rows)
        flops = train_flops_per_token(run.arm, shape, VOCAB_SIZE, run.context) * run.budget
        steps = steps_per_run(train, run.context, run.budget)
        gpu_hours = flops / (peak_tflops * 1e12 * mfu) / 3600
        rows.append({"run": run.name, **run.as_dict(), "cell": run.cell,
                     "n_params": n_params,
                     "batch_sequences": train["batch_sequences"],
                     "tokens_per_step": tokens_per_step(train, run.context), "steps": steps,
                     "warmup_steps": warmup_steps(train, steps, run.arm not in ARMS_WITHOUT_WARMUP),
                     "train_flops": flops, **_placement(train, run, gpu_hours),
                     **_memory(train, run, shape, n_params, vocab_rows, gpu_memory_gb)})
    return rows


def _memory(train: dict, run: RunSpec, shape, n_params: int, vocab_rows: int, gpu_memory_gb: float) -> dict:
    """Estimated peak memory of one of the run's processes (plan/memory.py) against what it has: a GPU's
    memory (declared, default an H100's 80 GB) on a GPU scale, its share of the node's mem_mb on a CPU."""
    layout = scale_layout(train, run.scale)
    on_gpu = layout.gpus_per_node > 0
    bf16 = train.get("precision", "auto") == "bf16" or (on_gpu and train.get("precision", "auto") == "auto")
    tokens = micro_tokens(train, run.context, layout.world_size)
    memory = training_memory(run.arm, shape, n_params, vocab_rows, tokens, bf16,
                             bool(train.get("activation_checkpointing", False)))
    mem_mb = train["resources"][run.scale]["mem_mb"]
    limit = gpu_memory_gb if on_gpu else mem_mb / 1024 / layout.processes_per_node
    return {"memory_gb": memory.total / 2**30, "memory_limit_gb": limit,
            "memory_on": "gpu" if on_gpu else "cpu", "fits": memory.total / 2**30 <= limit}


def _placement(train: dict, run: RunSpec, gpu_hours: float) -> dict:
    """Where the run trains (train.resources: nodes x GPUs per node) and how long: the estimated wall time
    on all its GPUs (assuming the MFU holds across nodes; None for a CPU scale) and its Slurm time limit."""
    layout = scale_layout(train, run.scale)
    return {"nodes": layout.nodes, "gpus_per_node": layout.gpus_per_node, "gpus": layout.gpus,
            "processes": layout.world_size, "gpu_hours": gpu_hours,
            "wall_hours": gpu_hours / layout.gpus if layout.gpus else None,
            "time_limit_min": time_limit_min(train, run)}
