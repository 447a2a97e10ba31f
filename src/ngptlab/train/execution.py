"""The settings that change how a training job runs, never what it makes: how often it checkpoints, whether it
writes TensorBoard events, its job's clock and Slurm resources, how its MFU is counted.

A run trained under any values of them has the same bytes (its weights and their header, config.json,
summary.json, metrics.jsonl, a trunk segment's record), so none of them is written there; the job's timing
file (results/timing/, read by the report only) records the values it ran with. They are no part of a run's
identity or lineage key either (train/identity.py, plan/lineage.py). Knobs that change a run's numbers at
float round-off (micro_batch_tokens, device, compile, activation_checkpointing) are not these: the summary
records them.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ngptlab.settings import Train

EXECUTION_KEYS = ("checkpoint_every_tokens", "tensorboard", "max_job_minutes", "checkpoint_write_gbps",
                  "signal_lead_s", "max_restarts", "peak_tflops")


def execution_record(train: Train, scale: str) -> dict[str, Any]:
    """The execution settings of a job of `scale` (schema defaults where params leave them out), with the
    resources (Slurm's, per node) and runtime_min the train section gives that scale."""
    record = {key: getattr(train, key) for key in EXECUTION_KEYS}
    resources = train.resources.get(scale)
    return {**record, "resources": asdict(resources) if resources else None}
