"""nGPT as it was computed before the speed work, so that `ngptlab bench step --before` times the old and
the new code side by side in one run (the arm `ngpt@before`).

The same model and the same math (tests/test_bench_step.py checks the two agree); only where the work is
done differs. Before: s_u, s_v sqrt(d) and s_z multiplied the activations and logits (tokens x width) after
the matmul, and the post-step normalisation built a normalised copy of each matrix and copied it back.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ngptlab.models.layers import Matrix
from ngptlab.models.ngpt import NGPT, NGPTRecipe, NormalizedMLP

SUFFIX = "@before"


class BeforeMLP(NormalizedMLP):
    def forward(self, x: Tensor) -> Tensor:
        u = self.u(x) * self.s_u()
        v = self.v(x) * (self.s_v() * self.v_gain)
        return self.o(u * F.silu(v))


class BeforeNGPT(NGPT):
    def head_rows(self, h: Tensor) -> Tensor:
        return self.embed_out(h) * self.s_z()


@torch.no_grad()
def normalize_matrices_before_(model: nn.Module) -> None:
    for module in model.modules():
        if isinstance(module, Matrix):
            w = module.weight
            w.copy_(F.normalize(w.float(), dim=module.norm_dim).to(w.dtype))


@dataclass
class BeforeRecipe(NGPTRecipe):
    def post_step(self, model: nn.Module) -> None:
        normalize_matrices_before_(model)


def as_before(model: NGPT, recipe: NGPTRecipe) -> tuple[NGPT, NGPTRecipe]:
    """The same model object (weights untouched), computing as before the speed work."""
    if type(model) is not NGPT:
        raise ValueError(f"only ngpt has a before-implementation, not {type(model).__name__}")
    model.__class__ = BeforeNGPT
    for module in model.modules():
        if type(module) is NormalizedMLP:
            module.__class__ = BeforeMLP
    return model, BeforeRecipe(**vars(recipe))
