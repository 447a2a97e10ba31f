"""nGPT, the normalized Transformer (Loshchilov et al. 2024, arXiv 2410.01131, Section 2, every part).

Design role: norms FIXED (every matrix vector and every hidden state on the unit hypersphere), conditioning
free but reported to stay good; the arm whose speed-up the project tries to explain.

Differences from gpt.py:
- no normalisation layers; Norm(x) = x / ||x||; embedding rows and every matrix's vectors along the
  embedding dimension are unit norm, restored after every optimizer step (Section 2.6);
- block update h <- Norm(h + |alpha_A| (Norm(ATTN(h)) - h)), the same with alpha_M for the MLP (eqs. 10-11);
- attention: q, k normalised per head after RoPE and scaled by s_qk, softmax scale sqrt(d_k) (Section 2.3.2);
- MLP: u scaled by s_u, v by s_v sqrt(d_model) (Section 2.4.2);
- logits z = E_out h scaled by s_z (Section 2.1);
- learnable scales stored with the init/scale "restore" trick (Section 2.5, `LearnedScale`);
- init N(0, 1/sqrt(d)) then normalised (Appendix A.5); AdamW without weight decay and warmup (Section 2.6,
  Table 3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ngptlab.models.gpt import GPT, Recipe
from ngptlab.models.layers import Attention, Linear, Matrix, SwiGLU, normalize_matrices_, unit
from ngptlab.models.scales import Scale

ALPHA_INIT = 0.05  # Section 2.6: alpha_A,init = alpha_M,init = 0.05 (of order 1 / n_layers)


class LearnedScale(nn.Module):
    """A learnable vector stored at `scale` and used as stored * (init / scale) (Section 2.5).

    Its effective value starts at `init`. Adam moves the stored parameter by about lr per step, so the
    effective value moves about lr * init / scale: `scale` sets this vector's own learning rate while
    the global learning rate stays shared with the matrices.
    """

    def __init__(self, size: int, init: float, scale: float) -> None:
        super().__init__()
        self.init, self.scale = init, scale
        self.weight = nn.Parameter(torch.empty(size))

    def reset_parameters(self) -> None:
        nn.init.constant_(self.weight, self.scale)

    def forward(self) -> Tensor:
        return self.weight * (self.init / self.scale)


class NormalizedAttention(Attention):
    def __init__(self, d_model: int, n_head: int) -> None:
        super().__init__(d_model, n_head, Linear)
        # Section 2.3.2: q.k is now a cosine times s_qk^2, so the softmax scale becomes sqrt(d_k)
        self.softmax_scale = math.sqrt(self.head_dim)
        # Section 2.6: s_qk,init = 1, s_qk,scale = 1/sqrt(d_model); one d_k vector per head
        self.s_qk = LearnedScale(d_model, init=1.0, scale=1.0 / math.sqrt(d_model))

    def transform_qk(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
        s_qk = self.s_qk().view(self.n_head, self.head_dim)
        return unit(q) * s_qk, unit(k) * s_qk  # Section 2.3.2: q <- Norm(q) s_qk, k <- Norm(k) s_qk


class NormalizedMLP(SwiGLU):
    def __init__(self, d_model: int, d_mlp: int) -> None:
        super().__init__(d_model, d_mlp, Linear)
        self.s_u = LearnedScale(d_mlp, init=1.0, scale=1.0)  # Section 2.6: s_u,init = s_u,scale = 1
        self.s_v = LearnedScale(d_mlp, init=1.0, scale=1.0)  # Section 2.6: s_v,init = s_v,scale = 1
        # Section 2.4.2: v holds cosines ~ 1/sqrt(d); sqrt(d_model) brings them to SiLU's non-linear range
        self.v_gain = math.sqrt(d_model)

    def forward(self, x: Tensor) -> Tensor:
        u = self.u(x, out_scale=self.s_u())  # Section 2.4.2: u <- u s_u
        v = self.v(x, out_scale=self.s_v() * self.v_gain)  # Section 2.4.2: v <- v s_v sqrt(d_model)
        return self.o(u * F.silu(v))


class NormalizedBlock(nn.Module):
    def __init__(self, scale: Scale) -> None:
        super().__init__()
        d = scale.d_model
        self.attn = NormalizedAttention(d, scale.n_head)
        self.mlp = NormalizedMLP(d, scale.d_mlp)
        # Section 2.6: alpha_A,scale = alpha_M,scale = 1/sqrt(d_model)
        self.alpha_attn = LearnedScale(d, init=ALPHA_INIT, scale=1.0 / math.sqrt(d))
        self.alpha_mlp = LearnedScale(d, init=ALPHA_INIT, scale=1.0 / math.sqrt(d))

    def forward(self, h: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        h_a = unit(self.attn(h, cos, sin))
        h = unit(h + self.alpha_attn().abs() * (h_a - h))  # eq. 10
        h_m = unit(self.mlp(h))
        h = unit(h + self.alpha_mlp().abs() * (h_m - h))  # eq. 11
        return h


class NGPT(GPT):
    def make_block(self, index: int) -> nn.Module:
        return NormalizedBlock(self.scale)

    def make_head(self) -> None:
        d = self.scale.d_model
        self.embed_out = Linear(d, self.vocab_rows, norm_dim=1)  # unit rows, no final norm layer
        # Section 2.6: s_z,init = 1, s_z,scale = 1/sqrt(d_model)
        self.s_z = LearnedScale(self.vocab_rows, init=1.0, scale=1.0 / math.sqrt(d))

    def head_rows(self, h: Tensor) -> Tensor:
        return self.embed_out(h, out_scale=self.s_z())  # Section 2.1: z = E_out h, then z <- z s_z

    @torch.no_grad()
    def reset_parameters(self) -> None:
        std = 1.0 / math.sqrt(self.scale.d_model)  # Appendix A.5: matrices N(0, 1/sqrt(d)), then normalised
        for module in self.modules():
            if isinstance(module, Matrix):
                module.reset_parameters(std)
            elif isinstance(module, LearnedScale):
                module.reset_parameters()


@dataclass
class NGPTRecipe(Recipe):
    weight_decay: float = 0.0  # Section 2.6: weight decay removed (and no warmup: its row of arms.yaml)

    def post_step(self, model: nn.Module) -> None:
        normalize_matrices_(model)  # Section 2.6: back to unit norm along the embedding dim, every step
