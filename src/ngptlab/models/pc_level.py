"""The PC arms' levels, and the bytes their PC layer saves for the backward pass, torch-free: gpt_pc.py's
classes take their level from here and plan/memory.py counts the layer's saved float32 iterates from it.

The layer (gpt_pc.py) recomputes every matrix's W_eff in each forward pass, so what it saves is per matrix,
whatever the micro-batch's tokens. For one m x n matrix, m >= n (a wide one is transposed: n is the smaller
Gram side), at level L, in float32 (4 bytes a value):

    the iteration on X (X <- A X - B X (X^T X))   X_0 ... X_L and the L Grams: (L + 1) m n + L n^2 values
    the Gram-space iteration (m >= 2 n, L >= 2)  X_0 and X_L, 2 m n, and 4 L - 3 n x n matrices:
                                                 M_0 ... M_L-1, G_0 ... G_L-2, the products M_j G_j,
                                                 P_1 ... P_L-2 and P
    W_eff, as the matmul keeps it                in fp32 its float32 values (m n; gpt's matmul keeps the
                                                 parameter, which exists anyway); under bf16 autocast its
                                                 bf16 cast, as gpt's of W (plan's casts, 2 bytes a parameter);
                                                 with bf16 weights the weight's float32 copy (m n) and W_eff
                                                 in bf16 (2 bytes, where gpt's matmul keeps W itself)

(a few scalars, the norms, are left out). A block's are its seven matrices' (models/size.py: attention's four
d x d, SwiGLU's three d x d_mlp). Under activation checkpointing a block's W_eff is recomputed in the backward
pass with its activations, so one block's exist at a time. tests/test_memory.py measures them with torch's
saved-tensor hooks against `block_bytes`.
"""

from __future__ import annotations

from ngptlab.models import arms
from ngptlab.models.scales import Scale

MODULE = "ngptlab.models.gpt_pc"  # the PC arms' model module (arms.yaml: train.model)
LEVELS = {"GPTPC1": 1, "GPTPC2": 2, "GPTPC4": 4}  # gpt_pc.py's arm classes and their levels
GRAM_RATIO = 2  # from m >= 2 n on, levels >= 2 iterate in Gram space (n x n work per level)


def level_of(arm: str) -> int:
    """The arm's PC level: its model class's in LEVELS, 0 for an arm without a PC layer."""
    module, _, name = arms.arm(arm).train.model.partition(":")
    return LEVELS[name] if module == MODULE else 0


def gram_space(rows: int, cols: int, level: int) -> bool:
    """Whether the layer iterates a rows x cols matrix in Gram space (gpt_pc._gram_polynomial)."""
    return level >= 2 and max(rows, cols) >= GRAM_RATIO * min(rows, cols)


def block_shapes(shape: Scale) -> list[tuple[int, int]]:
    """A block's matrices, (rows, cols) each: q, k, v, o (d x d), SwiGLU's u, v and o (d_mlp by d)."""
    d = shape.d_model
    return [(d, d)] * 4 + [(shape.d_mlp, d)] * 2 + [(d, shape.d_mlp)]


def matrix_bytes(rows: int, cols: int, level: int, bf16: bool, weight_bytes: int = 4) -> int:
    """The bytes the PC layer saves for backward for one matrix beyond what gpt's matmul saves (module
    docstring): 0 at level 0."""
    if level == 0:
        return 0
    m, n = max(rows, cols), min(rows, cols)
    if gram_space(m, n, level):
        values = 2 * m * n + (4 * level - 3) * n * n
    else:
        values = (level + 1) * m * n + level * n * n
    if weight_bytes < 4:  # bf16 weights (computed under bf16 autocast): the float32 copy and W_eff in bf16
        return 4 * (values + m * n) + 2 * m * n
    return 4 * (values + (0 if bf16 else m * n))


def block_bytes(arm: str, shape: Scale, bf16: bool, weight_bytes: int = 4) -> int:
    """The bytes one block's PC layer saves for backward (0 for an arm without one)."""
    level = level_of(arm)
    return sum(matrix_bytes(r, c, level, bf16, weight_bytes) for r, c in block_shapes(shape))
