"""gpt-lrm: the baseline GPT with learnable row and column multipliers on every matrix
(Velikanov et al., arXiv 2601.04890).

Design role: norms learned explicitly, conditioning free. Each matrix becomes W = diag(r) W~ diag(c): the
multipliers r, c (init 1) carry the row and column scales, so weight decay on W~ no longer fixes the scale
the forward pass sees. Every attention and MLP matrix and the input embedding get both multipliers; the LM
head gets none. W~ keeps the baseline's weight decay (0.1), the multipliers get 2e-3, and gradient
clipping is computed without the multipliers' gradients. With r = c = 1 the model is exactly gpt.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ngptlab.models.gpt import GPT, Recipe
from ngptlab.models.layers import Embedding, Linear, Matrix
from ngptlab.models.param_groups import moved_to

MULTIPLIER_DECAY = 2e-3  # weight decay on the multipliers (Velikanov et al.)


class RowColumnMultipliers(nn.Module):
    """Mixin for a matrix module: W = diag(r) W~ diag(c), one multiplier per row (r) and per column (c)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        rows, cols = self.weight.shape
        self.mult_row = nn.Parameter(torch.ones(rows))  # per output feature (per token for the embedding)
        self.mult_col = nn.Parameter(torch.ones(cols))  # per input feature

    def reset_parameters(self, std: float) -> None:
        super().reset_parameters(std)
        nn.init.ones_(self.mult_row)
        nn.init.ones_(self.mult_col)

    def effective_weight(self) -> Tensor:
        return self.mult_row[:, None] * self.weight * self.mult_col

    def underlying_weight(self) -> Tensor:
        return self.weight

    def multipliers(self) -> list[nn.Parameter]:
        return [self.mult_row, self.mult_col]


class LRMLinear(RowColumnMultipliers, Linear):
    def forward(self, x: Tensor) -> Tensor:
        # x (diag(r) W~ diag(c))^T without materialising the product
        return F.linear(x * self.mult_col, self.weight) * self.mult_row


class LRMEmbedding(RowColumnMultipliers, Embedding):
    def forward(self, idx: Tensor) -> Tensor:
        return F.embedding(idx, self.weight) * self.mult_row[idx].unsqueeze(-1) * self.mult_col


class GPTLRM(GPT):
    linear = LRMLinear
    embedding = LRMEmbedding  # the LM head stays a plain Linear


def multiplier_parameters(model: nn.Module) -> list[nn.Parameter]:
    return [p for m in model.modules() if isinstance(m, Matrix) for p in m.multipliers()]


@dataclass
class MultiplierRecipe(Recipe):
    """The baseline recipe, with the multipliers in their own group and left out of gradient clipping.

    Shared by every arm that adds scale parameters to its matrices (gpt-lrm, gpt-scalar, gpt-orth), so
    their norm knobs are optimised alike.
    """

    multiplier_decay: float = MULTIPLIER_DECAY

    def param_groups(self, model: nn.Module, lr: float) -> list[dict]:
        return moved_to(super().param_groups(model, lr), [
            {"name": "multipliers", "params": multiplier_parameters(model),
             "weight_decay": self.multiplier_decay, "lr": lr}])

    def clip_parameters(self, model: nn.Module) -> list[nn.Parameter]:
        ids = {id(p) for p in multiplier_parameters(model)}
        return [p for p in super().clip_parameters(model) if id(p) not in ids]
