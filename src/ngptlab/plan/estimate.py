"""Size and cost of each run: parameter count and training FLOPs in closed form from the run's shape
(models/size.py), so sizing the paper's grid never builds a model nor imports torch.
"""

from __future__ import annotations

from ngptlab.models.size import parameter_count, train_flops_per_token
from ngptlab.params import RunSpec, run_shape

VOCAB_SIZE = 50257  # GPT-2 BPE (r50k_base), what `prepare` writes


def estimate_runs(train: dict, runs: list[RunSpec], mfu: float, peak_tflops: float) -> list[dict]:
    rows = []
    for run in runs:
        shape = run_shape(train, run.scale)
        flops = train_flops_per_token(run.arm, shape, VOCAB_SIZE, run.context) * run.budget
        rows.append({"run": run.name, **run.as_dict(), "cell": run.cell,
                     "n_params": parameter_count(run.arm, shape, VOCAB_SIZE),
                     "train_flops": flops, "gpu_hours": flops / (peak_tflops * 1e12 * mfu) / 3600})
    return rows
