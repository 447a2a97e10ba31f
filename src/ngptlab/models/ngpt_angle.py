"""ngpt-angle: nGPT whose matrices turn at gpt's angle per step.

Design role: the {architecture ngpt, angle gpt's} corner of the angle square (gpt / gpt-angle / ngpt-angle /
ngpt). Every nGPT matrix is turned along the sphere of its Frobenius norm by a set angle per optimizer step
(the rotational step, models/rotational.py; Kosson et al., arXiv 2305.17212), the angle a gpt matrix of the
same kind turns (train/angle_targets.py: measured by `ngptlab plan --match-angles`, or AdamW's equilibrium
angle as a prior), and then, as in ngpt, its rows go back to unit norm (Section 2.6), which moves the
realised angle slightly off the target (the per-step angle, observe/step_angle.py, records it). Everything
else is nGPT's: the architecture and its scales, no weight decay, no warmup.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ngptlab.models.arms import arm
from ngptlab.models.layers import MATRIX_KINDS
from ngptlab.models.ngpt import NGPT, NGPTRecipe


class NGPTAngle(NGPT):
    pass  # ngpt's model: the difference is in how its matrices are stepped


@dataclass
class AngleRecipe(NGPTRecipe):
    turns_like: ClassVar[str] = arm("ngpt-angle").train.turns_like  # gpt
    turned_kinds: ClassVar[tuple[str, ...]] = tuple(
        k for k in MATRIX_KINDS if k not in arm("ngpt-angle").train.not_turned)
