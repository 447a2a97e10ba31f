"""gpt-pc: the PC layer's effective matrix against its formula on the spectrum (a dense SVD), the dial it
gives on kappa, the recovered norm, level 0 as gpt bit for bit, gradients and learning, and what the condition
stage reads. Tiny shapes, CPU."""

from __future__ import annotations

import pytest
import torch

from ngptlab.models.gpt import GPT
from ngptlab.models.gpt_pc import GPTPC, PC_A, PC_B, PCLinear, pc_weight
from ngptlab.models.layers import Embedding, Linear
from ngptlab.models.registry import build_seeded, load, lookup_arm
from ngptlab.models.scales import SCALES
from ngptlab.observe.effective import effective_matrices

torch.set_num_threads(1)  # the 2 cores are shared; more threads only contend

VOCAB, CONTEXT = 61, 32
ARMS = {"gpt-pc1": 1, "gpt-pc2": 2, "gpt-pc4": 4}


def planted(shape: tuple[int, int], singular_values: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """U diag(s) V^T with random orthonormal U, V (float64): exactly these singular values."""
    g = torch.Generator().manual_seed(seed)
    m, n = shape
    k = min(m, n)
    u = torch.linalg.qr(torch.randn(m, k, generator=g, dtype=torch.float64))[0]
    v = torch.linalg.qr(torch.randn(n, k, generator=g, dtype=torch.float64))[0]
    return (u * singular_values.to(torch.float64)) @ v.T


def power_law(k: int, alpha: float) -> torch.Tensor:
    """A trained-like decaying spectrum s_i = i^-alpha (kappa = k^alpha)."""
    return torch.arange(1, k + 1, dtype=torch.float64) ** -alpha


def by_svd(w: torch.Tensor, level: int) -> torch.Tensor:
    """The formula on the spectrum, independently of pc_weight's matrix products: W = U S V^T, each
    sigma / ||W||_F mapped `level` times by sigma -> sigma p(sigma^2), p(x) = 1.507 - 0.507 x, then the
    spectrum rescaled to W's Frobenius norm (float64)."""
    u, s, vh = torch.linalg.svd(w.double(), full_matrices=False)
    t = s / s.norm()
    for _ in range(level):
        t = t * (1.507 - 0.507 * t**2)
    return (u * (t * s.norm() / t.norm())) @ vh


def kappa(w: torch.Tensor) -> float:
    s = torch.linalg.svdvals(w.double())
    return (s.max() / s.min()).item()


def test_the_polynomial_is_the_papers_level_one():
    assert (PC_A, PC_B) == (1.507, 0.507)
    assert PC_A - PC_B == pytest.approx(1.0)  # p(1) = 1: sigma = 1 is a fixed point


@pytest.mark.parametrize("shape", [(64, 64), (256, 64), (64, 256), (128, 128)])
@pytest.mark.parametrize("level", [1, 2, 4])
def test_forward_matrix_is_the_formula_on_the_spectrum(shape, level):
    # a gpt-like float32 matrix: Gaussian (std 0.02) times a power-law spectrum
    g = torch.Generator().manual_seed(level)
    w = (torch.randn(shape, generator=g, dtype=torch.float64) * 0.02
         * power_law(shape[1], 0.5)[None, :]).float()
    got = pc_weight(w, level)
    assert got.dtype == torch.float32 and got.shape == w.shape
    expected = by_svd(w, level)
    torch.testing.assert_close(got.double(), expected, rtol=0, atol=2e-6 * expected.abs().max().item())
    # float64 in, float64 out (the condition stage's path): the formula to float64 round-off
    torch.testing.assert_close(pc_weight(w.double(), level), expected, rtol=0,
                               atol=1e-12 * expected.abs().max().item())


@pytest.mark.parametrize("level", [1, 2, 4])
def test_frobenius_norm_is_recovered(level):
    w = planted((256, 64), power_law(64, 1.0), seed=3).float() * 0.37
    assert torch.linalg.matrix_norm(pc_weight(w, level)).item() == pytest.approx(
        torch.linalg.matrix_norm(w).item(), rel=1e-6)


# kappa(W_eff) at levels 0, 1, 2, 4 of planted power-law spectra (the module docstring's table); the map acts
# on the spectrum alone, so 64 x 64 and 256 x 64 (d 64), 128 x 128 and 512 x 128 (d 128) agree.
DIAL = {
    (64, 0.5): (8.0, 7.4, 6.4, 3.4),
    (64, 1.0): (64.0, 50.8, 35.8, 15.9),
    (128, 0.5): (11.3, 10.6, 9.3, 5.1),
    (128, 1.0): (128.0, 101.7, 71.7, 31.8),
}


@pytest.mark.parametrize(("d", "alpha"), DIAL)
@pytest.mark.parametrize("mlp", [False, True], ids=["square", "mlp"])
def test_kappa_falls_strictly_with_the_level(d, alpha, mlp):
    w = planted((4 * d, d) if mlp else (d, d), power_law(d, alpha), seed=d).float()
    kappas = [kappa(pc_weight(w, level)) for level in (0, 1, 2, 4)]
    assert kappas == pytest.approx(DIAL[d, alpha], abs=0.06)
    assert kappas[0] > kappas[1] > kappas[2] > kappas[3] > 1


def test_a_wide_matrix_is_the_transpose_of_its_tall_one():
    w = planted((64, 256), power_law(64, 0.7), seed=5).float()
    torch.testing.assert_close(pc_weight(w, 2), pc_weight(w.T.contiguous(), 2).T, rtol=1e-6, atol=1e-7)


def test_many_levels_approach_the_polar_factor():
    w = planted((128, 64), power_law(64, 0.5), seed=6)  # kappa 8
    out = pc_weight(w, 12)
    s = torch.linalg.svdvals(out)
    assert kappa(out) < 1 + 1e-6 and s.max().item() == pytest.approx(w.norm().item() / 8, rel=1e-6)


def test_bad_levels_are_refused():
    w = torch.ones(4, 4)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="PC level must be a non-negative integer"):
            pc_weight(w, bad)


def test_the_gram_side_runs_in_float32_under_bf16_autocast():
    # sigmas at 1/40 of the top: a bf16 Gram would round their sigma^2 (1/1600 of the top's) away
    w = planted((256, 64), torch.logspace(0, -1.6, 64), seed=7).float()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = pc_weight(w, 2)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), by_svd(w, 2), rtol=0, atol=2e-6 * w.abs().max().item())


def test_the_arms_build_pc_models_at_their_levels():
    for arm, level in ARMS.items():
        model, recipe = build_seeded(arm, "cpu-4l", VOCAB, CONTEXT, seed=0)
        assert type(model).level == level and type(recipe).__name__ == "Recipe"
        assert lookup_arm(arm).train.warmup and recipe.weight_decay == 0.1
        pcs = [m for m in model.modules() if isinstance(m, PCLinear)]
        assert len(pcs) == 7 * 4 and all(m.level == level for m in pcs)
        assert type(model.embed_in) is Embedding and type(model.embed_out) is Linear  # the baseline's
        assert load(lookup_arm(arm).train.model).__mro__[1] is GPTPC


def _pair(level: int) -> tuple[GPT, GPT]:
    torch.manual_seed(0)
    gpt = GPT(SCALES["cpu-4l"], VOCAB, CONTEXT)
    torch.manual_seed(0)
    pc = type("GPTPCTest", (GPTPC,), {"level": level})(SCALES["cpu-4l"], VOCAB, CONTEXT)
    return gpt, pc


def _batch(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    idx = torch.randint(0, VOCAB, (4, CONTEXT + 1), generator=torch.Generator().manual_seed(seed))
    return idx[:, :-1], idx[:, 1:]


def _steps(model: GPT, steps: int, lr: float = 1e-2) -> list[float]:
    from ngptlab.models.gpt import Recipe

    recipe = Recipe()
    opt = torch.optim.AdamW(recipe.param_groups(model, lr), betas=recipe.betas, eps=recipe.eps)
    losses = []
    x, y = _batch(1)
    for _ in range(steps):
        _, loss = model(x, y)
        losses.append(loss.item())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(recipe.clip_parameters(model), 1.0)
        opt.step()
    return losses


def test_level_zero_is_gpt_bit_for_bit():
    gpt, pc = _pair(0)
    for (name, a), (_, b) in zip(gpt.named_parameters(), pc.named_parameters(), strict=True):
        assert torch.equal(a, b), name
    assert _steps(gpt, 3) == _steps(pc, 3)
    for (name, a), (_, b) in zip(gpt.named_parameters(), pc.named_parameters(), strict=True):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("level", [1, 4])
def test_gradients_reach_the_raw_matrices_and_steps_lower_the_loss(level):
    _, pc = _pair(level)
    x, y = _batch(1)
    _, loss = pc(x, y)
    loss.backward()
    for name, p in pc.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().max() > 0, name
    pc.zero_grad(set_to_none=True)
    losses = _steps(pc, 8)
    assert losses[-1] < 0.8 * losses[0], losses


def test_the_forward_applies_the_effective_matrix():
    _, pc = _pair(2)
    q = pc.layers[1].attn.q
    x = torch.randn(3, 64, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(q(x), x @ pc_weight(q.weight, 2).T)
    assert q.underlying_weight() is q.weight


def test_the_condition_stage_reads_w_eff_and_the_raw_matrix():
    model, _ = build_seeded("gpt-pc2", "cpu-4l", VOCAB, CONTEXT, seed=0)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():  # gains off 1, so W_eff = pc(W) diag(g) is told from pc(W)
        for p in model.parameters():
            p.mul_(1 + 0.5 * torch.rand(p.shape, generator=gen))
    infos = {i.name: i for i in effective_matrices(model)}
    block = model.layers[2]
    for path in ("attn.q", "mlp.u", "mlp.o"):
        info = infos[f"layers.2.{path}"]
        raw = block.get_submodule(path).weight
        expected = by_svd(raw, 2)
        if path != "mlp.o":  # o takes the attention's/MLP's output: no norm gain in front
            expected = expected * block.norm_attn.weight.double()[None, :] if path == "attn.q" else \
                expected * block.norm_mlp.weight.double()[None, :]
        torch.testing.assert_close(info.weight, expected, rtol=0, atol=1e-12 * expected.abs().max().item())
        assert torch.equal(info.underlying, raw.double())
    # and model.matrices() (the in-training view) carries W_eff and the raw W
    m = {i.name: i for i in model.matrices()}["layers.2.attn.k"]
    torch.testing.assert_close(m.weight, pc_weight(block.attn.k.weight, 2).detach())
    assert torch.equal(m.underlying, block.attn.k.weight)
    assert kappa(m.weight) < kappa(m.underlying)


def test_bench_step_times_the_levels_against_gpt():
    from ngptlab.bench.step import format_table, run_step_bench
    from ngptlab.models.scales import Scale

    rows = run_step_bench(list(ARMS), Scale(n_layer=2, d_model=32, n_head=2), 16, 64, torch.device("cpu"),
                          steps=1, warmup=1, vocab_size=96)
    assert [r["arm"] for r in rows] == ["gpt", *ARMS]
    assert all(r["ratio_vs_gpt"] > 0 for r in rows)
    assert "| gpt-pc4 |" in format_table(rows)
