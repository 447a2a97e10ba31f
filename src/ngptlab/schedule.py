"""The learning-rate schedule of a run, or of a trunk: the factor of the initial learning rate at each step.

train.schedule names it. cosine (the default, the paper's Fig. 2 method): each token budget is its own run,
linear warmup (if the arm's recipe warms up) then cosine to 0 exactly at the budget. nGPT trains without
warmup (paper Table 3: 0 steps); the GPT baseline warms up for a number of steps (Table 3: 2000), capped for
small budgets by the rule of warmup_steps below.

wsd (warmup-stable-decay; Hagele et al. 2024, arXiv 2405.18392; MiniCPM, arXiv 2404.06395): the same warmup,
then the factor 1 until the run's branch point P = round((1 - f) x S) of its S steps, f =
train.cooldown_fraction, then a cooldown to 0 at the budget. Up to P a WSD run is the same training as every
longer run of its (scale, context, arm, learning rate, seed): the trunk (ngptlab.grid.trunks), whose
schedule is the same without an end. Sharing needs one warmup for every budget of a trunk: the warmup_steps
rule applied to the grid's smallest budget, so that adding a larger budget changes no trunk. A budget whose
branch point falls inside that warmup, or that leaves no cooldown step, is refused (wsd_problem).

This module is the one that tells the schedules apart by name; the rest of the code asks it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ngptlab.batch import steps_per_run, tokens_per_step
from ngptlab.models.arms import warms_up
from ngptlab.settings import Train

COSINE, WSD = "cosine", "wsd"
TRUNK = "wsd-trunk"  # what a trunk's records name as their schedule

COOLDOWN_SHAPES = {
    "1-sqrt": lambda progress: 1.0 - math.sqrt(progress),  # Hagele et al.: better than linear
    "linear": lambda progress: 1.0 - progress,
}


# ----------------------------------------------------------------------------------------------------------
# The grid's schedule, and a run's


def of(train: Train) -> str:
    """train.schedule: the grid's learning-rate schedule, cosine (the paper's, the default) or wsd."""
    return train.schedule


def shares_trunks(schedule: str) -> bool:
    """Whether the runs of the schedule named `schedule` share trunks: wsd."""
    return schedule == WSD


def is_wsd(train: Train) -> bool:
    """Whether the grid's runs share trunks: train.schedule wsd."""
    return shares_trunks(of(train))


def shares_trunk(run) -> bool:
    """Whether a run (a RunSpec) is a WSD branch: trained from its trunk's state at its branch point."""
    return shares_trunks(run.schedule)


def name_suffix(schedule: str) -> str:
    """What a run's name adds for its schedule: nothing for cosine (names from before WSD stay valid)."""
    return "" if schedule == COSINE else f"-{schedule}"


def from_suffix(suffix: str | None) -> str:
    """The schedule of a run whose name ends in `suffix` ("-wsd", or nothing for cosine)."""
    return WSD if suffix == f"-{WSD}" else COSINE


def spec_record(schedule: str) -> dict:
    """What a run's record adds for its schedule: a cosine run's carries no schedule key, so records written
    before WSD existed stay valid."""
    return {} if schedule == COSINE else {"schedule": schedule}


def calibration_budgets(train: Train) -> list[int]:
    """The budgets of train.calibrate: cosine runs beside a WSD grid's runs (none without it)."""
    calibrate = train.calibrate
    return list(calibrate.budgets) if calibrate and is_wsd(train) else []


def cooldown_fraction(train: Train) -> float:
    return float(train.cooldown_fraction)


def cooldown_shape(train: Train) -> str:
    return train.cooldown_shape


# ----------------------------------------------------------------------------------------------------------
# Warmup and branch points


def warmup_steps(train: Train, steps: int, warms_up: bool) -> int:
    """Warmup of a run of `steps` steps, by the rule in the schema's docs: warmup_steps, at most
    floor(warmup_max_fraction x steps), and at least one cosine step left; 0 for an arm without warmup."""
    if not warms_up:
        return 0
    cap = math.floor(train.warmup_max_fraction * steps)
    return max(0, min(train.warmup_steps, cap, steps - 1))


def branch_point(train: Train, context: int, budget: int) -> int:
    """P = round((1 - f) x S), halves rounded up: the step at which a budget's cooldown starts."""
    return math.floor((1 - cooldown_fraction(train)) * steps_per_run(train, context, budget) + 0.5)


def trunk_warmup(train: Train, context: int, warms_up: bool) -> int:
    """The warmup of every WSD run at this context: the warmup_steps rule at the grid's smallest budget."""
    return warmup_steps(train, steps_per_run(train, context, min(train.budgets)), warms_up)


def run_tokens(train: Train, run) -> int:
    """The tokens a run's job trains itself: a cosine run its budget, a WSD run its branch (from its branch
    point)."""
    if not shares_trunk(run):
        return run.budget
    steps = steps_per_run(train, run.context, run.budget)
    return (steps - branch_point(train, run.context, run.budget)) * tokens_per_step(train, run.context)


def wsd_problem(train: Train) -> str | None:
    """The one line that refuses a WSD setting that cannot work, or None."""
    if not is_wsd(train):
        return None
    outside = sorted(set(calibration_budgets(train)) - set(train.budgets))
    if outside:
        return (f"train.calibrate.budgets: {outside[0]} is not in train.budgets; calibration compares WSD "
                f"and cosine at budgets the grid trains")
    any_warms_up = any(warms_up(arm) for arm in train.arms)
    for context in train.contexts:
        warmup = trunk_warmup(train, context, any_warms_up)
        for budget in sorted(train.budgets):
            steps = steps_per_run(train, context, budget)
            point = branch_point(train, context, budget)
            if point < max(warmup, 1):
                return (f"train.budgets: {budget} tokens ({steps} steps at context {context}) would start "
                        f"its cooldown at step {point}, inside the {warmup}-step warmup shared by its trunk; "
                        f"lower train.cooldown_fraction or train.warmup_steps, or drop the budget")
            if point >= steps:
                return (f"train.budgets: {budget} tokens ({steps} steps at context {context}) leave no "
                        f"cooldown step at train.cooldown_fraction {cooldown_fraction(train):g}")
    return None


# ----------------------------------------------------------------------------------------------------------
# The factor per update


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
        return {"schedule": WSD, "cooldown_fraction": self.fraction, "cooldown_shape": self.shape,
                "decay_start_step": self.decay_start}


@dataclass(frozen=True)
class WarmupStable:
    """A trunk: warmup, then the factor 1 for as long as it trains."""

    warmup_steps: int

    def factor(self, step: int) -> float:
        return warmup_factor(step, self.warmup_steps) if step < self.warmup_steps else 1.0

    def record(self) -> dict:
        return {"schedule": TRUNK}


def make_schedule(total_steps: int, warmup_steps: int) -> Schedule:
    """Cosine over `total_steps` updates, the first `warmup_steps` of them warming up (at least one cosine
    step must remain)."""
    if total_steps < 1:
        raise ValueError(f"a schedule needs at least one step, got {total_steps}")
    if not 0 <= warmup_steps < total_steps:
        raise ValueError(f"warmup of {warmup_steps} steps leaves no cosine step in {total_steps}")
    return Schedule(total_steps, warmup_steps)


def make_wsd(train: Train, context: int, budget: int, total_steps: int,
             warmup_steps: int) -> WarmupStableDecay:
    """The WSD schedule of a run of `budget` tokens (its branch point and shape from train)."""
    start = branch_point(train, context, budget)
    if not max(warmup_steps, 1) <= start < total_steps:  # params validation refuses these first
        raise ValueError(f"cooldown from step {start} does not fit {total_steps} steps after a warmup of "
                         f"{warmup_steps}")
    return WarmupStableDecay(total_steps, warmup_steps, start, cooldown_shape(train),
                             cooldown_fraction(train))


def for_run(train: Train, run) -> Schedule | WarmupStableDecay:
    """The schedule of a run (a RunSpec): cosine over its budget, or its WSD branch's, whose warmup is its
    trunk's."""
    steps = steps_per_run(train, run.context, run.budget)
    if shares_trunk(run):
        warmup = trunk_warmup(train, run.context, warms_up(run.arm))
        return make_wsd(train, run.context, run.budget, steps, warmup)
    return make_schedule(steps, warmup_steps(train, steps, warms_up(run.arm)))


def for_trunk(train: Train, trunk) -> WarmupStable:
    """The schedule of a trunk (a TrunkSpec), the same for every one of its segments."""
    return WarmupStable(trunk_warmup(train, trunk.context, warms_up(trunk.arm)))
