"""ngpt-freew: nGPT with its weights left free (no post-step normalisation of the matrices).

Design role: nGPT fixes two kinds of norm at once, the hidden states' (Norm after every block update,
eqs. 10-11, normalised q and k) and the weights' (every matrix's vectors back to unit norm after every
step, Section 2.6); the conditioning account mixes the two. This arm keeps the first and drops the second:
hidden-state normalisation and the block update free (norms of the weights free, conditioning free).

The one difference from ngpt: the recipe's post-step hook does nothing. The matrices start where nGPT's do
(N(0, 1/sqrt(d)), then unit vectors along the embedding dimension) and then move freely under AdamW;
everything else is nGPT's: the architecture and its scales, no weight decay, no warmup.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ngptlab.models.layers import normalize_matrices_
from ngptlab.models.ngpt import NGPT, NGPTRecipe


class NGPTFreeW(NGPT):
    @torch.no_grad()
    def reset_parameters(self) -> None:
        super().reset_parameters()
        normalize_matrices_(self)  # nGPT's starting point; its recipe would do this in post_step


@dataclass
class FreeWeightsRecipe(NGPTRecipe):
    def post_step(self, model: nn.Module) -> None:
        """Weights left free: no renormalisation after a step (the one difference from ngpt)."""
