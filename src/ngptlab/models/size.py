"""Parameter counts and training FLOPs per token, in closed form from the shape alone (no torch, no model).

`ngptlab plan` sizes any shape, a 1B model included, in well under a second; tests/test_models.py checks
every count against count_parameters(build(...)) for every arm at several shapes.

Parameters. The baseline (gpt.py) has two vocab x d embeddings (untied), per block the attention's four
d x d matrices, SwiGLU's u, v (d x d_mlp) and o (d_mlp x d), and two RMSNorm gains (d each), plus the
final RMSNorm gain. Each arm adds what its file adds (see `ARM_EXTRA`).

FLOPs:  C = 6 N + 12 L d T        (Chowdhery et al. 2022, PaLM, Appendix B)

N counts the parameters that take part in matrix multiplies: every attention and MLP matrix
(4 d^2 + 3 d d_mlp per block) and the LM head (vocab x d); the input embedding is a lookup and is left
out. 6 N is forward (2 N) plus backward (4 N). 12 L d T is attention itself: q k^T and the weighted sum
of v cost 2 T d each per token per layer forward, times 3 for training, counted over the full T x T square
as PaLM does (a causal kernel skips about half). Per-vector work (norms, RoPE, softmax, nGPT's scales,
multipliers) is ignored, so every arm costs the same.
"""

from __future__ import annotations

from collections.abc import Callable

from ngptlab.errors import ParamsError
from ngptlab.models.scales import Scale, resolve_scale


def padded_vocab(vocab_size: int, multiple: int) -> int:
    """Embedding and LM-head rows: the smallest multiple of `multiple` that holds the vocabulary (1: none).
    Pass it as `vocab_size` below to count or cost a padded model."""
    return -(-vocab_size // multiple) * multiple


def block_matrix_parameters(s: Scale) -> int:
    """Attention q, k, v, o (d x d each) and SwiGLU u, v, o (d x d_mlp each), per block."""
    return 4 * s.d_model**2 + 3 * s.d_model * s.d_mlp


def gpt_parameters(s: Scale, vocab: int) -> int:
    blocks = s.n_layer * (block_matrix_parameters(s) + 2 * s.d_model)  # + the two RMSNorm gains
    return 2 * vocab * s.d_model + blocks + s.d_model  # + the final RMSNorm gain


def ngpt_parameters(s: Scale, vocab: int) -> int:
    # no RMSNorm anywhere; per block s_qk, alpha_A, alpha_M (d each), s_u, s_v (d_mlp each); s_z (vocab)
    blocks = s.n_layer * (block_matrix_parameters(s) + 3 * s.d_model + 2 * s.d_mlp)
    return 2 * vocab * s.d_model + blocks + vocab


# What each arm adds to the baseline's count (nGPT-based arms: to nGPT's), in the words of its own file.
ARM_EXTRA: dict[str, Callable[[Scale, int], int]] = {
    "gpt": lambda s, v: 0,
    "gpt-nowd": lambda s, v: 0,  # a different recipe only
    "gpt-rownorm": lambda s, v: 0,  # a post-step constraint only (the RMSNorm gains stay, frozen)
    # a row and a column multiplier on every block matrix (q, k, v, o: 2 d; u, v, o: d + d_mlp) and on
    # the input embedding (vocab + d); none on the LM head
    "gpt-lrm": lambda s, v: s.n_layer * (11 * s.d_model + 3 * s.d_mlp) + v + s.d_model,
    "gpt-scalar": lambda s, v: 7 * s.n_layer + 1,  # one scalar per block matrix and on the input embedding
    "gpt-orth": lambda s, v: 7 * s.n_layer,  # one scalar per block matrix; embeddings are the baseline's
    "ngpt": lambda s, v: ngpt_parameters(s, v) - gpt_parameters(s, v),
    "gpt-qknorm": lambda s, v: 2 * s.n_layer * s.head_dim,  # q and k RMSNorm gains (head_dim) per block
    "ngpt-freew": lambda s, v: ngpt_parameters(s, v) - gpt_parameters(s, v),  # nGPT's, weights free
    "gpt-angle": lambda s, v: 7 * s.n_layer + 1,  # gpt-scalar's scalars; the rotational step adds none
    "ngpt-angle": lambda s, v: ngpt_parameters(s, v) - gpt_parameters(s, v),  # nGPT's
}


def parameter_count(arm: str, scale: Scale | str, vocab_size: int) -> int:
    """Every trainable and frozen parameter of `arm` at this shape (what count_parameters(model) gives)."""
    if arm not in ARM_EXTRA:
        raise ParamsError(f"unknown arm {arm!r}; allowed: {', '.join(ARM_EXTRA)}")
    s = resolve_scale(scale) if isinstance(scale, str) else scale
    return gpt_parameters(s, vocab_size) + ARM_EXTRA[arm](s, vocab_size)


def matmul_parameters(scale: Scale | str, vocab_size: int) -> int:
    """N above: the block matrices plus the LM head."""
    s = resolve_scale(scale) if isinstance(scale, str) else scale
    return s.n_layer * block_matrix_parameters(s) + vocab_size * s.d_model


def train_flops_per_token(arm: str, scale: Scale | str, vocab_size: int, context: int) -> float:
    if arm not in ARM_EXTRA:  # the estimate is the same for every arm, but the name must be one
        raise ParamsError(f"unknown arm {arm!r}; allowed: {', '.join(ARM_EXTRA)}")
    s = resolve_scale(scale) if isinstance(scale, str) else scale
    return 6.0 * matmul_parameters(s, vocab_size) + 12.0 * s.n_layer * s.d_model * context
