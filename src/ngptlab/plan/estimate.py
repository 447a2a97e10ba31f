"""Size and cost of each run: parameter count and training FLOPs from the model registry."""

from __future__ import annotations

from functools import cache

import torch

from ngptlab.models import build, count_parameters, train_flops_per_token
from ngptlab.params import RunSpec

VOCAB_SIZE = 50257  # GPT-2 BPE (r50k_base), what `prepare` writes


@cache
def parameter_count(arm: str, scale: str, context: int) -> int:
    with torch.device("meta"):  # counts a 1B model without allocating it
        model, _ = build(arm, scale, VOCAB_SIZE, context)
    return count_parameters(model)


def estimate_runs(runs: list[RunSpec], mfu: float, peak_tflops: float) -> list[dict]:
    rows = []
    for run in runs:
        flops = train_flops_per_token(run.arm, run.scale, VOCAB_SIZE, run.context) * run.budget
        rows.append({"run": run.name, **run.as_dict(), "cell": run.cell,
                     "n_params": parameter_count(run.arm, run.scale, run.context),
                     "train_flops": flops, "gpu_hours": flops / (peak_tflops * 1e12 * mfu) / 3600})
    return rows
