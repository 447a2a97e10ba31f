"""Parameter counts and training FLOPs per token, in closed form from the shape alone (no torch, no model).

`ngptlab plan` sizes any shape, a 1B model included, in well under a second; tests/test_models.py checks
every count against count_parameters(build(...)) for every arm at several shapes.

Parameters. The baseline (gpt.py) has two vocab x d embeddings (untied), per block the attention's four
d x d matrices, SwiGLU's u, v (d x d_mlp) and o (d_mlp x d), and two RMSNorm gains (d each), plus the
final RMSNorm gain. Each arm adds what its file adds: its row's `parameters` in arms.yaml.

FLOPs:  C = 6 N + 12 L d T        (Chowdhery et al. 2022, PaLM, Appendix B)

N counts the parameters that take part in matrix multiplies: every attention and MLP matrix
(4 d^2 + 3 d d_mlp per block) and the LM head (vocab x d); the input embedding is a lookup and is left
out. 6 N is forward (2 N) plus backward (4 N). 12 L d T is attention itself: q k^T and the weighted sum
of v cost 2 T d each per token per layer forward, times 3 for training, counted over the full T x T square
as PaLM does (a causal kernel skips about half). Per-vector work (norms, RoPE, softmax, nGPT's scales,
multipliers) is ignored, so every arm costs the same.

Causal:  C_causal = 6 N + 6 L d T  (the attention term halved: query t meets t + 1 keys, T (T + 1) / 2 of
the T^2 pairs). It is shown beside MFU (`mfu_causal`), not instead of it: MFU keeps PaLM's count, the
convention of the reference implementations. The full count overstates the causal work by 18% at 4k and
31% at 8k tokens at 0.5B (15.8% and 27.2% at 1B).
"""

from __future__ import annotations

from ngptlab.errors import ParamsError
from ngptlab.models import arms
from ngptlab.models.scales import Scale, resolve_scale


def padded_vocab(vocab_size: int, multiple: int) -> int:
    """Embedding and LM-head rows: the smallest multiple of `multiple` that holds the vocabulary (1: none).
    Pass it as `vocab_size` below to count or cost a padded model."""
    return -(-vocab_size // multiple) * multiple


def block_matrix_parameters(s: Scale) -> int:
    """Attention q, k, v, o (d x d each) and SwiGLU u, v, o (d x d_mlp each), per block."""
    return 4 * s.d_model**2 + 3 * s.d_model * s.d_mlp


def matrix_parameters(s: Scale, vocab: int) -> dict[str, int]:
    """The parameters of each kind of matrix (models/layers.py's MATRIX_KINDS), all blocks together; every
    arm has these shapes."""
    d, blocks = s.d_model, s.n_layer
    return {"embed_in": vocab * d, "embed_out": vocab * d, "q": blocks * d * d, "k": blocks * d * d,
            "v": blocks * d * d, "o": blocks * d * d, "mlp_u": blocks * d * s.d_mlp,
            "mlp_v": blocks * d * s.d_mlp, "mlp_o": blocks * s.d_mlp * d}


def rotational_parameters(arm: str, s: Scale, vocab: int) -> int:
    """The parameters of the matrices `arm` turns with the rotational step (models/rotational.py): an angle
    arm's (arms.yaml: turns_like) every kind but its not_turned; none for any other arm."""
    train = arms.arm(arm).train
    if train.turns_like is None:
        return 0
    return sum(n for kind, n in matrix_parameters(s, vocab).items() if kind not in train.not_turned)


def gpt_parameters(s: Scale, vocab: int) -> int:
    blocks = s.n_layer * (block_matrix_parameters(s) + 2 * s.d_model)  # + the two RMSNorm gains
    return 2 * vocab * s.d_model + blocks + s.d_model  # + the final RMSNorm gain


def ngpt_parameters(s: Scale, vocab: int) -> int:
    # no RMSNorm anywhere; per block s_qk, alpha_A, alpha_M (d each), s_u, s_v (d_mlp each); s_z (vocab)
    blocks = s.n_layer * (block_matrix_parameters(s) + 3 * s.d_model + 2 * s.d_mlp)
    return 2 * vocab * s.d_model + blocks + vocab


def parameter_count(arm: str, scale: Scale | str, vocab_size: int) -> int:
    """Every trainable and frozen parameter of `arm` at this shape (what count_parameters(model) gives):
    gpt's, plus what the arm's row of arms.yaml adds (`parameters`, in the words of its own file)."""
    if arm not in arms.table():
        raise ParamsError(f"unknown arm {arm!r}; allowed: {', '.join(arms.names())}")
    s = resolve_scale(scale) if isinstance(scale, str) else scale
    extra = arms.arm(arm).extra_parameters(n_layer=s.n_layer, d_model=s.d_model, d_mlp=s.d_mlp,
                                           head_dim=s.head_dim, vocab=vocab_size)
    return gpt_parameters(s, vocab_size) + extra


def matmul_parameters(scale: Scale | str, vocab_size: int) -> int:
    """N above: the block matrices plus the LM head."""
    s = resolve_scale(scale) if isinstance(scale, str) else scale
    return s.n_layer * block_matrix_parameters(s) + vocab_size * s.d_model


def train_flops_per_token(arm: str, scale: Scale | str, vocab_size: int, context: int) -> float:
    if arm not in arms.table():  # the estimate is the same for every arm, but the name must be one
        raise ParamsError(f"unknown arm {arm!r}; allowed: {', '.join(arms.names())}")
    s = resolve_scale(scale) if isinstance(scale, str) else scale
    return 6.0 * matmul_parameters(s, vocab_size) + attention_flops_per_token(s, context)


def attention_flops_per_token(scale: Scale | str, context: int) -> float:
    """12 L d T: attention over the full T x T square, training (PaLM, Appendix B)."""
    s = resolve_scale(scale) if isinstance(scale, str) else scale
    return 12.0 * s.n_layer * s.d_model * context


def causal_flops_per_token(flops_per_token: float, scale: Scale | str, context: int) -> float:
    """A recorded flops_per_token (6 N + 12 L d T) with its attention term halved, as a causal kernel computes
    it: 6 N + 6 L d T. From the recorded figure, so a timing file or bench row needs no vocabulary size."""
    return flops_per_token - attention_flops_per_token(scale, context) / 2
