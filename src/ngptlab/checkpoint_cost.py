"""What a resume checkpoint costs: its bytes on disk and the minutes it takes to write.

Read by the plan (job splits, Slurm's early signal, disk) and by a training job's own clock before it has
timed a checkpoint of its own (train/job_limit.py), so both count with the same figures.
"""

from __future__ import annotations

from ngptlab import weight_dtype as weight_dtypes
from ngptlab.settings import Train

# fp32 weights (4) + AdamW's exp_avg and exp_avg_sq (4 + 4); the rest (RNG, metrics rows) is negligible
STATE_BYTES_PER_PARAMETER = 12


def state_bytes(n_params: int, weight_dtype: str = weight_dtypes.FP32) -> int:
    """The bytes of one training state (a resume checkpoint, a kept trunk state) of n_params parameters:
    weights and two moments, at 2 bytes each where train.weight_dtype stores them in bf16."""
    return STATE_BYTES_PER_PARAMETER * n_params * weight_dtypes.BYTES[weight_dtype] // 4


def write_gbps(train: Train) -> float:
    """train.checkpoint_write_gbps (default: a cautious figure for one client of a cluster filesystem)."""
    return float(train.checkpoint_write_gbps)


def checkpoint_minutes(train: Train, n_params: int) -> float:
    """Estimated minutes to write a resume checkpoint (weights and AdamW moments) of `n_params`."""
    return state_bytes(n_params) / (write_gbps(train) * 1e9) / 60
