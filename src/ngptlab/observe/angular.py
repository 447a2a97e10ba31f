"""The angular update rate: how fast each effective matrix turns between two evaluation points of a run.

A rival account of nGPT's speed-up: with normalised or norm-fixed weights an optimizer step of size ~lr turns
the matrix by an angle ~lr / ||W|| instead of growing it, so the effective learning rate is the rotation
per step (Kosson et al. 2023, "Rotational equilibrium", arXiv 2305.17212). Measured on the effective
matrices (observe/effective.py: the map the forward pass applies, multipliers, scalars and input gains
folded in), between the previous evaluation point W_prev and this one W_now, s optimizer steps apart:

    angular rate     theta / s,  theta = arccos(<W_prev, W_now>_F / (||W_prev||_F ||W_now||_F))   rad / step
    relative change  ||W_now - W_prev||_F / ||W_prev||_F / s                                       1 / step

theta is computed as 2 asin(||U_now - U_prev||_F / 2) with U = W / ||W||_F: the same angle, but exact to
float64 round-off where arccos of a cosine near 1 keeps only half the digits (one step turns a matrix by
~1e-3 rad). A rescaling W -> c W (c > 0) turns nothing: theta = 0, relative change |c - 1| / s.

A row of a run's metrics holds, per matrix kind (models' MATRIX_KINDS), the mean over layers of the
per-layer means over that kind's matrices (one per layer; the embeddings have one in all).

Memory: the previous point's effective matrices stay on the model's device in float32, one copy of the
matrix weights (4 bytes per parameter: 2.0 GB at 0.5B, 4.3 GB at 1B); plan/memory.py counts it in the
peak. The float64 matrices exist one at a time. The float32 copy rounds each entry by up to 6e-8 relative:
a floor of ~3e-8 rad (and relative change) per interval between two points, far below what training
turns (1e-3 to 1e-1 rad a step in the CPU grid's runs).

A job stopped between two points resumes the interval where it started: its checkpoint keeps the interval's
start (IntervalStart: its step and, unless that is the checkpoint's own step, the float32 matrices there;
train/state.py), so a resumed run's rows are those of the run that went through, byte for byte.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ngptlab.models.layers import MatrixInfo


def turn(before: Tensor, after: Tensor) -> Tensor:
    """(theta, ||after - before|| / ||before||) of one matrix, float64 on its device; no host sync."""
    a, b = before.to(torch.float64), after.to(torch.float64)
    norm_a, norm_b = torch.linalg.vector_norm(a), torch.linalg.vector_norm(b)
    chord = torch.linalg.vector_norm(b / norm_b - a / norm_a)
    theta = 2 * torch.asin((chord / 2).clamp(max=1.0))
    return torch.stack([theta, torch.linalg.vector_norm(b - a) / norm_a])


def kind_means(values: Iterable[tuple[str, int | None, float]]) -> dict[str, float | None]:
    """Per kind, the mean over layers of the per-layer means of (kind, layer, value); None where a value is
    not finite (a matrix of zeros, a diverged run's weights)."""
    layers: dict[str, dict[int | None, list[float]]] = {}
    for kind, layer, value in values:
        layers.setdefault(kind, {}).setdefault(layer, []).append(value)
    out: dict[str, float | None] = {}
    for kind, by_layer in layers.items():
        mean = sum(sum(v) / len(v) for v in by_layer.values()) / len(by_layer)
        out[kind] = mean if math.isfinite(mean) else None
    return out


@dataclass(frozen=True)
class AngleSums:
    """The angles per optimizer step summed over an interval's measured steps so far (observe/step_angle.py):
    one float64 sum per matrix, in model.matrices() order, and how many steps were measured."""

    sums: Tensor
    steps: int


@dataclass(frozen=True)
class IntervalStart:
    """Where the interval being measured starts: its step and the effective matrices there (float32), by
    name; none where it starts at the step of the state that keeps it (that state's weights give them).
    With them, the per-step angles summed since (observe/step_angle.py; None: none measured)."""

    step: int
    matrices: dict[str, Tensor] = field(default_factory=dict)
    step_angles: AngleSums | None = None


class AngularRate:
    """The effective matrices of the previous evaluation point (float32, on their device) and its step."""

    def __init__(self, matrices: Iterable[MatrixInfo], step: int):
        """Start from `matrices` (observe/effective.py's effective_matrices of the model) at `step`: the
        job's first state, where an interval starts (else: resumed)."""
        self.previous: dict[str, Tensor] = {}
        self._turns: list[tuple[str, int | None, Tensor]] = []
        self.restart(matrices, step)

    @classmethod
    def resumed(cls, start: IntervalStart, device: torch.device) -> AngularRate:
        """Measure on from an interval start a checkpoint kept (interval_start). Its matrices move to `device`
        one at a time, taken out of `start`, so that no second copy of them stays in host memory."""
        rate = cls((), start.step)
        while start.matrices:
            name, matrix = start.matrices.popitem()
            rate.previous[name] = matrix.to(device=device, dtype=torch.float32)
        return rate

    def interval_start(self, step: int, step_angles: AngleSums | None = None) -> IntervalStart:
        """What a checkpoint of the state at `step` keeps of the interval being measured: its start, with
        the matrices there unless it starts at `step` itself, and the per-step angles summed since."""
        return IntervalStart(self.step, {} if self.step == step else dict(self.previous), step_angles)

    def restart(self, matrices: Iterable[MatrixInfo], step: int) -> None:
        """Measure the next interval from `matrices` at `step`, replacing the previous copy one matrix at a
        time (never two copies at once)."""
        for info in matrices:
            self.previous[info.name] = info.weight.to(torch.float32)
        self.step = step

    def add(self, info: MatrixInfo) -> None:
        """One matrix of the new point: its turn since the previous one, and it replaces the previous."""
        self._turns.append((info.kind, info.layer, turn(self.previous[info.name], info.weight)))
        self.previous[info.name] = info.weight.to(torch.float32)

    def close(self, step: int) -> dict:
        """The rates per kind since the previous point, which `step` now is (one host sync for them all)."""
        steps = step - self.step
        measured = torch.stack([t for _, _, t in self._turns]).tolist() if self._turns else []
        rates = [(kind, layer, theta / steps, change / steps)
                 for (kind, layer, _), (theta, change) in zip(self._turns, measured, strict=True)]
        self._turns, self.step = [], step
        return {"angular_rate": kind_means((k, layer, r) for k, layer, r, _ in rates),
                "relative_change": kind_means((k, layer, c) for k, layer, _, c in rates),
                "angular_steps": steps}
