"""One definition of the effective matrix for every arm (observe/effective.py): the linear map the forward
pass applies to its normalised input, formed in float64. Checked against a product built by hand in numpy
float64 from the raw parameters, and against the forward pass itself."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ngptlab.models.arms import names as arm_names
from ngptlab.models.registry import build
from ngptlab.observe.effective import effective_matrices

VOCAB = 96

# Which parts each arm's effective matrices have (the module docstring's W_eff = diag(s_out) W diag(g)):
# gain = the preceding RMSNorm gain g; rowcol = gpt-lrm's diag(r) W~ diag(c); scalar = s W~; s_out = nGPT's
# s_u, s_v sqrt(d), s_z; pc = gpt-pc's PC layer on W. An arm not listed gets the parts its modules have
# (see parts_of).
ARM_PARTS = {
    "gpt": {"gain"}, "gpt-nowd": {"gain"}, "gpt-rownorm": {"gain"},
    "gpt-lrm": {"gain", "rowcol"}, "gpt-scalar": {"gain", "scalar"}, "gpt-orth": {"gain", "scalar"},
    "ngpt": {"s_out"}, "gpt-qknorm": {"gain"}, "ngpt-freew": {"s_out"},
    "gpt-pc1": {"gain", "pc"}, "gpt-pc2": {"gain", "pc"}, "gpt-pc4": {"gain", "pc"},
}


def perturbed(arm: str) -> torch.nn.Module:
    """A cpu-4l model whose every parameter is moved off its init, so no gain or multiplier is 1."""
    torch.manual_seed(0)
    model, _ = build(arm, "cpu-4l", VOCAB, 32)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1 + 0.5 * torch.rand(p.shape, generator=gen))
    return model


def f64(t: torch.Tensor) -> np.ndarray:
    return t.detach().numpy().astype(np.float64)  # float32 -> float64 in numpy, exactly


def parts_of(model: torch.nn.Module) -> set[str]:
    mods = list(model.modules())
    found = set()
    if any(hasattr(m, "norm_attn") for m in mods):
        found.add("gain")
    if any(hasattr(m, "mult_row") for m in mods):
        found.add("rowcol")
    if any(hasattr(m, "scalar") for m in mods):
        found.add("scalar")
    if any(hasattr(m, "s_u") for m in mods):
        found.add("s_out")
    if any(getattr(m, "level", 0) for m in mods):
        found.add("pc")
    return found


def pc_by_svd(w: np.ndarray, level: int) -> np.ndarray:
    """gpt-pc's W_eff on the spectrum: each sigma / ||W||_F mapped `level` times by sigma (1.507 - 0.507
    sigma^2), rescaled to ||W||_F (float64 SVD; models/gpt_pc.py forms it by matrix products)."""
    u, s, vh = np.linalg.svd(w, full_matrices=False)
    t = s / np.linalg.norm(s)
    for _ in range(level):
        t = t * (1.507 - 0.507 * t**2)
    return (u * (t * np.linalg.norm(s) / np.linalg.norm(t))) @ vh


def hand_built(model: torch.nn.Module, name: str) -> np.ndarray:
    """diag(s_out) W diag(g), every factor taken from the float32 parameters and multiplied in float64."""
    module = model.get_submodule(name)
    w = f64(module.weight)
    if getattr(module, "level", 0):
        w = pc_by_svd(w, module.level)
    if hasattr(module, "mult_row"):
        w = f64(module.mult_row)[:, None] * w * f64(module.mult_col)[None, :]
    if hasattr(module, "scalar"):
        w = f64(module.scalar) * w
    parent = ".".join(name.split(".")[:2]) if name.startswith("layers.") else ""
    path = name[len(parent) + 1:] if parent else name
    at = (lambda rel: model.get_submodule(f"{parent}.{rel}")) if parent else model.get_submodule
    gain = {"attn.q": "norm_attn", "attn.k": "norm_attn", "attn.v": "norm_attn", "mlp.u": "norm_mlp",
            "mlp.v": "norm_mlp", "embed_out": "norm_out"}.get(path)
    if gain is not None and (parent and hasattr(model.get_submodule(parent), gain) or hasattr(model, gain)):
        w = w * f64(at(gain).weight)[None, :]
    d = model.scale.d_model
    if path == "mlp.u" and hasattr(at("mlp"), "s_u"):
        s = at("mlp").s_u
        w = (f64(s.weight) * (s.init / s.scale))[:, None] * w
    if path == "mlp.v" and hasattr(at("mlp"), "s_v"):
        s = at("mlp").s_v
        w = (f64(s.weight) * (s.init / s.scale) * math.sqrt(d))[:, None] * w
    if path == "embed_out" and hasattr(model, "s_z"):
        w = (f64(model.s_z.weight) * (model.s_z.init / model.s_z.scale))[:, None] * w
    return w


@pytest.mark.parametrize("arm", arm_names())
def test_effective_matrix_is_the_hand_built_float64_product(arm):
    model = perturbed(arm)
    if arm in ARM_PARTS:
        assert parts_of(model) == ARM_PARTS[arm]
    infos = list(effective_matrices(model))
    assert [i.name for i in infos] == [i.name for i in model.matrices()]
    for info in infos:
        assert info.weight.dtype == torch.float64 and info.underlying.dtype == torch.float64
        expected = hand_built(model, info.name)
        # the PC layer's products and the SVD agree to float64 round-off of the largest entry, not per entry
        atol = 1e-13 * np.abs(expected).max() if getattr(model.get_submodule(info.name), "level", 0) else 0
        np.testing.assert_allclose(info.weight.numpy(), expected, rtol=1e-13, atol=atol, err_msg=info.name)
        # the second variant is the raw parameter, untouched
        np.testing.assert_array_equal(info.underlying.numpy(), f64(model.get_submodule(info.name).weight))
    assert next(model.parameters()).dtype == torch.float32  # the model itself is left as it was


@pytest.mark.parametrize("arm", arm_names())
def test_effective_matrix_is_what_the_forward_pass_applies(arm):
    """Run the model: the query of block 0 and the logits equal W_eff times the normalised input
    (x / rms(x) where a norm layer precedes, the unit hidden state in nGPT). The forward pass runs in
    float32, hence the float32-level tolerance: a missing gain or scale would be off by ~50%."""
    model = perturbed(arm)
    eff = {i.name: i.weight for i in effective_matrices(model)}
    seen = {}
    block = model.layers[0]
    q_input = block.norm_attn if hasattr(block, "norm_attn") else block.attn.q
    head_input = model.norm_out if hasattr(model, "norm_out") else model.embed_out
    q_input.register_forward_hook(lambda m, args, out: seen.__setitem__("x_q", args[0]))
    block.attn.q.register_forward_hook(lambda m, args, out: seen.__setitem__("q", out))
    head_input.register_forward_hook(lambda m, args, out: seen.__setitem__("x_head", args[0]))
    idx = torch.randint(0, VOCAB, (2, 16), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        logits, _ = model(idx)

    seen = {key: value.double() for key, value in seen.items()}
    logits = logits.double()

    def normalised(x: torch.Tensor, norm: torch.nn.Module | None) -> torch.Tensor:
        return x if norm is None else x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm.eps)

    x_q = normalised(seen["x_q"], getattr(block, "norm_attn", None))
    torch.testing.assert_close(seen["q"], x_q @ eff["layers.0.attn.q"].T, rtol=1e-4, atol=1e-6)
    x_head = normalised(seen["x_head"], getattr(model, "norm_out", None))
    torch.testing.assert_close(logits, x_head @ eff["embed_out"].T, rtol=1e-4, atol=1e-6)
