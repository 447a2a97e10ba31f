"""`bench gpu`, part memory: the peak memory of every arm a preset trains at the cells where activations
are largest (0.5B at 4k and 8k, 1B at 8k: bench/gpu_sizes.py's MEMORY_CELLS), each step as the preset
trains it (its micro-batch, bf16 autocast, activation checkpointing where `auto` decides it), against
plan/memory.py's estimate of the same.

The steps are eager: a compiled step fuses elementwise work and keeps less, so an eager peak within the
estimate's headroom bounds the compiled one, and a compile per arm and cell would cost more than the part.
A step that runs out of memory is recorded as such (a failure), and the next arm starts on a freed device.
"""

from __future__ import annotations

import gc

import torch

from ngptlab.bench.gpu_sizes import MEMORY_PRESET, MemoryJob
from ngptlab.bench.gpu_steps import PeakMemory

MEASURED_STEPS = 2  # the first step allocates AdamW's moments; the second is a steady one


def _free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def memory_check(jobs: list[MemoryJob], device: torch.device) -> dict:
    """One row per job: peak allocated and reserved (GPU) or resident (CPU) MiB beside the estimate."""
    from ngptlab.bench.step import _Arm

    memory, rows = PeakMemory(device), []
    for job in jobs:
        _free(device)
        memory.start()
        row = {"arm": job.arm, "cell": job.cell, "context": job.context, "tokens": job.tokens,
               "mode": "eager", "bf16": job.bf16, "checkpointing": job.checkpointing,
               "memory_estimate_mb": job.estimate_bytes() / 2**20, "out_of_memory": False}
        try:
            runner = _Arm(job.arm, job.shape, job.vocab_rows, job.context, job.tokens // job.context, device,
                          False, bf16=job.bf16, build_on_device=True)  # memory, not values: built in place
            runner.model.activation_checkpointing = job.checkpointing
            for _ in range(MEASURED_STEPS):
                runner.step()
            row["loss"] = runner.last_loss.item()
            del runner
        except torch.OutOfMemoryError:
            row["out_of_memory"] = True
        row.update(peak_memory_mb=memory.peak_mb(), reserved_memory_mb=memory.reserved_mb())
        rows.append(row)
    _free(device)
    return {"preset": MEMORY_PRESET, "memory": memory.kind, "steps": MEASURED_STEPS, "rows": rows}
