"""gpt-qknorm: the baseline GPT with queries and keys RMS-normalised per head (QK-norm).

Design role: a modern baseline (norms free, conditioning free). Normalising q and k is the standard fix for
attention-logit growth (Dehghani et al. 2023, arXiv 2302.05442; Wortsman et al. 2023, arXiv 2309.14322),
and nGPT normalises q and k too (paper Section 2.3.2; its ablations remove that normalisation), so this arm
asks how much of nGPT's speed-up a GPT with only this part of it gets.

The one difference from gpt: in every attention layer, after RoPE (where nGPT normalises), each head's q
and k go through an RMSNorm over the head dimension, with a learnable gain of head_dim values (init 1,
shared by the heads, no weight decay) for q and another for k. The softmax scale stays 1/sqrt(d_k).
"""

from __future__ import annotations

from torch import Tensor

from ngptlab.models.gpt import GPT, Block
from ngptlab.models.layers import Attention, Linear, RMSNorm
from ngptlab.models.scales import Scale


class QKNormAttention(Attention):
    def __init__(self, d_model: int, n_head: int, linear: type[Linear] = Linear) -> None:
        super().__init__(d_model, n_head, linear)
        self.q_norm = RMSNorm(self.head_dim)  # over the last dim of [B, T, H, K]: per head
        self.k_norm = RMSNorm(self.head_dim)

    def transform_qk(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
        return self.q_norm(q), self.k_norm(k)


class QKNormBlock(Block):
    def __init__(self, scale: Scale, linear: type[Linear]) -> None:
        super().__init__(scale, linear)
        self.attn = QKNormAttention(scale.d_model, scale.n_head, linear)


class GPTQKNorm(GPT):
    def make_block(self, index: int) -> QKNormBlock:
        return QKNormBlock(self.scale, self.linear)
