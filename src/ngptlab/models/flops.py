"""Training FLOPs per token, from the shapes alone.

    C = 6 N + 12 L d T        (Chowdhery et al. 2022, PaLM, Appendix B)

N counts the parameters that take part in matrix multiplies: every attention and MLP matrix (16 d^2 per
block: q, k, v, o are d x d, SwiGLU's u, v, o are d x 4d) and the LM head (vocab x d); the input
embedding is a lookup and is left out. 6 N is forward (2 N) plus backward (4 N). 12 L d T is attention
itself: q k^T and the weighted sum of v cost 2 T d each per token per layer forward, times 3 for training,
counted over the full T x T square as PaLM does (a causal kernel skips about half). Per-vector work
(norms, RoPE, softmax, nGPT's scales, multipliers) is ignored, so every arm costs the same.
"""

from __future__ import annotations

from ngptlab.models.registry import lookup_arm, lookup_scale


def matmul_parameters(scale_name: str, vocab_size: int) -> int:
    """N above: 16 d^2 per block plus the LM head."""
    s = lookup_scale(scale_name)
    return s.n_layer * (4 * s.d_model**2 + 3 * s.d_model * s.d_mlp) + vocab_size * s.d_model


def train_flops_per_token(arm: str, scale: str, vocab_size: int, context: int) -> float:
    lookup_arm(arm)  # validates the name; the estimate is the same for every arm
    s = lookup_scale(scale)
    return 6.0 * matmul_parameters(scale, vocab_size) + 12.0 * s.n_layer * s.d_model * context
