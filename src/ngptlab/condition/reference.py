"""Two references for every headline condition number, so a difference between arms is not read as learned
when it is the initialisation or merely the matrix's shape.

- init: the same matrices at step 0 of the same run, rebuilt exactly as train builds them
  (models.registry.build_seeded: torch.manual_seed(seed), then build) and analysed like the trained ones.
- gaussian: the median condition number of i.i.d. Gaussian matrices of the same shape (seeded float64
  samples, cached per shape). For an m x n Gaussian (m >= n) the condition number concentrates near
  (1 + sqrt(n/m)) / (1 - sqrt(n/m)) (Marchenko-Pastur edges) when m >> n; a square one is heavy-tailed,
  kappa / n has median ~3.67 (Edelman 1988), e.g. ~235 at 64 x 64 (~226 measured at that finite size). A
  median of a heavy-tailed law needs many samples: 33 square 64 x 64 samples gave 341 with one seed and 243
  with another. So a square matrix gets as many samples as a fixed amount of SVD work buys (SV_WORK: 1024
  at 64 x 64), never fewer than 33 (from 1024 x 1024 on, where a 20% error in a reference for kappas that
  differ by orders of magnitude is tolerable) nor more than 1025; a non-square one (a head block, an MLP
  matrix) concentrates and takes 33. Covariance condition numbers take the covariance of a Gaussian
  [vocab, d] table, which concentrates too: 5 samples. The scale of a
  matrix does not change its kappa, so the init std does not matter here.

Each reference is a dict keyed like analyse.headline's condition-number keys (HEADLINE_SHAPES).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ngptlab.observe import metrics

GAUSSIAN_SEED = 0
SV_WORK = 2**28  # n^3 summed over the samples of one square n x n shape
SV_SAMPLES = (33, 1025)
COV_SAMPLES = 5


def gaussian_samples(quantity: str, rows: int, cols: int) -> int:
    """How many Gaussian samples the median of one shape takes (see the module docstring)."""
    if quantity == "cov":
        return COV_SAMPLES
    if quantity != "sv":
        raise ValueError(f"quantity must be 'sv' or 'cov', got {quantity!r}")
    low, high = SV_SAMPLES
    return max(low, min(high, SV_WORK // rows**3)) if rows == cols else low


def headline_shapes(d_model: int, n_head: int, d_mlp: int,
                    vocab_size: int) -> dict[str, tuple[str, int, int]]:
    """Headline condition-number key -> (quantity, rows, cols) of the matrix it is measured on:
    'sv' for a matrix's singular values, 'cov' for the covariance of a [rows, cols] table."""
    head = d_model // n_head
    shapes = {
        "embed_in_cov_condition": ("cov", vocab_size, d_model),
        "embed_out_cov_condition": ("cov", vocab_size, d_model),
        "attn_condition_median": ("sv", d_model, d_model),
        "attn_head_condition_median": ("sv", head, d_model),
        "mlp_condition_median": ("sv", d_mlp, d_model),
    }
    for layer in (3, 4):
        for kind in ("q", "k"):
            shapes[f"layer{layer}_{kind}_condition"] = ("sv", d_model, d_model)
            shapes[f"layer{layer}_{kind}_head_condition_median"] = ("sv", head, d_model)
    return shapes


@lru_cache(maxsize=64)
def gaussian_condition(quantity: str, rows: int, cols: int, samples: int | None = None,
                       seed: int = GAUSSIAN_SEED) -> float:
    """Median condition number of `samples` (default: gaussian_samples) seeded standard-Gaussian rows x cols
    matrices (or of their mean-centred covariance, quantity 'cov'), in float64; cached."""
    default = gaussian_samples(quantity, rows, cols)
    samples = default if samples is None else samples
    gen = np.random.default_rng([seed, rows, cols])  # one stream per shape: independent of call order
    kappas = []
    for _ in range(samples):
        x = gen.standard_normal((rows, cols))
        if quantity == "cov":
            values = np.linalg.eigvalsh(np.cov(x, rowvar=False))[::-1]
        else:
            values = np.linalg.svd(x, compute_uv=False)
        kappas.append(metrics.condition_number(np.clip(values, 0.0, None), singular_tol=0.0))
    return float(np.median(kappas))


def gaussian_reference(d_model: int, n_head: int, d_mlp: int, vocab_size: int) -> dict:
    """The conditioning JSON's reference.gaussian: for every headline condition-number key, the Gaussian
    median for its matrix shape (headline) and how many samples it took (samples)."""
    shapes = headline_shapes(d_model, n_head, d_mlp, vocab_size)
    return {"seed": GAUSSIAN_SEED,
            "samples": {key: gaussian_samples(*shape) for key, shape in shapes.items()},
            "headline": {key: gaussian_condition(*shape) for key, shape in shapes.items()}}
