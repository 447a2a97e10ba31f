"""A run of the grid and its name: `<cell>-<arm>-t<budget>-lr<lr>-s<seed>[-wsd]`, under the cell of the
speed-up table it belongs to, `<scale>-ctx<context>[-bf16]` (a bf16 run's cell is its own:
ngptlab.weight_dtype)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from ngptlab import schedule as schedules
from ngptlab import weight_dtype as weight_dtypes
from ngptlab.errors import ParamsError
from ngptlab.settings import allowed_arms


def format_lr(lr: float) -> str:
    return f"{lr:g}"


def cell_name(scale: str, context: int, weight_dtype: str = weight_dtypes.FP32) -> str:
    return f"{scale}-ctx{context}{weight_dtypes.name_suffix(weight_dtype)}"


def lineage_group(schedule: str, dtype: str, arm: str) -> str:
    """The jobs that share one lineage key (ngptlab.plan.lineage): those of one arm, schedule and dtype
    ("cosine-gpt", "wsd-bf16-ngpt"), since each arm's code (its module, its row of the table of arms) and its
    part of a per-arm setting (train.angles) are its own: an edit of one arm reruns its jobs only."""
    return f"{weight_dtypes.lineage_group(schedule, dtype)}-{arm}"


@dataclass(frozen=True, order=True)
class RunSpec:
    """One training run: the unit of the train and condition stages."""

    scale: str
    context: int
    arm: str
    budget: int
    lr: float
    seed: int
    schedule: str = schedules.COSINE  # train.schedule (ngptlab.schedule)
    weight_dtype: str = weight_dtypes.FP32  # train.weight_dtype (ngptlab.weight_dtype)

    @property
    def cell(self) -> str:
        """The (scale, context, weight dtype) cell of the speed-up table this run belongs to."""
        return cell_name(self.scale, self.context, self.weight_dtype)

    @property
    def lineage_group(self) -> str:
        """The runs whose train and condition jobs share this run's lineage key: its arm's of its schedule
        and dtype."""
        return lineage_group(self.schedule, self.weight_dtype, self.arm)

    @property
    def name(self) -> str:
        return (f"{self.cell}-{self.arm}-t{self.budget}-lr{format_lr(self.lr)}-s{self.seed}"
                f"{schedules.name_suffix(self.schedule)}")

    def as_dict(self) -> dict[str, Any]:
        return {"scale": self.scale, "context": self.context, "arm": self.arm, "budget": self.budget,
                "lr": self.lr, "seed": self.seed, **schedules.spec_record(self.schedule),
                **weight_dtypes.spec_record(self.weight_dtype)}


@cache
def _run_name_pattern() -> re.Pattern:
    alternatives = lambda names: "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))  # noqa: E731
    return re.compile(
        rf"^(?P<scale>[A-Za-z0-9][A-Za-z0-9._-]*?)-ctx(?P<context>\d+)(?P<dtype>-bf16)?-(?P<arm>{alternatives(allowed_arms())})"
        r"-t(?P<budget>\d+)-lr(?P<lr>[0-9.e+-]+?)-s(?P<seed>\d+)(?P<suffix>-wsd)?$"
    )


def parse_run_name(name: str) -> RunSpec:
    match = _run_name_pattern().match(name)
    if not match:
        raise ParamsError(
            f"run name {name!r} is not of the form <scale>-ctx<context>[-bf16]-<arm>-t<budget>-lr<lr>-s<seed>"
            f"[-wsd] with arm in {allowed_arms()}"
        )
    g = match.groupdict()
    return RunSpec(g["scale"], int(g["context"]), g["arm"], int(g["budget"]), float(g["lr"]), int(g["seed"]),
                   schedules.from_suffix(g["suffix"]), weight_dtypes.from_suffix(g["dtype"]))
