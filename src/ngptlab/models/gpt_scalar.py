"""gpt-scalar: the baseline GPT with one learnable scalar per matrix, W = s W~.

Design role: a pure norm knob. kappa(s W~) = kappa(W~), so this arm can change every matrix's scale freely
(weight decay on W~ no longer fixes it) while leaving its conditioning exactly where gpt would. Scalars
(init 1) on every attention and MLP matrix and on the input embedding, none on the LM head, like gpt-lrm;
they are optimised like gpt-lrm's multipliers (weight decay 2e-3, outside gradient clipping). With s = 1
the model is exactly gpt.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ngptlab.models.gpt import GPT
from ngptlab.models.gpt_lrm import MultiplierRecipe
from ngptlab.models.layers import Embedding, Linear


class ScalarMultiplier(nn.Module):
    """Mixin for a matrix module: one learnable scalar s, used as W = s W~ (forward scales the output)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.scalar = nn.Parameter(torch.ones(()))

    def reset_parameters(self, std: float) -> None:
        super().reset_parameters(std)
        nn.init.ones_(self.scalar)

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x) * self.scalar

    def effective_weight(self) -> Tensor:
        return self.scalar * self.weight

    def underlying_weight(self) -> Tensor:
        return self.weight

    def multipliers(self) -> list[nn.Parameter]:
        return [self.scalar]


class ScaledLinear(ScalarMultiplier, Linear):
    pass


class ScaledEmbedding(ScalarMultiplier, Embedding):
    pass


class GPTScalar(GPT):
    linear = ScaledLinear
    embedding = ScaledEmbedding  # the LM head stays a plain Linear


@dataclass
class ScalarRecipe(MultiplierRecipe):
    pass  # the scalars are multipliers: their own weight decay, outside gradient clipping
