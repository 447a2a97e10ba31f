"""gpt-orth: the baseline GPT whose attention and MLP matrices are kept at W = s Q, Q (semi-)orthogonal.

Design role: the {norm learned, conditioning fixed} corner of the 2x2 (gpt / gpt-rownorm / gpt-orth / ngpt):
every singular value of every attention and MLP matrix equals the one learnable scalar |s|, so
kappa(W) = 1 throughout training. s is optimised like gpt-scalar's (weight decay 2e-3, outside gradient
clipping). Embeddings are the baseline's. The weight decay on Q is a no-op: it shrinks Q uniformly and the
projection ignores scale.

Projection, after every optimizer step (`project_orthogonal_`): Q is replaced by its polar factor U V^T
(Q = U S V^T), the nearest (semi-)orthogonal matrix, by NS_ITERATIONS = 4 Newton-Schulz iterations
X <- X (3 I - X^T X) / 2 in float32, with no host sync inside: matrices of one shape (taken on their tall
side) are stacked and iterated as one batch (`newton_schulz`). Matmul precision is forced to "highest"
and autocast off around it, so neither TF32 nor bf16 enters (TF32's unit round-off, 2^-11 ~ 4.9e-4, is
above the tolerance itself). Before the first iteration X is scaled to mean sigma^2 = 1 and, where a
bound on its largest sigma^2 exceeds 2.9, further down: the iteration sends a sigma^2 > 3 negative (an
orthogonal result that is not the polar factor). Tall matrices (m >= 2n: the MLP's) run the first
iterations in n x n space and the last on X itself.

The count: after an AdamW step the singular values start near 1 and the error ||X^T X - I||_F roughly
squares each iteration. Measured after real AdamW steps of this arm (no warmup, so the first step is
Adam's largest, every entry moved by lr), the worst matrix after k = 0, 1, 2, 3, 4 iterations:
  cpu-4l (d 64),  lr 2e-2, step 1:  1.9, 5.4e-1, 8.1e-2, 3.2e-3, 7.4e-6
  cpu-8l (d 128), lr 1e-2, step 1:  1.9, 5.1e-1, 8.1e-2, 3.0e-3, 6.5e-6;  lr 1e-3: 1.8e-1, 5.1e-3, 8.2e-6
  gpu-small (d 768), lr 1e-3, step 1:  1.1, 1.4e-1, 4.4e-3, 1.3e-5, 8.3e-6
so 4 iterations reach the float32 round-off floor (~1e-6 at d 64..128, ~7e-6 at 768, ~6e-6 for 5120 x
1280) at the top of the CPU grids' learning rates. Not enough for wide matrices at a large lr without
warmup: d 768 at lr 3e-3 needs 6 on the first step and 5 on the next two (lr 1e-2: over 7); those
matrices take the fallback below, counted. Each further iteration costs ~1.3% of a cpu-8l step.

Check: every stored Q's e = ||Q^T Q - I||_F, computed on the device for every matrix and read once per
projection (one host sync per step: N = 1), against TOLERANCE = 1e-4. The Frobenius norm bounds the
spectral one, so every sigma^2 of Q lies in [1 - e, 1 + e] and kappa(W) = kappa(Q) <= sqrt((1 + e) /
(1 - e)) = 1 + e + O(e^2): kappa - 1 <= 1e-4, what "kappa = 1" means here; 1e-4 is 15x the float32
floor at the 1B shape, so round-off never trips it. A matrix over the tolerance (NaN included) is not
written: it keeps its input and falls back to the exact polar factor, a float64 SVD (`polar_factor`);
one with NaN or inf entries, or that even the SVD leaves over the tolerance, raises OrthogonalityError
naming it. Fallbacks are counted on the model (`orth_fallbacks`, over all post-steps, and `orth_error`,
the largest e after the last) and logged as a warning naming the matrices. Holding the results until
the sync costs one float32 copy of the constrained matrices while projecting (at 1B ~3.8 GB).

Init: Q is the Q factor of a Gaussian's thin QR (torch.linalg.qr in float32, R's diagonal made positive:
Haar-distributed, and deterministic for the seed since drawn from torch's generator), s so that ||s Q||_F
equals the Frobenius norm gpt's init would give. The build's projection only checks these (no
iterations), as QR leaves them orthogonal to round-off.

The RMSNorm gains in front of the attention and MLP (norm_attn, norm_mlp) are frozen at 1: with a learnable
gain g the map applied to the normalised input is s Q diag(g), whose condition number is that of diag(g)
(1.03-1.10 after a few steps), so "conditioning fixed" would hold for the raw matrix only. The final norm
before the LM head keeps its gain, as the LM head is the baseline's.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ngptlab.models import init_device
from ngptlab.models.gpt import GPT
from ngptlab.models.gpt_lrm import MultiplierRecipe
from ngptlab.models.gpt_scalar import ScaledLinear

NS_ITERATIONS = 4  # Newton-Schulz iterations per step, fixed (the module docstring's measurements)
TOLERANCE = 1e-4  # largest ||Q^T Q - I||_F accepted (float32); kappa(W) - 1 <= it to first order
FIRST_GRAM_MAX = 2.9  # the first iteration's Gram is scaled to eigenvalues <= this (< 3: no sign flip)
CHUNK_ELEMENTS = 1 << 27  # matrices stacked per batch: at most 128 Mi floats (512 MiB) at a time

log = logging.getLogger(__name__)


class OrthogonalityError(RuntimeError):
    """A gpt-orth matrix that not even the exact projection brings within TOLERANCE."""


@contextlib.contextmanager
def _exact_float32(device: torch.device) -> Iterator[None]:
    """float32 matmuls as IEEE float32: no TF32 (or bf16) inside, no autocast, whatever the caller set."""
    precision = torch.get_float32_matmul_precision()
    if precision != "highest":
        torch.set_float32_matmul_precision("highest")
    try:
        with torch.autocast(device.type, enabled=False):
            yield
    finally:
        if precision != "highest":
            torch.set_float32_matmul_precision(precision)


def _tall(w: Tensor) -> Tensor:
    """Iterate on the tall side, so the Gram matrix X^T X is the smaller square."""
    return w if w.shape[0] >= w.shape[1] else w.T


def stored_tolerance(w: Tensor, tol: float = TOLERANCE) -> float:
    """The tolerance for a Q stored as `w`: `tol` in float32. Weights stored in bf16
    (train.weight_dtype) cannot hold an orthogonal matrix that closely: rounding an exactly orthogonal Q
    alone leaves e ~ 0.6 u sqrt(n) (u the dtype's unit round-off, 2^-8 in bf16, n the columns; measured
    0.60 for square Q, 0.30 for 4:1 ones), 0.084 at n = 1280; there the tolerance is 4 u sqrt(n), above
    that floor, and kappa - 1 <= e still holds to first order."""
    if w.dtype in (torch.float32, torch.float64):
        return tol
    return max(tol, 4 * torch.finfo(w.dtype).eps / 2 * math.sqrt(_tall(w).shape[1]))


def orthogonality_error(q: Tensor) -> Tensor:
    """||Q^T Q - I||_F over the smaller side, in q's dtype; q [m, n] or a batch [b, m, n] with m >= n."""
    eye = torch.eye(q.shape[-1], dtype=q.dtype, device=q.device)
    return torch.linalg.matrix_norm(q.mT @ q - eye)


@torch.no_grad()
def polar_factor(w: Tensor) -> Tensor:
    """The exact polar factor U V^T of w = U S V^T, by an SVD in float64, returned in w's dtype.

    Any finite w has one (w rank-deficient: U V^T is still orthogonal, one of several nearest); a
    non-finite w raises OrthogonalityError.
    """
    if w.is_meta:
        return w
    if not bool(torch.isfinite(w).all()):
        raise OrthogonalityError("cannot project a matrix with NaN or inf entries")
    u, _, vh = torch.linalg.svd(w.double(), full_matrices=False)
    return (u @ vh).to(w.dtype)


def newton_schulz(x: Tensor, iterations: int = NS_ITERATIONS) -> Tensor:
    """The polar factor of each matrix of x [b, m, n] (m >= n, float32) by a fixed number (>= 1) of
    Newton-Schulz iterations X <- X (3 I - X^T X) / 2; no host sync. Callers check the result
    (orthogonality_error)."""
    if iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    n = x.shape[-1]
    eye = torch.eye(n, dtype=x.dtype, device=x.device)
    gram = x.mT @ x
    # Centre the spectrum, X_0 = sqrt(c) X: mean sigma^2 = tr(G) / n = 1 (the polar factor is scale-free).
    c = n / torch.diagonal(gram, dim1=-2, dim2=-1).sum(-1)[:, None, None]
    gram = gram * c
    # Each iteration maps sigma to sigma (3 - sigma^2) / 2: quadratic convergence to 1 from (0, sqrt 3), but a
    # sigma^2 > 3 turns negative, converging to an orthogonal matrix that is not the polar factor. So bound
    # lambda_max(G) <= 1 + ||(G - I)^2||_F^(1/2) (as ||E^2||_F >= lambda_max(E)^2) and, where the bound
    # exceeds FIRST_GRAM_MAX, shrink X_0 to meet it. After the first iteration every sigma is <= 1.
    g2 = gram @ gram
    e2 = g2 - 2 * gram + eye  # (G - I)^2
    shrink = (FIRST_GRAM_MAX / (1 + torch.linalg.matrix_norm(e2).sqrt())).clamp(max=1.0)[:, None, None]
    gram, g2 = gram * shrink, g2 * shrink.square()
    root = (c * shrink).sqrt()  # X_0 = root X, folded into the first iteration's small factor
    m = torch.add(1.5 * eye, gram, alpha=-0.5)  # M_0 = 1.5 I - 0.5 G_0, so X_1 = X_0 M_0
    if x.shape[-2] >= 2 * n and iterations >= 2:
        # Tall (m >= 2n): the first iterations in n x n space, X_j = X P_j with P_j = root M_0 ... M_j-1
        # and G_j = X_j^T X_j = M_j-1 G_j-1 M_j-1 (all polynomials in G_0, so they commute): 3 n^3 an
        # iteration instead of 4 m n^2. The last one on X itself, with its true Gram, corrects the
        # recurrences' round-off (without it the floor is ~5x higher: 2.5e-5..5.5e-5 at 5120 x 1280).
        p = root * m
        # G_1 = G_0 M_0^2 = 2.25 G_0 - 1.5 G_0^2 + 0.25 G_0^3, reusing G_0^2 from the bound
        gram = torch.baddbmm(2.25 * gram - 1.5 * g2, gram, g2, alpha=0.25)
        for j in range(iterations - 2):
            if j:
                gram = m @ gram @ m
            m = torch.add(1.5 * eye, gram, alpha=-0.5)
            p = p @ m
        x = _times(x, p)
        return _times(x, torch.add(1.5 * eye, x.mT @ x, alpha=-0.5))
    x = _times(x, root * m)
    for _ in range(iterations - 1):
        x = _times(x, torch.add(1.5 * eye, x.mT @ x, alpha=-0.5))  # X <- X (1.5 I - 0.5 X^T X)
    return x


def _times(x: Tensor, small: Tensor) -> Tensor:
    """x @ small for x [b, m, n], small [b, n, n]: baddbmm with beta 0 (input ignored), on CPU ~1.5x
    faster than bmm for tall x, and no copy of x as baddbmm with beta != 0 makes."""
    return torch.baddbmm(x, x, small, beta=0.0)


def _chunks(weights: Sequence[Tensor]) -> Iterator[list[int]]:
    """Indices of weights to stack together: one tall shape, dtype and device, at most CHUNK_ELEMENTS."""
    groups: dict[tuple, list[int]] = {}
    for i, w in enumerate(weights):
        groups.setdefault((tuple(_tall(w).shape), w.dtype, w.device), []).append(i)
    for (shape, _, _), indices in groups.items():
        per_chunk = max(1, CHUNK_ELEMENTS // math.prod(shape))
        for start in range(0, len(indices), per_chunk):
            yield indices[start:start + per_chunk]


@torch.no_grad()
def project_orthogonal_(weights: Sequence[Tensor], names: Sequence[str] | None = None,
                        iterations: int = NS_ITERATIONS, tol: float = TOLERANCE) -> tuple[list[str], float]:
    """Replace every matrix in `weights` (in place) by its polar factor; iterations=0 checks only.

    Returns the names of the matrices that fell back to the exact projection and the largest error
    ||Q^T Q - I||_F of the stored results. One host sync in all (the errors), however many matrices.
    """
    weights = list(weights)
    names = list(names) if names is not None else [f"matrix {i}" for i in range(len(weights))]
    if not weights or any(w.is_meta for w in weights):
        return [], 0.0
    # Project chunk by chunk, holding each result (one copy of the matrices in all) until the one host
    # sync: a matrix over the tolerance is then never written and keeps its input for the fallback.
    results: list[tuple[list[int], Tensor | None]] = []
    errors: list[Tensor] = []
    for indices in _chunks(weights):
        first = weights[indices[0]]
        with _exact_float32(first.device):
            x = torch.stack([_tall(weights[i]) for i in indices]).float()
            if iterations:
                x = newton_schulz(x, iterations).to(first.dtype)  # as the parameter will hold it
            errors.append(orthogonality_error(x.float()))
        results.append((indices, x if iterations else None))
    order = [i for indices, _ in results for i in indices]
    measured = dict(zip(order, torch.cat(errors).tolist(), strict=True))  # the one host sync
    tols = {i: stored_tolerance(weights[i], tol) for i in order}
    for indices, x in results:
        if x is not None:
            for row, i in enumerate(indices):
                if measured[i] <= tols[i]:  # False for NaN too
                    weights[i].copy_(x[row] if _tall(weights[i]) is weights[i] else x[row].T)
    del results
    failed = [i for i, e in measured.items() if not e <= tols[i]]
    for i in failed:
        w = weights[i]
        if not bool(torch.isfinite(w).all()):
            raise OrthogonalityError(f"{names[i]}: NaN or inf entries (Newton-Schulz error "
                                     f"{measured[i]:.3g})")
        w.copy_(polar_factor(w))  # float64 SVD: exact
        with _exact_float32(w.device):
            measured[i] = orthogonality_error(_tall(w).float()).item()
        if not measured[i] <= tols[i]:
            raise OrthogonalityError(f"{names[i]}: ||Q^T Q - I||_F = {measured[i]:.3g} after the exact "
                                     f"projection, over the tolerance {tols[i]:g}")
    if failed:
        log.warning("gpt-orth: %d of %d matrices fell back to the exact polar factor (Newton-Schulz error "
                    "over %g): %s", len(failed), len(weights), tol, ", ".join(names[i] for i in failed))
    return [names[i] for i in failed], max(measured.values())


def orthogonal_init_(weight: Tensor) -> None:
    """Q of the thin QR of a Gaussian matrix (float32; R's diagonal made positive, so Q is unique and
    Haar-distributed), drawn from torch's global generator: deterministic for a seed. The QR runs on the
    build's init device (models/init_device.py: the run's GPU, not one CPU thread per rank at 1B)."""
    tall = _tall(weight)
    g = torch.randn(tall.shape, dtype=torch.float32, device=weight.device)
    q, r = torch.linalg.qr(g.to(init_device.device_for(weight)))
    q *= torch.where(torch.diagonal(r) < 0, -1.0, 1.0)  # flip columns whose R_jj < 0
    tall.copy_(q)


class OrthLinear(ScaledLinear):
    """W = s Q; `weight` holds Q, which the recipe's post_step keeps (semi-)orthogonal."""

    fresh = False  # Q as orthogonal_init_ left it: the next projection only checks it

    def reset_parameters(self, std: float) -> None:
        if not self.weight.is_meta:
            orthogonal_init_(self.weight)
            self.fresh = True
        # ||s Q||_F^2 = s^2 min(out, in) equals E||W||_F^2 = std^2 out in of gpt's N(0, std) init
        self.scalar.fill_(std * math.sqrt(max(self.weight.shape)))

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight * self.scalar)  # x (s Q)^T: scales the matrix, not the activations


class GPTOrth(GPT):
    linear = OrthLinear  # embeddings and LM head stay the baseline's

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for block in self.layers:
            block.norm_attn.freeze()  # see the module docstring
            block.norm_mlp.freeze()
        self.orth_fallbacks = 0  # matrices that needed the exact projection, over every post_step so far
        self.orth_error = 0.0  # largest ||Q^T Q - I||_F after the last post_step


@dataclass
class OrthRecipe(MultiplierRecipe):
    def post_step(self, model: nn.Module) -> None:
        modules = [(name, m) for name, m in model.named_modules() if isinstance(m, OrthLinear)]
        error = 0.0
        # freshly initialised: check only; stepped: Newton-Schulz
        for fresh, chosen in ((True, [nm for nm in modules if nm[1].fresh]),
                              (False, [nm for nm in modules if not nm[1].fresh])):
            if not chosen:
                continue
            failed, worst = project_orthogonal_([m.weight for _, m in chosen], [name for name, _ in chosen],
                                                iterations=0 if fresh else NS_ITERATIONS)
            for _, m in chosen:
                m.fresh = False
            error = max(error, worst)
            model.orth_fallbacks = getattr(model, "orth_fallbacks", 0) + len(failed)
        model.orth_error = error
