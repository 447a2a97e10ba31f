"""gpt-rownorm: the baseline GPT whose matrices get nGPT's weight constraint, and nothing else of nGPT.

Design role: the {norm fixed, conditioning free} corner of the 2x2 (gpt / gpt-rownorm / gpt-orth / ngpt).
After every optimizer step (and at init) each matrix's vectors along the embedding dimension are scaled
to unit norm exactly as nGPT does (rows of the embeddings and input projections, columns of the output
projections). Hidden states, RMSNorm, residual updates and the optimizer stay the baseline's; the weight
decay on matrices is then a no-op (it shrinks a whole matrix uniformly, and the renormalisation undoes it).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from ngptlab.models.gpt import GPT, Recipe
from ngptlab.models.layers import normalize_matrices_

Model = GPT  # the architecture is the baseline's


@dataclass
class RowNormRecipe(Recipe):
    def post_step(self, model: nn.Module) -> None:
        normalize_matrices_(model)  # nGPT Section 2.6 weight normalisation, hidden states untouched
