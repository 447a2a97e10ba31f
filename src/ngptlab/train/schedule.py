"""The learning-rate schedule of one run: linear warmup (if the arm's recipe warms up), then cosine to 0.

Each token budget is its own run with its own full schedule, ending at 0 exactly at the budget (the
paper's Fig. 2 method), rather than a snapshot of a longer run. nGPT trains without warmup (paper Table 3:
0 steps); the GPT baseline warms up for a number of steps (Table 3: 2000), capped for small budgets by the
rule in ngptlab.params.warmup_steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Schedule:
    total_steps: int
    warmup_steps: int

    def factor(self, step: int) -> float:
        """Multiplier of the initial learning rate for the update made at `step` (0-based).

        Warmup: (step + 1) / warmup_steps, so the first update is not wasted at lr 0.
        Cosine: 0.5 * (1 + cos(pi * p)), p = (step - warmup) / (total - warmup), which is 1 at the end of
        warmup and would reach 0 at step == total_steps, i.e. at the token budget.
        """
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        progress = (step - self.warmup_steps) / (self.total_steps - self.warmup_steps)
        return 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))


def make_schedule(total_steps: int, warmup_steps: int) -> Schedule:
    """Schedule over `total_steps` updates, the first `warmup_steps` of them warming up (at least one cosine
    step must remain)."""
    if total_steps < 1:
        raise ValueError(f"a schedule needs at least one step, got {total_steps}")
    if not 0 <= warmup_steps < total_steps:
        raise ValueError(f"warmup of {warmup_steps} steps leaves no cosine step in {total_steps}")
    return Schedule(total_steps, warmup_steps)
