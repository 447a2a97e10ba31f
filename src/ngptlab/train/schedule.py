"""The learning-rate schedule of one run, or of one trunk: a factor of the initial learning rate per update.

cosine (train.schedule's default, the paper's Fig. 2 method): each token budget is its own run, linear
warmup (if the arm's recipe warms up) then cosine to 0 exactly at the budget. nGPT trains without warmup
(paper Table 3: 0 steps); the GPT baseline warms up for a number of steps (Table 3: 2000), capped for small
budgets by the rule in ngptlab.params.warmup_steps.

wsd (warmup-stable-decay; Hagele et al. 2024, arXiv 2405.18392): the same warmup, then the factor 1 until the
run's branch point, then a cooldown to 0 at the budget (ngptlab.trunks says where the branch point is and
which warmup the budgets share). Before its branch point a WSD run's factor does not depend on its budget:
that is the trunk, whose schedule is the same without an end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ngptlab.trunks import branch_point, cooldown_fraction, cooldown_shape

COOLDOWN_SHAPES = {
    "1-sqrt": lambda progress: 1.0 - math.sqrt(progress),  # Hagele et al.: better than linear
    "linear": lambda progress: 1.0 - progress,
}


def warmup_factor(step: int, warmup_steps: int) -> float:
    """(step + 1) / warmup_steps during warmup, so that the first update is not wasted at lr 0."""
    return (step + 1) / warmup_steps


@dataclass(frozen=True)
class Schedule:
    total_steps: int
    warmup_steps: int

    def factor(self, step: int) -> float:
        """Multiplier of the initial learning rate for the update made at `step` (0-based).

        Cosine: 0.5 * (1 + cos(pi * p)), p = (step - warmup) / (total - warmup), which is 1 at the end of
        warmup and would reach 0 at step == total_steps, i.e. at the token budget.
        """
        if step < self.warmup_steps:
            return warmup_factor(step, self.warmup_steps)
        progress = (step - self.warmup_steps) / (self.total_steps - self.warmup_steps)
        return 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))

    def record(self) -> dict:
        """What a run's records add for its schedule: nothing for the paper's cosine (records written before
        other schedules existed stay valid)."""
        return {}


@dataclass(frozen=True)
class WarmupStableDecay:
    total_steps: int
    warmup_steps: int
    decay_start: int  # the branch point: the first update of the cooldown
    shape: str
    fraction: float  # train.cooldown_fraction, which placed decay_start

    def factor(self, step: int) -> float:
        """Warmup, then 1, then shape(p), p = (step - decay_start) / (total - decay_start): 1 at the first
        cooldown update, and 0 would be reached at step == total_steps, as with cosine."""
        if step < self.warmup_steps:
            return warmup_factor(step, self.warmup_steps)
        if step < self.decay_start:
            return 1.0
        return COOLDOWN_SHAPES[self.shape]((step - self.decay_start) / (self.total_steps - self.decay_start))

    def record(self) -> dict:
        return {"schedule": "wsd", "cooldown_fraction": self.fraction, "cooldown_shape": self.shape,
                "decay_start_step": self.decay_start}


@dataclass(frozen=True)
class WarmupStable:
    """A trunk: warmup, then the factor 1 for as long as it trains."""

    warmup_steps: int

    def factor(self, step: int) -> float:
        return warmup_factor(step, self.warmup_steps) if step < self.warmup_steps else 1.0

    def record(self) -> dict:
        return {"schedule": "wsd-trunk"}


def make_schedule(total_steps: int, warmup_steps: int) -> Schedule:
    """Cosine over `total_steps` updates, the first `warmup_steps` of them warming up (at least one cosine
    step must remain)."""
    if total_steps < 1:
        raise ValueError(f"a schedule needs at least one step, got {total_steps}")
    if not 0 <= warmup_steps < total_steps:
        raise ValueError(f"warmup of {warmup_steps} steps leaves no cosine step in {total_steps}")
    return Schedule(total_steps, warmup_steps)


def make_wsd(train: dict, context: int, budget: int, total_steps: int,
             warmup_steps: int) -> WarmupStableDecay:
    """The WSD schedule of a run of `budget` tokens (its branch point and shape from train)."""
    start = branch_point(train, context, budget)
    if not max(warmup_steps, 1) <= start < total_steps:  # params validation refuses these first
        raise ValueError(f"cooldown from step {start} does not fit {total_steps} steps after a warmup of "
                         f"{warmup_steps}")
    return WarmupStableDecay(total_steps, warmup_steps, start, cooldown_shape(train),
                             cooldown_fraction(train))
