"""The baseline GPT of the nGPT paper (Section 2.2.1, eqs. 4-5, Table 3) and its optimizer recipe.

Design role: the {norm free, conditioning free} corner of the 2x2 (gpt / gpt-rownorm / gpt-orth / ngpt) and
the baseline whose final validation loss defines every speed-up.

Pre-norm blocks with RMSNorm (fp32, eps 1e-6, learnable gain) before attention and MLP and once more before
the LM head; rotary position embeddings; SwiGLU MLP (hidden 4d); no biases; untied input and output
embeddings. Init N(0, 0.02), output projections N(0, 0.02 / sqrt(2 L)). AdamW (0.9, 0.95), eps 1e-8,
weight decay 0.1 on every matrix including the embeddings, none on vectors; warmup, then cosine to 0
(the schedule lives in the training code); gradient clipping at 1.0 (params.yaml train.grad_clip).

Every other arm is this file plus a difference: a `Matrix` subclass (how each matrix is parametrised),
another block (nGPT) or another `Recipe` (weight decay, the post-step hook, rotational matrices).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from ngptlab.models import rotational
from ngptlab.models.layers import (
    Attention,
    Embedding,
    Linear,
    Matrix,
    MatrixInfo,
    RMSNorm,
    Rotary,
    SwiGLU,
)
from ngptlab.models.scales import Scale
from ngptlab.models.size import padded_vocab

INIT_STD = 0.02  # paper Appendix A.5 (GPT): initialisation std of every matrix

# (module path inside a block, MatrixInfo.kind), in the order matrices() lists them
BLOCK_MATRICES = (
    ("attn.q", "q"),
    ("attn.k", "k"),
    ("attn.v", "v"),
    ("attn.o", "o"),
    ("mlp.u", "mlp_u"),
    ("mlp.v", "mlp_v"),
    ("mlp.o", "mlp_o"),
)
OUTPUT_PROJECTIONS = ("attn.o", "mlp.o")  # at 0.02 / sqrt(2 L) (Appendix A.5, after GPT-2)


class Block(nn.Module):
    def __init__(self, scale: Scale, linear: type[Linear]) -> None:
        super().__init__()
        self.norm_attn = RMSNorm(scale.d_model)
        self.attn = Attention(scale.d_model, scale.n_head, linear)
        self.norm_mlp = RMSNorm(scale.d_model)
        self.mlp = SwiGLU(scale.d_model, scale.d_mlp, linear)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        x = x + self.attn(self.norm_attn(x), cos, sin)  # eq. 4
        x = x + self.mlp(self.norm_mlp(x))  # eq. 5
        return x


class GPT(nn.Module):
    # How every matrix is parametrised; the multiplier arms swap these classes and nothing else.
    linear: type[Linear] = Linear
    embedding: type[Embedding] = Embedding
    lm_head: type[Linear] = Linear

    def __init__(self, scale: Scale, vocab_size: int, context: int, vocab_multiple: int = 1) -> None:
        super().__init__()
        self.scale, self.vocab_size, self.context = scale, vocab_size, context
        # Embedding and LM-head rows: the vocabulary padded to a multiple (nanoGPT's 50257 -> 50304), so the
        # head's matmul has GPU-friendly sizes. Pad rows are never a token: the logits are cut back to
        # vocab_size, so they get no gradient and no probability, and the analysis leaves them out.
        self.vocab_multiple = vocab_multiple
        self.vocab_rows = padded_vocab(vocab_size, vocab_multiple)
        self.embed_in = self.embedding(self.vocab_rows, scale.d_model)
        self.activation_checkpointing = False  # train.activation_checkpointing: memory for recomputation
        self.layers = nn.ModuleList(self.make_block(i) for i in range(scale.n_layer))
        self.make_head()
        self.rotary = Rotary(scale.head_dim, context)
        self.reset_parameters()

    def make_block(self, index: int) -> nn.Module:
        return Block(self.scale, self.linear)

    def make_head(self) -> None:
        self.norm_out = RMSNorm(self.scale.d_model)
        self.embed_out = self.lm_head(self.scale.d_model, self.vocab_rows, norm_dim=1)  # [vocab, d]

    def head(self, x: Tensor) -> Tensor:
        """Logits [..., vocab_size] of the hidden states x: the LM head's rows without the padding."""
        return self.head_rows(x)[..., :self.vocab_size]

    def head_rows(self, x: Tensor) -> Tensor:
        """Logits over every row of the LM head, padding included."""
        return self.embed_out(self.norm_out(x))

    def token_rows(self, weight: Tensor) -> Tensor:
        """An embedding-shaped [vocab_rows, ...] tensor without its pad rows (what the analysis reads)."""
        return weight[:self.vocab_size]

    @torch.no_grad()
    def reset_parameters(self) -> None:
        output_std = INIT_STD / math.sqrt(2 * self.scale.n_layer)
        for name, module in self.named_modules():
            if isinstance(module, Matrix):
                module.reset_parameters(output_std if name.endswith(OUTPUT_PROJECTIONS) else INIT_STD)
            elif isinstance(module, RMSNorm):
                module.reset_parameters()

    def hidden_states(self, idx: Tensor) -> Tensor:
        """The last block's output [B, T, d]; `head` turns any subset of its positions into logits."""
        T = idx.shape[1]
        if T > self.context:
            raise ValueError(f"sequence of {T} tokens exceeds the model's context {self.context}")
        cos, sin = self.rotary(T)
        x = self.embed_in(idx)
        for layer in self.layers:
            if self.activation_checkpointing and torch.is_grad_enabled():
                # keep only the block's input; its activations are recomputed in the backward pass
                x = checkpoint(layer, x, cos, sin, use_reentrant=False)
            else:
                x = layer(x, cos, sin)
        return x

    def forward(self, idx: Tensor, targets: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """Logits [B, T, vocab] and the mean cross-entropy against targets (None without targets)."""
        logits = self.head(self.hidden_states(idx))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())

    def matrices(self) -> list[MatrixInfo]:
        """Every weight matrix as the forward pass uses it: embed_in, each block's 7, embed_out."""
        infos = [self._info("embed_in", "embed_in", None)]
        for i in range(len(self.layers)):
            infos += [self._info(f"layers.{i}.{path}", kind, i) for path, kind in BLOCK_MATRICES]
        infos.append(self._info("embed_out", "embed_out", None))
        return infos

    def _info(self, name: str, kind: str, layer: int | None) -> MatrixInfo:
        module = self.get_submodule(name)
        underlying = module.underlying_weight()
        return MatrixInfo(
            name=name,
            kind=kind,
            layer=layer,
            weight=module.effective_weight().detach(),
            underlying=None if underlying is None else underlying.detach(),
            norm_dim=module.norm_dim,
            n_heads=self.scale.n_head if kind in ("q", "k", "v") else None,
        )


@dataclass
class Recipe:
    """How an arm is optimised: AdamW groups, warmup or not, and a hook after every optimizer step."""

    weight_decay: float = 0.1  # paper Table 3 (GPT); on every matrix, embeddings too (the paper is silent)
    warmup: bool = True  # warm up, then decay; the registry sets it from the arm's row (arms.yaml)
    # Not given by the paper (Table 3 names AdamW only): nanoGPT's betas, PyTorch's eps.
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    # The matrices turned by a set angle per step instead of AdamW's step (models/rotational.py): matrix
    # kind (MATRIX_KINDS) -> peak angle per step in radians, scaled by the schedule. Empty: plain AdamW.
    rotation: dict[str, float] = field(default_factory=dict)
    rotation_beta: float = 0.9  # running mean of the tangent update's squared size (0: every step exact)

    def param_groups(self, model: nn.Module, lr: float) -> list[dict]:
        """AdamW groups: weight decay on matrices (ndim >= 2), none on vectors (norm gains, scales)."""
        params = [p for p in model.parameters() if p.requires_grad]
        groups = [
            {"name": "matrices", "params": [p for p in params if p.ndim >= 2],
             "weight_decay": self.weight_decay},
            {"name": "vectors", "params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
        ]
        return [dict(group, lr=lr) for group in groups if group["params"]]

    def optimizer(self, groups: list[dict], **adamw: Any) -> torch.optim.Optimizer:
        """The optimizer over `groups` (param_groups, its rotational matrices moved out by
        rotational.param_groups): AdamW, turning the rotational ones; `adamw`: AdamW's keyword arguments."""
        return rotational.adamw(groups, **adamw)

    def rotation_angles(self, lr: float) -> dict[str, float]:
        """The peak angle per step of each rotational kind in a run at learning rate `lr`: `rotation`,
        unless an arm ties its angles to the learning rate."""
        return dict(self.rotation)

    def post_step(self, model: nn.Module) -> None:
        """Called after every optimizer step and once at build time. The baseline does nothing."""

    def clip_parameters(self, model: nn.Module) -> list[nn.Parameter]:
        """The parameters whose gradient norm is clipped (all of them for the baseline)."""
        return [p for p in model.parameters() if p.requires_grad]
