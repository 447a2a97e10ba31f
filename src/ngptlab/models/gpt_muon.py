"""gpt-muon: the baseline GPT (models/gpt.py, unchanged) trained with Muon on its hidden matrices, the
Muon-trained GPT that stands as the baseline of 2026.

The hidden matrices, every attention and MLP matrix inside a block (q, k, v, o, mlp_u, mlp_v, mlp_o: 2-D
each), take torch's Muon (torch.optim.Muon, models/muon.py: orthogonalised Nesterov momentum, 0.95, five
Newton-Schulz iterations); the embeddings, the LM head and the RMSNorm gains take AdamW with the baseline's
settings (betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on the matrices, 0 on the gains). Muon's weight
decay is the baseline's 0.1.

Muon's step is scaled by adjust_lr_fn="match_rms_adamw" (Liu et al. 2025, "Muon is scalable for LLM
training", arXiv 2502.16982): torch multiplies the learning rate of an [m, n] matrix by 0.2 sqrt(max(m, n))
(torch/optim/_muon.py, `_adjust_lr`), so the orthogonalised update, of RMS ~1 / sqrt(max(m, n)), moves the
matrix by an RMS of ~0.2 lr, AdamW's typical update RMS. One learning rate then means about the same step
size for both groups, and this arm's learning rate is swept like every arm's (no separate Muon rate).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ngptlab.models.gpt import Recipe
from ngptlab.models.muon import MuonAdamW
from ngptlab.models.param_groups import moved_to


def hidden_matrices(model: nn.Module) -> list[nn.Parameter]:
    """Every matrix inside a block (model.matrices() with a layer index), in matrices()' order: Muon's."""
    return [model.get_submodule(info.name).weight for info in model.matrices() if info.layer is not None]


@dataclass
class MuonRecipe(Recipe):
    """gpt's recipe with the hidden matrices in one Muon group (weight decay the baseline's)."""

    def param_groups(self, model: nn.Module, lr: float) -> list[dict]:
        """gpt's AdamW groups without the hidden matrices, then the "muon" group of those."""
        return moved_to(super().param_groups(model, lr), [
            {"name": "muon", "params": hidden_matrices(model), "weight_decay": self.weight_decay, "lr": lr,
             "muon": True}])

    def optimizer(self, groups: list[dict], **adamw: Any) -> torch.optim.Optimizer:
        """Muon for the "muon" group, AdamW (its kwargs) for the others, in one optimizer."""
        if any(group.get("rotational") for group in groups):
            raise ValueError("gpt-muon steps its hidden matrices with Muon; it has no rotational matrices")
        return MuonAdamW(groups, **adamw)
