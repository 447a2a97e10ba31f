"""gpt-orth: the baseline GPT whose attention and MLP matrices are kept at W = s Q, Q (semi-)orthogonal.

Design role: the {norm learned, conditioning fixed} corner of the 2x2 (gpt / gpt-rownorm / gpt-orth / ngpt):
every singular value of every attention and MLP matrix equals the one learnable scalar |s|, so
kappa(W) = 1 throughout training. After every optimizer step (and at init) Q is replaced by its polar
factor, the nearest (semi-)orthogonal matrix; s is optimised like gpt-scalar's (weight decay 2e-3,
outside gradient clipping). Q is initialised orthogonal and s so that ||s Q||_F equals the Frobenius norm
gpt's init would give. Embeddings are the baseline's. The weight decay on Q is a no-op: it shrinks Q
uniformly and the polar factor ignores scale.

The RMSNorm gains in front of the attention and MLP (norm_attn, norm_mlp) are frozen at 1: with a learnable
gain g the map applied to the normalised input is s Q diag(g), whose condition number is that of diag(g)
(1.03-1.10 after a few steps), so "conditioning fixed" would hold for the raw matrix only. The final norm
before the LM head keeps its gain, as the LM head is the baseline's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ngptlab.models.gpt import GPT
from ngptlab.models.gpt_lrm import MultiplierRecipe
from ngptlab.models.gpt_scalar import ScaledLinear


@torch.no_grad()
def polar_factor(w: Tensor, tol: float = 1e-10, max_iter: int = 100) -> Tensor:
    """U V^T for w = U S V^T, by Newton-Schulz iterations X <- X (3 I - X^T X) / 2 in float64.

    The iteration (Higham, Functions of Matrices, 2008, Section 8.3) drives every singular value in
    (0, sqrt 3) to 1, quadratically once near 1; after one AdamW step they are near 1, so a handful of
    iterations reach float64 round-off (fp64 also sidesteps TF32 matmuls). It stops when
    ||X^T X - I||_F < tol or stops decreasing (round-off floor).
    """
    if w.is_meta:
        return w
    x = w.double()
    transposed = x.shape[0] < x.shape[1]
    if transposed:
        x = x.T  # iterate on the tall side so the Gram matrix is the smaller square
    gram = x.T @ x
    # sigma_max^2 <= ||X^T X||_inf; scale so every sigma^2 <= 2, inside the convergence region
    shrink = torch.clamp(2.0 / gram.abs().sum(dim=1).max(), max=1.0)
    x, gram = x * shrink.sqrt(), gram * shrink
    eye = torch.eye(gram.shape[0], dtype=gram.dtype, device=gram.device)
    previous = math.inf
    for _ in range(max_iter):
        residual = torch.linalg.matrix_norm(gram - eye).item()
        if residual < tol or residual >= previous:
            break
        previous = residual
        x = 1.5 * x - 0.5 * (x @ gram)
        gram = x.T @ x
    return (x.T if transposed else x).to(w.dtype)


class OrthLinear(ScaledLinear):
    """W = s Q; `weight` holds Q, which the recipe's post_step keeps (semi-)orthogonal."""

    def reset_parameters(self, std: float) -> None:
        if not self.weight.is_meta:
            nn.init.orthogonal_(self.weight)
        # ||s Q||_F^2 = s^2 min(out, in) equals E||W||_F^2 = std^2 out in of gpt's N(0, std) init
        self.scalar.fill_(std * math.sqrt(max(self.weight.shape)))


class GPTOrth(GPT):
    linear = OrthLinear  # embeddings and LM head stay the baseline's

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for block in self.layers:
            block.norm_attn.freeze()  # see the module docstring
            block.norm_mlp.freeze()


@dataclass
class OrthRecipe(MultiplierRecipe):
    def post_step(self, model: nn.Module) -> None:
        for module in model.modules():
            if isinstance(module, OrthLinear):
                module.weight.data.copy_(polar_factor(module.weight.data))
