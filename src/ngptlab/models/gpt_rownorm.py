"""gpt-rownorm: the baseline GPT whose matrices get nGPT's weight constraint, and nothing else of nGPT.

Design role: the {norm fixed, conditioning free} corner of the 2x2 (gpt / gpt-rownorm / gpt-orth / ngpt).
After every optimizer step (and at init) each matrix's vectors along the embedding dimension are scaled
to unit norm exactly as nGPT does (rows of the embeddings and input projections, columns of the output
projections). Hidden states, RMSNorm, residual updates and the optimizer stay the baseline's; the weight
decay on matrices is then a no-op (it shrinks a whole matrix uniformly, and the renormalisation undoes it).

The RMSNorm gains are frozen at 1: a learnable gain g in front of a unit-row W makes the map the forward
pass applies to the normalised input W diag(g), whose rows are not unit, so "norm fixed" would hold for
the raw parameter only. With g = 1 every matrix the forward pass applies has unit vectors, after every
step. (Freezing rather than folding g into W keeps the arm's parameters and optimizer those of gpt.)
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from ngptlab.models.gpt import GPT, Recipe
from ngptlab.models.layers import RMSNorm, normalize_matrices_


class GPTRowNorm(GPT):
    """The baseline's architecture with every RMSNorm gain frozen at 1 (see the module docstring)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for module in self.modules():
            if isinstance(module, RMSNorm):
                module.freeze()


@dataclass
class RowNormRecipe(Recipe):
    def post_step(self, model: nn.Module) -> None:
        normalize_matrices_(model)  # nGPT Section 2.6 weight normalisation, hidden states untouched
