"""gpt-orth's projection: fixed float32 Newton-Schulz iterations, the orthogonality check and its exact
fallback, and the orthogonal init. Tiny shapes, CPU."""

from __future__ import annotations

import logging

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ngptlab.models.gpt_orth import (
    TOLERANCE,
    GPTOrth,
    OrthLinear,
    OrthogonalityError,
    OrthRecipe,
    polar_factor,
    project_orthogonal_,
    stored_tolerance,
)
from ngptlab.models.registry import build_seeded
from ngptlab.models.scales import SCALES

torch.set_num_threads(1)  # the 2 cores are shared; more threads only contend

VOCAB, CONTEXT = 61, 32


def tiny(seed: int = 0):
    return build_seeded("gpt-orth", "cpu-4l", VOCAB, CONTEXT, seed=seed)


def orth_modules(model) -> dict[str, OrthLinear]:
    return {name: m for name, m in model.named_modules() if isinstance(m, OrthLinear)}


def adamw_steps(model, recipe, steps: int, lr: float) -> None:
    opt = torch.optim.AdamW(recipe.param_groups(model, lr), betas=recipe.betas, eps=recipe.eps)
    g = torch.Generator().manual_seed(0)
    for _ in range(steps):
        idx = torch.randint(0, VOCAB, (4, CONTEXT + 1), generator=g)
        _, loss = model(idx[:, :-1], idx[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(recipe.clip_parameters(model), 1.0)
        opt.step()
        recipe.post_step(model)


def kappa(w: torch.Tensor) -> float:
    sv = torch.linalg.svdvals(w.double())
    return (sv.max() / sv.min()).item()


def gram_error64(w: torch.Tensor) -> float:
    q = w.double() if w.shape[0] >= w.shape[1] else w.double().T
    return torch.linalg.matrix_norm(q.T @ q - torch.eye(q.shape[1], dtype=torch.float64)).item()


def planted(shape, singular_values, seed: int = 0) -> torch.Tensor:
    """U diag(s) V^T with random orthonormal U, V: a float32 matrix with exactly these singular values."""
    g = torch.Generator().manual_seed(seed)
    m, n = shape
    k = min(m, n)
    u = torch.linalg.qr(torch.randn(m, k, generator=g, dtype=torch.float64))[0]
    v = torch.linalg.qr(torch.randn(n, k, generator=g, dtype=torch.float64))[0]
    return (u * torch.as_tensor(singular_values, dtype=torch.float64)) @ v.T


@pytest.mark.parametrize("lr", [1e-3, 1e-2])
def test_kappa_is_one_within_the_tolerance_after_real_adamw_steps(lr):
    model, recipe = tiny()
    adamw_steps(model, recipe, steps=3, lr=lr)
    modules = orth_modules(model)
    assert len(modules) == 4 * 7
    for name, m in modules.items():
        # ||Q^T Q - I||_F <= tol puts every sigma^2 within tol of 1, so kappa - 1 <= tol (to first order)
        assert kappa(m.weight) - 1 <= TOLERANCE, name
        assert kappa(m.effective_weight()) - 1 <= TOLERANCE, name
    assert model.orth_fallbacks == 0  # the fixed iterations alone sufficed
    assert 0 < model.orth_error <= TOLERANCE


@pytest.mark.parametrize("shape", [(64, 64), (256, 64), (64, 256)])
def test_fixed_iterations_match_the_exact_polar_factor(shape):
    # as after an AdamW step: an orthogonal matrix moved by lr * sign(noise), lr = 1e-2 (sigma in ~0.8..1.2)
    g = torch.Generator().manual_seed(1)
    q = planted(shape, torch.ones(min(shape)), seed=2).float()
    w = q + 1e-2 * torch.randn(shape, generator=g).sign()
    exact = polar_factor(w.double())
    weights = [w.clone(), (w * 3).clone()]  # the projection ignores scale
    failed, error = project_orthogonal_(weights, ["a", "b"])
    assert failed == [] and error <= TOLERANCE
    for x in weights:
        torch.testing.assert_close(x.double(), exact, rtol=0, atol=TOLERANCE)
        assert gram_error64(x) <= TOLERANCE


def test_polar_factor_is_the_svd_one():
    w = planted((48, 32), torch.linspace(0.1, 5, 32), seed=3)
    u, _, vh = torch.linalg.svd(w, full_matrices=False)
    torch.testing.assert_close(polar_factor(w), u @ vh, rtol=0, atol=1e-12)


def test_a_singular_value_above_sqrt3_is_not_flipped():
    # One sigma far above the rest: an unguarded first iteration would map it below 0, and the iteration
    # would converge to an orthogonal matrix that is not the polar factor.
    sv = torch.ones(64)
    sv[0] = 3.0
    w = planted((128, 64), sv, seed=4).float()
    weights = [w.clone()]
    project_orthogonal_(weights)
    torch.testing.assert_close(weights[0].double(), polar_factor(w.double()), rtol=0, atol=TOLERANCE)


def test_spread_singular_values_fall_back_to_the_exact_projection_and_are_counted(caplog):
    model, recipe = tiny()
    name = "layers.1.mlp.u"
    target = orth_modules(model)[name].weight
    w = planted(tuple(target.shape), torch.logspace(-3, 0.5, min(target.shape)), seed=5).float()
    with torch.no_grad():
        target.copy_(w)
    with caplog.at_level(logging.WARNING, logger="ngptlab.models.gpt_orth"):
        recipe.post_step(model)
    assert model.orth_fallbacks == 1
    assert name in caplog.text and "fell back" in caplog.text
    assert gram_error64(target) <= TOLERANCE and model.orth_error <= TOLERANCE
    torch.testing.assert_close(target.double(), polar_factor(w.double()), rtol=0, atol=1e-5)
    # the other matrices were projected by the iterations alone
    failed, _ = project_orthogonal_([w.clone()], ["planted"])
    assert failed == ["planted"]


def test_a_matrix_that_cannot_be_projected_raises_naming_it():
    model, recipe = tiny()
    with torch.no_grad():
        orth_modules(model)["layers.2.attn.k"].weight[3, 5] = float("nan")
    with pytest.raises(OrthogonalityError, match=r"layers\.2\.attn\.k: NaN or inf"):
        recipe.post_step(model)


def test_a_matrix_the_exact_projection_cannot_bring_within_the_tolerance_raises():
    # float32 holds U V^T only to its round-off: even the float64 SVD's result, rounded, misses 1e-9
    w = planted((64, 64), torch.linspace(0.9, 1.1, 64)).float()
    with pytest.raises(OrthogonalityError, match=r"low: .* after the exact projection, over the tolerance"):
        project_orthogonal_([w], ["low"], tol=1e-9)


def test_a_bf16_matrix_is_held_to_bf16s_round_off():
    # bf16 holds U V^T only to ~4e-3 an entry: its tolerance is 4 u sqrt(n) = 0.125 at n = 64, not 1e-4
    w = planted((64, 64), torch.linspace(0.9, 1.1, 64)).to(torch.bfloat16)
    assert stored_tolerance(w) == pytest.approx(4 * 2**-8 * 8) and stored_tolerance(w.float()) == 1e-4
    failed, error = project_orthogonal_([w], ["low"])
    assert failed == [] and 0.005 < error < 0.05  # above float32's tolerance, at bf16's floor


def test_the_caller_matmul_precision_is_kept():
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        weights = [planted((32, 32), torch.linspace(0.9, 1.1, 32)).float()]
        assert project_orthogonal_(weights)[0] == []
        assert torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision(before)


def test_init_is_orthogonal_deterministic_for_a_seed_and_only_checked_by_the_build():
    a, _ = tiny(seed=0)
    b, _ = tiny(seed=0)
    c, _ = tiny(seed=1)
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert torch.equal(x, y), name
    q = a.layers[0].attn.q.weight
    assert not torch.equal(q, c.layers[0].attn.q.weight)
    assert a.orth_fallbacks == 0 and a.orth_error <= 1e-5
    for name, m in orth_modules(a).items():
        assert not m.fresh and gram_error64(m.weight) <= 1e-5, name
    # the build's projection only checks the QR factors: it leaves every bit of Q as the init drew it
    torch.manual_seed(0)
    fresh = GPTOrth(SCALES["cpu-4l"], VOCAB, CONTEXT)
    drawn = {name: m.weight.clone() for name, m in orth_modules(fresh).items()}
    OrthRecipe().post_step(fresh)
    for name, m in orth_modules(fresh).items():
        assert torch.equal(m.weight, drawn[name]), name


class QrDevices(TorchDispatchMode):
    """The devices of every QR factorisation run under it (torch's own dispatch, no stand-in)."""

    def __init__(self) -> None:
        super().__init__()
        self.devices: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket is torch.ops.aten.linalg_qr:
            self.devices.append(args[0].device.type)
        return func(*args, **(kwargs or {}))


def test_the_init_factorises_on_the_requested_device_and_a_cpu_build_keeps_its_bytes():
    torch.manual_seed(0)
    reference, _ = build_seeded("gpt-orth", "cpu-4l", VOCAB, CONTEXT, seed=0)
    with QrDevices() as seen:
        on_cpu, _ = build_seeded("gpt-orth", "cpu-4l", VOCAB, CONTEXT, seed=0,
                                 init_device=torch.device("cpu"))
    assert seen.devices and set(seen.devices) == {"cpu"}
    for (name, x), (_, y) in zip(reference.state_dict().items(), on_cpu.state_dict().items(), strict=True):
        assert torch.equal(x, y), name
    # asked for another device, the QR runs there (the draws stay on the CPU generator); a meta tensor has
    # no values to copy back, which is where the build stops
    with QrDevices() as seen, pytest.raises(NotImplementedError, match="meta"):
        build_seeded("gpt-orth", "cpu-4l", VOCAB, CONTEXT, seed=0, init_device=torch.device("meta"))
    assert seen.devices == ["meta"]
