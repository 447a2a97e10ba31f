"""gpt-pc1, gpt-pc2, gpt-pc4: the baseline GPT whose attention and MLP matrices pass through a PC layer, a
dial on their conditioning between gpt (level 0) and gpt-orth's kappa = 1 (the level's limit).

Design role: gpt-orth fixes kappa = 1 exactly, which confounds "conditioning helps" with "kappa = 1 costs
capacity". The PC layer (arXiv 2606.06470) improves the conditioning by a set amount and leaves the norm free:

    W_eff = gamma * p(W^ W^T) W^,   W^ = W / ||W||_F,

p a low-degree polynomial whose level sets how hard it compresses the singular values (level 1:
p(x) = 1.507 - 0.507 x); the highest level approaches Newton-Schulz, an orthogonal matrix; gamma recovers the
norm. The paper reports, at Llama-1B with AdamW, ~2x fewer tokens and the condition measure 41% lower
(a secondary figure; nothing else of the paper is used here).

Our reading, implemented below (`pc_weight`): the level L is the number of times the map

    X -> p(X X^T) X = X p(X^T X),   p(x) = A - B x,  A = 1.507, B = 0.507,

is applied to W^. On each singular value it is sigma -> sigma p(sigma^2) = sigma (A - B sigma^2): sigma = 1 is
fixed, a small sigma is raised ~1.5x, so the spread shrinks. ||W^||_F = 1 puts every sigma in [0, 1], inside
the map's convergent range (sigma p(sigma^2) stays positive below sqrt(A / B) ~ 1.72, and [0, 1] maps into
[0, 1.00003]). Level 0 is gpt exactly (the raw W, bit for bit); as L grows Y = the L-fold map of W^ approaches
the polar factor of W (orthogonal, kappa = 1: gpt-orth's limit; a sigma of 1e-3 of the top needs ~17 levels).
gamma recovers the norm: W_eff = ||W||_F Y / ||Y||_F, so ||W_eff||_F = ||W||_F: the norm stays free, under
gpt's weight decay 0.1 (the recipe is gpt's: AdamW, wd 0.1 on W, warmup).

The map runs on the smaller Gram side (a tall m x n matrix uses X^T X, n x n; a wide one is transposed), in
the forward pass of every step, and autograd differentiates through it: the optimiser moves the raw W.

The levels, measured on planted matrices U diag(s) V^T with a power-law spectrum s_i = i^-alpha (trained-like:
gpt's matrices have a decaying spectrum), kappa(W_eff) at level 0, 1, 2, 3, 4 (identical for 64 x 64 and
256 x 64, and for 128 x 128 and 512 x 128, as the map acts on the spectrum alone):
    d 64,  alpha 0.5:   8.0,  7.4,  6.4,  4.9,  3.4
    d 64,  alpha 1.0:  64.0, 50.8, 35.8, 23.9, 15.9
    d 128, alpha 0.5:  11.3, 10.6,  9.3,  7.3,  5.1
    d 128, alpha 1.0: 128.0, 101.7, 71.7, 47.9, 31.8
so levels 1, 2, 4 lower kappa by ~8-20%, ~20-44% and ~55-75%: a visible dial at the CPU grid's widths
(levels 1, 2, 3 would give only 8-20%, 20-44%, 35-63%). tests/test_gpt_pc.py asserts these numbers.

Cost: recomputed every forward pass whatever its tokens, so it weighs most at small micro-batches. The MLP's
4:1 matrices iterate in Gram space from level 2 (`_gram_polynomial`), which cut the PC layer's forward and
backward per cpu-8l step from 136 to 99 ms at level 2 and from 291 to 217 ms at level 4 (one thread, a shared
CPU, min of 15). `ngptlab bench step --scale cpu-8l --arms gpt-pc1 gpt-pc2 gpt-pc4` (512 tokens a step, one
thread, median of 30): 1.06x, 1.04x and 1.17x gpt's step (gpt-orth beside them 1.06x; +-5% noise there);
on two threads, an idle machine, median of 20: 1.19x, 1.22x and 1.38x (gpt-orth 1.14x, gpt-muon 1.14x): the
layer's small matmuls gain little from a second thread. `bench step` now computes on a training
process's one thread unless told (`--threads`), the count the pipeline trains on. Re-measured so on an
idle machine (median of 30, two runs): 1.13-1.15x, 1.36-1.64x and 1.27x (gpt-orth 1.12x, gpt-muon
1.16-1.45x), level 2 moving most between runs; `--threads 2` the same hour: 1.20x, 1.18x, 1.37x. By
FLOPs, level 4 adds ~6.7 GFLOP a cpu-8l step (forward and backward) to gpt's ~25 at 512 tokens; the cost
is per forward pass, not per token, so it falls with the micro-batch (negligible at a GPU's thousands of
tokens per micro-batch). The Gram Y^T Y is differentiated in one product (`Gram`), not autograd's two: the
layer's forward and backward over a cpu-8l step's 56 matrices took 0.93x the CPU time at levels 1 and 2 and
0.96x at level 4 (one thread, process time, min of 20, the two interleaved); the same matrices stacked into
batched products (bmm) took 1.3x, slower.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ngptlab.models.gpt import GPT
from ngptlab.models.layers import Linear
from ngptlab.models.pc_level import LEVELS, gram_space

PC_A, PC_B = 1.507, 0.507  # p(x) = A - B x, the PC layer's level-1 polynomial (arXiv 2606.06470)
TINY = 1e-30  # floor on the norms divided by: a zero matrix maps to zero, not NaN


def pc_weight(weight: Tensor, level: int) -> Tensor:
    """W_eff = ||W||_F Y / ||Y||_F, Y the `level`-fold map X -> X p(X^T X) of W / ||W||_F (module docstring);
    the raw `weight` itself at level 0. Differentiable; returned in weight's dtype.

    Computed in float32 (float64 for a float64 weight, as the condition stage forms it) with autocast off:
    the Gram matrix X^T X holds sigma^2, so in bf16 (unit round-off 2^-8) a singular value under ~1/16 of the
    top (1/256 of the top's sigma^2) drowns in the rounding of the large ones: the very sigmas the layer
    raises would be lost. torch's default matmul precision ("highest") keeps TF32 out; nothing here sets it.
    """
    if isinstance(level, bool) or not isinstance(level, int) or level < 0:
        raise ValueError(f"PC level must be a non-negative integer, got {level!r}")
    if level == 0:
        return weight
    dtype = torch.float64 if weight.dtype == torch.float64 else torch.float32
    with torch.autocast(weight.device.type, enabled=False):
        w = weight.to(dtype)
        x = w if w.shape[0] >= w.shape[1] else w.T  # tall: the Gram X^T X is the smaller square
        norm = torch.linalg.matrix_norm(x)
        y = x / norm.clamp_min(TINY)
        if gram_space(*x.shape, level):
            y = y @ _gram_polynomial(Gram.apply(y), level)  # the MLP's 4:1 matrices: n x n work per level
        else:
            for _ in range(level):
                y = torch.addmm(y, y, Gram.apply(y), beta=PC_A, alpha=-PC_B)  # Y <- A Y - B Y (Y^T Y)
        y = y * (norm / torch.linalg.matrix_norm(y).clamp_min(TINY))  # gamma: ||W_eff||_F = ||W||_F
        out = y if w.shape[0] >= w.shape[1] else y.T
    return out.to(weight.dtype)


class Gram(torch.autograd.Function):
    """G = Y^T Y, differentiated in one product: dY = Y (dG + dG^T), where autograd's product rule takes two
    (dG^T Y^T's transpose and Y dG), the same sum up to float rounding. The forward is Y^T Y as before."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, y: Tensor) -> Tensor:
        ctx.save_for_backward(y)
        return y.T @ y

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return y @ (grad + grad.T)


def _gram_polynomial(gram: Tensor, level: int) -> Tensor:
    """P with X P = the `level`-fold map of X, from G = X^T X alone (n x n). Every iterate is X_j = X P_j,
    P_j = M_0 ... M_j-1, M_j = p(G_j) = A I - B G_j, G_j+1 = X_j+1^T X_j+1 = M_j G_j M_j (polynomials in G, so
    they commute): 3 n^3 a level instead of 4 m n^2 on the tall X, m >= 2n."""
    eye = torch.eye(gram.shape[0], dtype=gram.dtype, device=gram.device)
    m = torch.add(PC_A * eye, gram, alpha=-PC_B)
    p = m
    for _ in range(level - 1):
        gram = m @ gram @ m
        m = torch.add(PC_A * eye, gram, alpha=-PC_B)
        p = p @ m
    return p


class PCLinear(Linear):
    """y = x W_eff^T with W_eff = pc_weight(W, level); `weight` holds the raw W. The model sets `level`."""

    level = 0

    def forward(self, x: Tensor, out_scale: Tensor | None = None) -> Tensor:
        weight = self.effective_weight()
        return F.linear(x, weight if out_scale is None else weight * out_scale[:, None])

    def effective_weight(self) -> Tensor:
        return pc_weight(self.weight, self.level)

    def underlying_weight(self) -> Tensor:
        return self.weight


class GPTPC(GPT):
    """gpt with every attention and MLP matrix a PCLinear at `level` (0: gpt exactly); embeddings and the LM
    head stay the baseline's. The arms are the subclasses below, one per level."""

    linear = PCLinear
    level = 0

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for module in self.modules():
            if isinstance(module, PCLinear):
                module.level = self.level


class GPTPC1(GPTPC):
    level = LEVELS["GPTPC1"]


class GPTPC2(GPTPC):
    level = LEVELS["GPTPC2"]


class GPTPC4(GPTPC):
    level = LEVELS["GPTPC4"]
