"""Pieces every arm shares, written once: matrices that know their embedding dimension, RMSNorm, rotary
position embeddings, causal attention and the SwiGLU MLP.

Shapes: B batch, T tokens, H heads, K head dim, d model width. Every matrix keeps torch's Linear
orientation, weight [out, in]; embeddings are [vocab, d].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

MATRIX_KINDS = ("embed_in", "embed_out", "q", "k", "v", "o", "mlp_u", "mlp_v", "mlp_o")


@dataclass
class MatrixInfo:
    """One weight matrix as the forward pass uses it, for the conditioning analysis."""

    name: str  # module path, e.g. "layers.3.attn.q"; model.get_submodule(name) is the module
    kind: str  # one of MATRIX_KINDS
    layer: int | None  # 0-based block index; None for the embeddings
    weight: Tensor  # the EFFECTIVE matrix (after multipliers/scalars), detached, [out, in] or [vocab, d]
    underlying: Tensor | None  # the raw parameter where it differs from `weight` (lrm, scalar, orth)
    norm_dim: int  # the dim along which vectors have length d_model (nGPT's "embedding dimension")
    n_heads: int | None = None  # for q, k, v: rows come in n_heads consecutive groups of head_dim


# ----------------------------------------------------------------------------------------------------------
# Matrices


class Matrix(nn.Module):
    """A bias-free weight matrix. Arms subclass it to change how the effective matrix is parametrised.

    `norm_dim` is the axis of `weight` along which vectors have length d_model: 1 for the embeddings and
    the input projections (q, k, v, u, v), 0 for the output projections (attn o, mlp o). nGPT
    normalises along it (paper Section 2.6); the conditioning analysis reads it.
    """

    def __init__(self, rows: int, cols: int, norm_dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(rows, cols))
        self.norm_dim = norm_dim

    def reset_parameters(self, std: float) -> None:
        nn.init.normal_(self.weight, mean=0.0, std=std)

    def effective_weight(self) -> Tensor:
        """The matrix the forward pass multiplies by."""
        return self.weight

    def underlying_weight(self) -> Tensor | None:
        """The raw parameter when it differs from the effective matrix, else None."""
        return None

    def multipliers(self) -> list[nn.Parameter]:
        """Scale parameters attached to this matrix (learnable multipliers, scalars); none by default."""
        return []


class Linear(Matrix):
    """y = x W^T, W [out, in]; with a per-output scale s, y = (x W^T) s computed as x (s W)^T."""

    def __init__(self, in_features: int, out_features: int, norm_dim: int) -> None:
        super().__init__(out_features, in_features, norm_dim)

    def forward(self, x: Tensor, out_scale: Tensor | None = None) -> Tensor:
        # Scaling the [out, in] weight costs tokens/in times less than scaling the [tokens, out] output, and
        # keeps y in the autocast dtype (no fp32 round trip through the scale).
        weight = self.weight if out_scale is None else self.weight * out_scale[:, None]
        return F.linear(x, weight)


class Embedding(Matrix):
    """Row lookup in E [vocab, d]; rows have length d_model, so norm_dim = 1."""

    def __init__(self, vocab_size: int, d_model: int) -> None:
        super().__init__(vocab_size, d_model, norm_dim=1)

    def forward(self, idx: Tensor) -> Tensor:
        return F.embedding(idx, self.weight)


@torch.no_grad()
def normalize_matrices_(model: nn.Module) -> None:
    """Scale every Matrix's vectors along its embedding dimension to unit norm (nGPT Section 2.6).

    In place and batched: one norm per matrix, then a single _foreach division over all of them (fp32
    weights, as training keeps them, need no copy); w / max(||w||, 1e-12), as F.normalize.
    """
    matrices = [m for m in model.modules() if isinstance(m, Matrix)]
    weights = [m.weight for m in matrices]
    norms = [torch.linalg.vector_norm(m.weight, dim=m.norm_dim, keepdim=True, dtype=torch.float32)
             for m in matrices]
    torch._foreach_clamp_min_(norms, 1e-12)
    if all(w.dtype == torch.float32 for w in weights):
        torch._foreach_div_(weights, norms)
        return
    for w, n in zip(weights, norms, strict=True):  # another dtype: normalise in fp32, round once
        w.copy_((w.float() / n).to(w.dtype))


def unit(x: Tensor) -> Tensor:
    """Norm(x) = x / ||x|| over the last dim, computed in fp32 (nGPT Section 2.2.2)."""
    return F.normalize(x.float(), dim=-1)


# ----------------------------------------------------------------------------------------------------------
# RMSNorm


class RMSNorm(nn.Module):
    """x / rms(x) * g with a learnable gain g (init 1), computed in fp32 whatever the autocast dtype."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:  # eps 1e-6: the baseline spec
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def reset_parameters(self) -> None:
        nn.init.ones_(self.weight)

    def forward(self, x: Tensor) -> Tensor:
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (y * self.weight.float()).type_as(x)

    def freeze(self) -> None:
        """Fix the gain at 1 (no gradient, outside the optimizer): the matrix after this norm is then the
        whole linear map applied to the normalised input, W diag(g) = W."""
        nn.init.ones_(self.weight)
        self.weight.requires_grad_(False)


# ----------------------------------------------------------------------------------------------------------
# Rotary position embeddings (Su et al. 2021, arXiv 2104.09864)


class Rotary(nn.Module):
    """cos/sin tables for positions 0..context-1. Pair i of a head vector is (x[i], x[i + K/2]) and is
    rotated by the angle pos * base^(-2i/K). A rotation preserves norms, and R(m)^T R(n) = R(n - m), so
    q.k after RoPE depends only on the relative position. Buffers are non-persistent: never in checkpoints.
    """

    def __init__(self, head_dim: int, context: int, base: float = 10000.0) -> None:  # base: Su et al.
        super().__init__()
        # float64 angles: pos * freq at pos ~ 8k would lose ~1e-3 rad in fp32
        inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        angles = torch.outer(torch.arange(context, dtype=torch.float64), inv_freq)  # [T, K/2]
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def forward(self, seq_len: int) -> tuple[Tensor, Tensor]:
        return self.cos[:seq_len], self.sin[:seq_len]


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate x [B, T, H, K] by the tables cos, sin [T, K/2]; computed and returned in fp32. Attention casts
    q and k to the autocast dtype once, after transform_qk: nGPT's and QK-norm's normalisations of q and k
    then read the fp32 rotation, with no round trip through bf16."""
    x1, x2 = x.float().chunk(2, dim=-1)
    cos, sin = cos[:, None, :], sin[:, None, :]  # broadcast over heads
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


# ----------------------------------------------------------------------------------------------------------
# Attention and MLP


class Attention(nn.Module):
    """Causal multi-head self-attention with RoPE on q and k (paper Section 2.3.1).

    Subclasses change `transform_qk` (nGPT normalises and scales q, k) and `softmax_scale`.
    """

    def __init__(self, d_model: int, n_head: int, linear: type[Linear] = Linear) -> None:
        super().__init__()
        self.n_head, self.head_dim = n_head, d_model // n_head
        self.softmax_scale = 1.0 / math.sqrt(self.head_dim)  # the usual 1/sqrt(d_k)
        self.q = linear(d_model, d_model, norm_dim=1)
        self.k = linear(d_model, d_model, norm_dim=1)
        self.v = linear(d_model, d_model, norm_dim=1)
        self.o = linear(d_model, d_model, norm_dim=0)

    def transform_qk(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
        return q, k

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        B, T, d = x.shape
        heads = (B, T, self.n_head, self.head_dim)
        q, k, v = self.q(x).view(heads), self.k(x).view(heads), self.v(x).view(heads)
        q, k = self.transform_qk(apply_rotary(q, cos, sin), apply_rotary(k, cos, sin))
        q, k = q.type_as(v), k.type_as(v)  # sdpa wants one dtype; v carries the autocast dtype
        # torch picks the kernel per call (CUDA: flash, memory-efficient, cuDNN or math; CPU: flash or math).
        # Training records which, and computes a non-finite step again on another (train/attention.py):
        # cuDNN's bf16 backward has returned NaN on torch 2.13 (huggingface/trl#7181, pocket-tts#264).
        y = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True, scale=self.softmax_scale
        )
        return self.o(y.transpose(1, 2).reshape(B, T, d))


class SwiGLU(nn.Module):
    """h_M = (u * SiLU(v)) W_o with u = h W_u, v = h W_v (Shazeer 2020; paper Section 2.4.1)."""

    def __init__(self, d_model: int, d_mlp: int, linear: type[Linear] = Linear) -> None:
        super().__init__()
        self.u = linear(d_model, d_mlp, norm_dim=1)
        self.v = linear(d_model, d_mlp, norm_dim=1)
        self.o = linear(d_mlp, d_model, norm_dim=0)

    def forward(self, x: Tensor) -> Tensor:
        return self.o(self.u(x) * F.silu(self.v(x)))
