"""gpt-angle: gpt in gpt-scalar's form, W = s W~, whose directions W~ turn at ngpt's angle per step.

Design role: the {architecture gpt, angle ngpt's} corner of the angle square (gpt / gpt-angle / ngpt-angle /
ngpt). Each W~ keeps its Frobenius norm and is turned along its sphere by a set angle per optimizer step
(the rotational step, models/rotational.py; Kosson et al., arXiv 2305.17212), the angle an ngpt matrix of
the same kind turns (train/angle_targets.py: measured by `ngptlab plan --match-angles`, or a prior). The
scalar s (gpt-scalar's, on AdamW) leaves the effective norm free, and nothing constrains W~'s singular
values: conditioning and the norm stay free, only the angle is set. The LM head, which has no scalar,
stays on AdamW. With the angle at gpt's own it would be gpt-scalar with a rotational optimizer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ngptlab.models.arms import arm
from ngptlab.models.gpt_scalar import GPTScalar, ScalarRecipe
from ngptlab.models.layers import MATRIX_KINDS


class GPTAngle(GPTScalar):
    pass  # gpt-scalar's model: the difference is in how W~ is stepped


@dataclass
class AngleRecipe(ScalarRecipe):
    turns_like: ClassVar[str] = arm("gpt-angle").train.turns_like  # ngpt
    turned_kinds: ClassVar[tuple[str, ...]] = tuple(
        k for k in MATRIX_KINDS if k not in arm("gpt-angle").train.not_turned)
