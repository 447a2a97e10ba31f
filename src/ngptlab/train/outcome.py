"""How a job ended: what its outputs record (a run's: train/outputs.py; a trunk segment's: train/trunk.py).

The loop hands this value to the writers, not the trainer: the weights to save, the settings and provenance
to record, the job's progress record (train/progress.py), how it stopped, its final evaluation, and what it
measured (timings, the attention kernel, the peak for MFU, its compute threads) and the execution settings it
ran with (train/execution.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ngptlab.train.final_eval import FinalEval
from ngptlab.train.progress import Progress
from ngptlab.train.throughput import Peak


@dataclass(frozen=True)
class Outcome:
    model: torch.nn.Module  # the trained weights
    config: dict  # the checkpoint's config: arm, shape, spec, resolved train params (`train`), data, revision
    progress: Progress
    steps: int  # optimizer steps done, where the job ended
    batch_tokens: int
    wall_s: float  # training wall time, every job of the run
    diagnostics: dict | None  # why it diverged (train/stop.py); None: completed
    final: FinalEval | None  # a run's final evaluation, if it reached it (a segment: None)
    eval_offsets: np.ndarray  # the eval windows of the curve
    final_offsets: np.ndarray  # the final evaluation's windows
    flops_per_token: float
    peak: Peak  # the device's peak, for MFU (train/throughput.py)
    attention_backend: dict  # train/attention.py
    timing_method: str  # train/timing.py
    threads: int  # the CPU threads each process computed with (train/threads.py)
    execution: dict  # how it ran: checkpoints, events, clock, resources (train/execution.py), for its timing

    @property
    def params(self) -> dict:
        """The train settings the job used, with everything derived from them."""
        return self.config["train"]

    @property
    def tokens(self) -> int:
        return self.steps * self.batch_tokens
