"""The effective matrix: one definition for every arm, formed in float64.

The effective matrix of a weight is the linear map the forward pass applies to its normalised input:

    W_eff = diag(s_out) · W · diag(g)

- W: the matrix the module multiplies by, as the arm parametrises it (the module's `effective_weight`:
  gpt-lrm diag(r) W~ diag(c), gpt-scalar and gpt-orth s W~, gpt-pc its PC layer's ||W|| Y / ||Y||, the plain
  parameter otherwise), recomputed from the parameters in float64 so a product of multipliers adds no float32
  rounding (an error of ~kappa x 1.2e-7 would be percent level at kappa 1e6);
- g: the gain of the RMSNorm in front of the matrix, whose output x / rms(x) is the normalised input
  (q, k, v: the block's norm_attn; mlp u, v: norm_mlp; the LM head: norm_out). nGPT has no norm layer: its
  hidden state is already unit norm, g = 1;
- s_out: a per-output scale applied right after the product, before any non-linearity or normalisation:
  nGPT's s_u for mlp u and s_v sqrt(d_model) for mlp v (paper Section 2.4.2), s_z for the logits
  (Section 2.1).

Left out, because they are not part of a linear map of the normalised input: nGPT's s_qk (applied after
Norm(q), Section 2.3.2), gpt-qknorm's per-head q/k RMSNorm gains (after the normalisation of q and k) and
the eigen learning rates alpha (on the residual update, eqs. 10-11). gpt-rownorm and gpt-orth freeze their
RMSNorm gains at 1, so their effective maps are their constrained matrices.
Embeddings are a lookup: their effective matrix is the table as the arm scales it (W), with no input norm.

The raw parameter (`underlying`) is analysed as a second variant, for every arm.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

import torch
from torch import Tensor, nn

from ngptlab.models.layers import MatrixInfo

# Matrix path (inside a block, or at the top) -> the RMSNorm whose output it multiplies, on the same parent.
INPUT_NORM = {"attn.q": "norm_attn", "attn.k": "norm_attn", "attn.v": "norm_attn",
              "mlp.u": "norm_mlp", "mlp.v": "norm_mlp", "embed_out": "norm_out"}


def _split(name: str) -> tuple[str, str]:
    """'layers.2.attn.q' -> ('layers.2', 'attn.q'); 'embed_out' -> ('', 'embed_out')."""
    parts = name.split(".")
    if parts[0] == "layers":
        return ".".join(parts[:2]), ".".join(parts[2:])
    return "", name


def _module(model: nn.Module, path: str) -> nn.Module | None:
    try:
        return model.get_submodule(path)
    except AttributeError:
        return None


def input_gain(model: nn.Module, name: str) -> Tensor | None:
    """g: the gain of the RMSNorm in front of matrix `name`, or None where there is none (or no gain)."""
    parent, path = _split(name)
    if path not in INPUT_NORM:
        return None
    norm = _module(model, ".".join(p for p in (parent, INPUT_NORM[path]) if p))
    gain = getattr(norm, "weight", None)
    return None if gain is None else gain.detach()


def output_scale(model: nn.Module, name: str) -> Tensor | None:
    """s_out: nGPT's per-output scales applied right after the product, or None (every other arm)."""
    parent, path = _split(name)
    mlp = _module(model, f"{parent}.mlp") if parent else None
    if path == "mlp.u" and hasattr(mlp, "s_u"):
        return mlp.s_u().detach()  # Section 2.4.2: u <- u s_u
    if path == "mlp.v" and hasattr(mlp, "s_v"):
        return (mlp.s_v() * mlp.v_gain).detach()  # Section 2.4.2: v <- v s_v sqrt(d_model)
    if path == "embed_out" and hasattr(model, "s_z"):
        return model.s_z().detach()  # Section 2.1: z <- z s_z
    return None


def _f64(t: Tensor | None) -> Tensor | None:
    return None if t is None else t.detach().to(torch.float64)


def effective_matrix(model: nn.Module, name: str) -> Tensor:
    """W_eff of matrix `name` in float64 (the module docstring). The model itself is left as it was."""
    module64 = copy.deepcopy(model.get_submodule(name)).to(torch.float64)  # its multipliers in float64 too
    weight = module64.effective_weight().detach()
    scale, gain = _f64(output_scale(model, name)), _f64(input_gain(model, name))
    if scale is not None:
        weight = scale[:, None] * weight
    if gain is not None:
        weight = weight * gain[None, :]
    return weight


@torch.no_grad()
def effective_matrices(model: nn.Module) -> Iterator[MatrixInfo]:
    """Every matrix of `model` (model.matrices() order) with `weight` = W_eff and `underlying` = the raw
    parameter, both float64; one at a time, so a large model never has all of them in float64 at once.
    The embeddings lose their pad rows (a vocabulary padded for speed): those rows are never a token."""
    for info in model.matrices():
        weight, underlying = effective_matrix(model, info.name), _f64(model.get_submodule(info.name).weight)
        if info.kind in ("embed_in", "embed_out"):
            weight, underlying = model.token_rows(weight), model.token_rows(underlying)
        yield MatrixInfo(name=info.name, kind=info.kind, layer=info.layer, weight=weight,
                         underlying=underlying, norm_dim=info.norm_dim, n_heads=info.n_heads)
