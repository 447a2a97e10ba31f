"""A speed-up (or a token count) as the estimator gives it: a number, or a one-sided bound on it.

Its own module because both the per-seed estimator and the inference over seeds build on it.
"""

from __future__ import annotations

from dataclasses import dataclass

FLIP = {">": "<", "<": ">", None: None}  # a bound on tokens is the opposite bound on the speed-up


@dataclass(frozen=True)
class Estimate:
    """A number, or a bound on it: bound ">" means the true value exceeds `value`, "<" that it is below it."""

    value: float | None
    bound: str | None = None

    def display(self) -> str:
        if self.value is None:
            return "n/a"
        number = f"{self.value:.0f}" if 1e3 <= abs(self.value) < 1e7 else f"{self.value:.3g}"  # tokens: 8192
        return f"{self.bound or ''}{number}"

    def as_dict(self) -> dict:
        return {"value": self.value, "bound": self.bound, "display": self.display()}

    @classmethod
    def from_dict(cls, d: dict) -> Estimate:
        return cls(d["value"], d["bound"])
