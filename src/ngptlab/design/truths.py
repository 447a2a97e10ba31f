"""The planted truths a design is checked on: each arm's token speed-up over gpt, for ngpt at each of
design.ngpt_speedups (default: 1.5x and 4x, the figures independent replications report at 1k and 4k
context, and the paper's own claim at each context of the grid, so a design shows it can measure the claim:
4x at 1k, 10x at 4k, 20x at 8k, paper/paper_numbers.yaml).

  account true   fixing the conditioning is what speeds nGPT up: gpt-orth = ngpt, gpt-rownorm = gpt
  account false  the mirror, the norms do it: gpt-rownorm = ngpt, gpt-orth = gpt
  null           no arm is faster: every arm = gpt, ngpt included
Arms outside the 2x2 run at gpt's speed in every truth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ngptlab.paper import paper_speedup
from ngptlab.settings import Params
from ngptlab.speedup.equivalence import CLAIMS
from ngptlab.speedup.estimate import Estimate
from ngptlab.speedup.factorial import ARMS, effect_of
from ngptlab.speedup.reading import CONSISTENT, INCONSISTENT, PREDICTED

ACCOUNTS = ("account true", "account false", "null")
REPLICATED = (1.5, 4.0)  # what independent replications report at 1k and 4k context


@dataclass(frozen=True)
class Truth:
    """One planted world's law: its account and ngpt's speed-up."""

    account: str
    ngpt: float

    @property
    def label(self) -> str:
        return self.account if self.account == "null" else f"{self.account}, ngpt x{self.ngpt:g}"

    def speedup(self, arm: str) -> float:
        """The arm's planted token speed-up over gpt."""
        fast = {"account true": ("gpt-orth", "ngpt"), "account false": ("gpt-rownorm", "ngpt"),
                "null": ()}[self.account]
        return self.ngpt if arm in fast else 1.0

    def log_speedups(self) -> dict[str, float]:
        return {arm: math.log(self.speedup(arm)) for arm in ARMS}

    def effect(self, name: str) -> float:
        """The planted factorial effect (ln scale), by the factorial's own weights."""
        return effect_of({arm: Estimate(y) for arm, y in self.log_speedups().items()}, name).value

    def claim(self, name: str, margin: float) -> str | None:
        """The claim the planted effect makes on the symmetric rule, None on the margin's edge."""
        value, band = self.effect(name), math.log(margin)
        if math.isclose(abs(value), band):
            return None
        return CLAIMS[0] if value > band else CLAIMS[1] if value < -band else CLAIMS[2]

    def reading(self, primary: str, margin: float) -> str | None:
        """The reading a design should give: consistent when the planted claim is the account's."""
        claim = self.claim(primary, margin)
        return None if claim is None else CONSISTENT if claim == PREDICTED[primary] else INCONSISTENT


def truths(ngpt_speedups: list[float]) -> list[Truth]:
    """Every planted truth: each account at each ngpt speed-up, and the null once."""
    return [Truth(account, s) for account in ACCOUNTS[:2] for s in ngpt_speedups] + [Truth("null", 1.0)]


def planted_speedups(params: Params) -> list[float]:
    """design.ngpt_speedups, or by default REPLICATED and the paper's claim at each context of the grid."""
    if params.design.ngpt_speedups is not None:
        return list(params.design.ngpt_speedups)
    claims = [float(entry["factor"]) for entry in map(paper_speedup, params.train.contexts) if entry]
    return sorted({*REPLICATED, *claims})
