"""The trunks of a WSD grid: where each budget's cooldown branch leaves the stable phase it shares.

With train.schedule: wsd, a run warms up, holds its learning rate, and cools down to 0 from its branch point
(ngptlab.schedule). Up to there it is the same training as every longer run of its (scale, context, arm,
learning rate, seed): the trunk. So the trunk is trained once, in segments from one branch point to the
next, and each budget trains only its branch, from the trunk's state at its branch point: budgets
B_1 < ... < B_k cost B_k + f x (B_1 + ... + B_(k-1)) tokens instead of B_1 + ... + B_k.

A segment is named by its trunk and its span, `<trunk>-from<P0>-to<P>`, so that adding a budget changes the
same jobs in Snakemake and DVC: a new largest budget adds one segment after the others; one in between
replaces the segment that spans it with two. A kept state is named by its step alone (`to<P>`): the trunk's
state at P is the same whichever branch point came before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ngptlab import layout
from ngptlab.batch import tokens_per_step
from ngptlab.grid.enumeration import enumerate_runs, train_runs
from ngptlab.grid.runs import RunSpec, cell_name, format_lr, lineage_group
from ngptlab.schedule import TRUNK, WSD, branch_point, run_tokens, shares_trunk
from ngptlab.settings import Params, Train
from ngptlab.weight_dtype import FP32, spec_record


@dataclass(frozen=True, order=True)
class TrunkSpec:
    """The stable phase that the WSD runs of one (scale, context, arm, lr, seed, weight dtype) share."""

    scale: str
    context: int
    arm: str
    lr: float
    seed: int
    weight_dtype: str = FP32

    @property
    def cell(self) -> str:
        return cell_name(self.scale, self.context, self.weight_dtype)

    @property
    def name(self) -> str:
        return f"{self.cell}-{self.arm}-lr{format_lr(self.lr)}-s{self.seed}-trunk"

    @property
    def lineage_group(self) -> str:
        """The trunks that share this one's lineage key: its arm's ("wsd-gpt"). No dtype: a segment's cell
        says which it trains in."""
        return lineage_group(WSD, FP32, self.arm)

    def as_dict(self) -> dict[str, Any]:
        return {"scale": self.scale, "context": self.context, "arm": self.arm, "lr": self.lr,
                "seed": self.seed, "schedule": TRUNK, **spec_record(self.weight_dtype)}


@dataclass(frozen=True, order=True)
class Segment:
    """One job of a trunk: from the branch point before (`start`; 0 for the first) to its own, `step`."""

    trunk: TrunkSpec
    step: int
    start: int

    @property
    def span(self) -> str:
        return f"from{self.start}-to{self.step}"

    @property
    def name(self) -> str:
        return f"{self.trunk.name}-{self.span}"

    @property
    def record(self) -> str:
        """The segment's record, its job's output."""
        return layout.trunk_record(self.trunk.cell, self.trunk.name, self.span)


def trunk_of(run: RunSpec) -> TrunkSpec:
    return TrunkSpec(run.scale, run.context, run.arm, run.lr, run.seed, run.weight_dtype)


def wsd_runs(params: Params) -> list[RunSpec]:
    return [run for run in enumerate_runs(params) if shares_trunk(run)]


def trunk_budgets(train: Train, trunk: TrunkSpec) -> list[int]:
    """The budgets that branch from this trunk: not every budget of the grid once a sweep is pruned
    (train.pruned_sweeps) or a seed is added at some budgets only (train.added_seeds)."""
    return sorted(run.budget for run in train_runs(train) if shares_trunk(run) and trunk_of(run) == trunk)


def enumerate_segments(params: Params) -> list[Segment]:
    """Every trunk segment of the grid, each trunk's in order of its steps."""
    points: dict[TrunkSpec, set[int]] = {}
    for run in wsd_runs(params):
        points.setdefault(trunk_of(run), set()).add(branch_point(params.train, run.context, run.budget))
    segments = []
    for trunk, steps in points.items():
        ordered = sorted(steps)
        segments += [Segment(trunk, step, start) for start, step in zip([0, *ordered], ordered, strict=False)]
    return segments


def by_end(segments: list[Segment]) -> dict[tuple[TrunkSpec, int], Segment]:
    """The segments by (trunk, the step they end at), for the two lookups below."""
    return {(segment.trunk, segment.step): segment for segment in segments}


def branch_segment(ends: dict[tuple[TrunkSpec, int], Segment], train: Train, run: RunSpec) -> Segment:
    """The segment a WSD run branches from: the one that ends at its branch point."""
    return ends[trunk_of(run), branch_point(train, run.context, run.budget)]


def segment_before(ends: dict[tuple[TrunkSpec, int], Segment], segment: Segment) -> Segment | None:
    """The segment that ends where `segment` starts (None for a trunk's first)."""
    return ends.get((segment.trunk, segment.start))


def job_tokens(train: Train, job: RunSpec | Segment) -> int:
    """The tokens a job trains itself: a cosine run its budget, a WSD run its branch (from its branch point),
    a trunk segment its span."""
    if isinstance(job, Segment):
        return (job.step - job.start) * tokens_per_step(train, job.trunk.context)
    return run_tokens(train, job)


def find_segment(params: Params, name: str) -> Segment | None:
    return next((s for s in enumerate_segments(params) if s.name == name), None)
