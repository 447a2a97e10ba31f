"""What a resume checkpoint costs: its bytes on disk and the minutes it takes to write.

Read by the plan (job splits, Slurm's early signal, disk) and by a training job's own clock before it has
timed a checkpoint of its own (train/job_limit.py), so both count with the same figures.
"""

from __future__ import annotations

from ngptlab.settings import setting

# fp32 weights (4) + AdamW's exp_avg and exp_avg_sq (4 + 4); the rest (RNG, metrics rows) is negligible
STATE_BYTES_PER_PARAMETER = 12


def state_bytes(n_params: int) -> int:
    """The bytes of one training state (a resume checkpoint, a kept trunk state) of n_params parameters."""
    return STATE_BYTES_PER_PARAMETER * n_params


def write_gbps(train: dict) -> float:
    """train.checkpoint_write_gbps (default: a cautious figure for one client of a cluster filesystem)."""
    return float(setting(train, "train.checkpoint_write_gbps"))


def checkpoint_minutes(train: dict, n_params: int) -> float:
    """Estimated minutes to write a resume checkpoint (weights and AdamW moments) of `n_params`."""
    return state_bytes(n_params) / (write_gbps(train) * 1e9) / 60
