"""The angle each weight matrix turns in one optimizer step, accumulated on the device.

The knob of the rotational accounts (Kosson et al. 2023, "Rotational equilibrium", arXiv 2305.17212): with
norm-fixed or equilibrated weights an optimizer step is a rotation, and the angle per step is the effective
learning rate. The angular rate between evaluation points (observe/angular.py) also reflects how much
successive steps cancel, an outcome; this is the step itself. For the matrix W the optimizer holds (the raw
parameter: the `weight` of each of model.matrices(), W~ where an arm multiplies it by scalars or
multipliers, the plain matrix otherwise; the embeddings without their pad rows), before one optimizer step
and after it and the arm's post-step constraint (recipe.post_step: nGPT's renormalisation, gpt-orth's
projection):

    theta = arccos(<W_before, W_after>_F / (||W_before||_F ||W_after||_F))                      rad

computed without the cosine, whose float32 value near 1 keeps none of a 1e-3 rad step: with b = W_after
and e = W_before - b (the difference of two nearly equal matrices, exact to the rounding of each entry),
W_before = (1 + <b, e> / ||b||^2) b + e_perp, e_perp = e - (<b, e> / ||b||^2) b, so

    theta = atan2(||e_perp||_F, ||b||_F + <b, e>_F / ||b||_F)

in float32 passes over the matrices: every rounding error scales with e, not with W, so a planted turn
of 1e-6 to 2.5 rad comes out to ~1e-6 relative or ~1e-9 rad, whichever is larger (a rescaling alone turns
nothing). The raw parameter rather
than the effective matrix: it is what the optimizer turns (the rotational step sets this angle:
models/rotational.py), and forming every effective matrix in float64 each step would cost a deep copy per
matrix.

Measured at every k-th step (train.step_angle_every: the steps whose 1-based number is a multiple of k; 0:
never). The angles are summed on the device, one float64 sum per matrix, with no host sync; a metrics row
of an evaluation point reads the sums (with the angular rate's sync) and holds, per matrix kind, the mean
over layers of the per-layer means of each matrix's mean angle over the interval's measured steps
(angular.kind_means), the interval being the angular rate's. A checkpoint between two evaluation points
keeps the sums and their count (angular.AngleSums, in its IntervalStart), so a resumed job's rows are
those of the job that ran through.

Cost per measured step: a copy of every matrix before the step (4 N bytes for N matrix parameters in
float32, freed after it: at the optimizer step, when the backward pass's activations are gone) and ~10
float32 passes over them after it, memory-bound and independent of the tokens a step carries. Measured on
a shared 2-core CPU at cpu-8l (15M matrix parameters, 13M of them embeddings): 27-40 ms, ~4% of a step
of 512 tokens (0.74 s at best), so ~1% at the default k = 4 (`ngptlab bench step --step-angle` times it
beside each arm).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import Tensor, nn

from ngptlab.observe.angular import AngleSums, kind_means

EMBEDDINGS = ("embed_in", "embed_out")  # [vocab rows, d]: their pad rows are never a token


def step_angle_(before: Tensor, after: Tensor) -> Tensor:
    """theta (rad, float32, 0-d, on the matrices' device) between two matrices; no host sync. Overwrites
    `before` where it is float32 (the snapshot it is called with: no further copy)."""
    b = after.float().flatten()
    e = before.float().flatten().sub_(b)  # W_before - W_after: exact where they are this close
    bb, be = torch.dot(b, b), torch.dot(b, e)
    perpendicular = torch.dot(e, e.addcmul_(b, -be / bb)).sqrt()  # e less its part along b
    return torch.atan2(perpendicular, bb.sqrt() + be / bb.sqrt())


class StepAngles:
    """Every matrix's angle per optimizer step, summed on the device over the interval being measured."""

    def __init__(self, model: nn.Module, every: int, start: AngleSums | None = None):
        """The matrices of `model` (model.matrices() once, for their names, kinds and layers), measured at
        every `every`-th step (0: never), from `start` (a checkpoint's: None, the interval starts empty)."""
        infos = model.matrices()
        self.every = every
        self.labels = [(info.kind, info.layer) for info in infos]
        self.params = [model.get_submodule(info.name).weight for info in infos]
        self.rows = [model.token_rows if info.kind in EMBEDDINGS else None for info in infos]
        device = self.params[0].device
        self.sums = torch.zeros(len(infos), dtype=torch.float64, device=device)
        self.steps = 0
        if start is not None:
            if start.sums.shape != self.sums.shape:
                raise ValueError(f"step angle sums of {tuple(start.sums.shape)} matrices, the model has "
                                 f"{len(infos)}")
            self.sums.copy_(start.sums)
            self.steps = start.steps

    def due(self, step: int) -> bool:
        """Is the optimizer step that takes the weights from `step` to `step` + 1 measured?"""
        return self.every > 0 and (step + 1) % self.every == 0

    def matrices(self) -> list[Tensor]:
        return [p.detach() if rows is None else rows(p.detach()) for p, rows in zip(self.params, self.rows,
                                                                                    strict=True)]

    @contextlib.contextmanager
    def measuring(self, step: int) -> Iterator[None]:
        """Around the optimizer step from `step` and the arm's post-step hook: its angles, where due."""
        if not self.due(step):
            yield
            return
        with torch.no_grad():
            before = [m.clone() for m in self.matrices()]
        yield
        with torch.no_grad():
            angles = [step_angle_(a, b) for a, b in zip(before, self.matrices(), strict=True)]
            del before
            self.sums += torch.stack(angles)
        self.steps += 1

    def kept(self) -> AngleSums:
        """What a checkpoint keeps so that the interval's mean is the same after a resume."""
        return AngleSums(self.sums.clone(), self.steps)

    def close(self) -> dict:
        """The row's fields: per kind the mean angle per measured step since the interval started (one host
        sync), and their count; none where no step was measured. The next interval starts empty."""
        if not self.steps:
            return {}
        means = (self.sums / self.steps).tolist()
        row = {"step_angle": kind_means((kind, layer, mean)
                                        for (kind, layer), mean in zip(self.labels, means, strict=True)),
               "step_angle_steps": self.steps}
        self.restart()
        return row

    def restart(self) -> None:
        self.sums.zero_()
        self.steps = 0

