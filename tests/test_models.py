"""The arms: parameter counts against the paper, RoPE, nGPT's invariants, the probe arms' defining
properties, the optimizer recipes, checkpoints, and that every arm learns. Tiny scales, CPU, fp32."""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from ngptlab.errors import ParamsError
from ngptlab.models.arms import table as arm_table
from ngptlab.models.gpt_orth import TOLERANCE, OrthLinear, polar_factor
from ngptlab.models.layers import MATRIX_KINDS, MatrixInfo, RMSNorm, Rotary, apply_rotary
from ngptlab.models.ngpt import LearnedScale
from ngptlab.models.registry import build, count_parameters
from ngptlab.models.scales import SCALES, Scale
from ngptlab.models.size import parameter_count, train_flops_per_token

torch.set_num_threads(1)  # the 2 cores are shared; more threads only contend

REPO = Path(__file__).resolve().parents[1]
VOCAB, CONTEXT = 61, 32  # a small vocabulary keeps the embeddings from dominating the tiny models

PARAGRAPH = (
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
    "foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light, "
    "it was the season of Darkness, it was the spring of hope, it was the winter of despair, we had "
    "everything before us, we had nothing before us, we were all going direct to Heaven, we were all going "
    "direct the other way."
)


def tiny(arm: str, seed: int = 0, vocab: int = VOCAB, scale: str = "cpu-4l"):
    torch.manual_seed(seed)
    return build(arm, scale, vocab, CONTEXT)


def random_batch(seed: int, vocab: int = VOCAB, batch: int = 4, length: int = CONTEXT):
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, vocab, (batch, length + 1), generator=g)
    return idx[:, :-1], idx[:, 1:]


def adamw_steps(model, recipe, steps: int, lr: float = 1e-2, seed: int = 0, vocab: int = VOCAB) -> None:
    """Real training steps, exactly as the train stage takes them: AdamW on the recipe's groups, clipping
    on the recipe's parameters, then the recipe's post-step hook."""
    opt = torch.optim.AdamW(recipe.param_groups(model, lr), betas=recipe.betas, eps=recipe.eps)
    for step in range(steps):
        x, y = random_batch(seed + step, vocab)
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(recipe.clip_parameters(model), 1.0)
        opt.step()
        recipe.post_step(model)


# ----------------------------------------------------------------------------------------------------------
# Registry, scales, parameter counts, FLOPs


@pytest.mark.parametrize(
    "arm, scale, paper_millions",
    [("gpt", "0.5B", 468.2), ("gpt", "1B", 1025.7), ("ngpt", "0.5B", 468.4), ("ngpt", "1B", 1026.1)],
)
def test_parameter_counts_match_paper_table_2(arm, scale, paper_millions):
    with torch.device("meta"):
        model, _ = build(arm, scale, 32000, 1024)
    n = count_parameters(model)
    assert abs(n / 1e6 - paper_millions) < 0.1
    assert math.floor(n / 1e5) / 10 == pytest.approx(paper_millions)  # the paper rounds down


def test_parameter_count_of_gpt_by_hand():
    model, _ = tiny("gpt")
    L, d = 4, 64
    expected = 2 * VOCAB * d + L * (4 * d * d + 3 * d * 4 * d) + (2 * L + 1) * d  # matrices + RMSNorm gains
    assert count_parameters(model) == expected


SHAPES = {
    "0.5B": SCALES["0.5B"],
    "1B": SCALES["1B"],
    "odd": Scale(n_layer=3, d_model=48, n_head=6, mlp_ratio=2.5),  # head_dim 8, d_mlp 120
    "deep-narrow": Scale(n_layer=7, d_model=32, n_head=2, mlp_ratio=3),
}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("arm", arm_table())
def test_closed_form_parameter_count_matches_the_built_model(arm, shape):
    vocab = 50257
    with torch.device("meta"):
        model, _ = build(arm, SHAPES[shape], vocab, 1024)
    assert parameter_count(arm, SHAPES[shape], vocab) == count_parameters(model)


def test_a_custom_shape_builds_with_its_mlp_ratio():
    model, _ = build("gpt", Scale(n_layer=2, d_model=48, n_head=6, mlp_ratio=2.5), VOCAB, CONTEXT)
    assert len(model.layers) == 2 and model.layers[0].mlp.u.weight.shape == (120, 48)
    assert model.layers[0].attn.n_head == 6


def test_scales_have_the_documented_shapes():
    assert set(SCALES) == {"cpu-4l", "cpu-8l", "gpu-small", "0.5B", "1B"}
    assert (SCALES["0.5B"].n_layer, SCALES["0.5B"].d_model, SCALES["0.5B"].n_head) == (24, 1024, 16)
    assert (SCALES["1B"].n_layer, SCALES["1B"].d_model, SCALES["1B"].n_head) == (36, 1280, 20)
    assert SCALES["1B"].head_dim == 64 and SCALES["1B"].d_mlp == 5120


def test_unknown_names_and_bad_sizes_raise_params_error():
    with pytest.raises(ParamsError, match="unknown arm 'mgpt'.*gpt-orth"):
        build("mgpt", "cpu-4l", VOCAB, CONTEXT)
    with pytest.raises(ParamsError, match="unknown scale '2B'; named scales: cpu-4l.*1B"):
        build("gpt", "2B", VOCAB, CONTEXT)
    with pytest.raises(ParamsError, match="vocab_size"):
        build("gpt", "cpu-4l", 0, CONTEXT)
    with pytest.raises(ParamsError, match="context"):
        build("gpt", "cpu-4l", VOCAB, 1.5)
    with pytest.raises(ParamsError, match="unknown arm"):
        train_flops_per_token("nope", "cpu-4l", VOCAB, CONTEXT)


def test_longer_sequence_than_context_is_refused():
    model, _ = tiny("gpt")
    with pytest.raises(ValueError, match="exceeds the model's context 32"):
        model(torch.zeros(1, CONTEXT + 1, dtype=torch.long))


def test_train_flops_per_token_formula():
    # 6 N + 12 L d T with N = 16 d^2 L + vocab d (matmul parameters, input embedding excluded)
    L, d, V, T = 24, 1024, 50257, 4096
    expected = 6 * (16 * d * d * L + V * d) + 12 * L * d * T
    assert train_flops_per_token("gpt", "0.5B", V, T) == expected
    assert train_flops_per_token("ngpt", "0.5B", V, T) == expected
    # the attention term grows with context: 8k costs more per token than 1k
    assert train_flops_per_token("gpt", "1B", V, 8192) > train_flops_per_token("gpt", "1B", V, 1024)


# ----------------------------------------------------------------------------------------------------------
# Rotary position embeddings


def test_rope_score_depends_only_on_relative_position():
    head_dim, context = 64, 4096
    cos, sin = Rotary(head_dim, context)(context)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, head_dim, generator=g, dtype=torch.float32)

    def score(m: int, n: int) -> float:
        qm = apply_rotary(q.view(1, 1, 1, -1), cos[m : m + 1], sin[m : m + 1])
        kn = apply_rotary(k.view(1, 1, 1, -1), cos[n : n + 1], sin[n : n + 1])
        return float((qm * kn).sum())

    for m, n in [(7, 3), (100, 0), (3000, 2990), (4000, 50)]:
        for shift in (1, 17, 90):
            assert score(m + shift, n + shift) == pytest.approx(score(m, n), rel=1e-4, abs=1e-4)
    # and it does depend on the offset (an identity "rotation" would pass the line above)
    assert abs(score(10, 0) - score(11, 0)) > 1e-2


def test_rope_rotates_by_position_not_by_head_in_the_model_layout():
    # [B, T, H, K] as Attention uses it: the same q (per head) at every position; the scores between
    # positions m and n must depend on m - n only, separately for every head
    T, H, K = 40, 3, 8
    cos, sin = Rotary(K, T)(T)
    q = torch.randn(1, 1, H, K).expand(1, T, H, K)
    k = torch.randn(1, 1, H, K).expand(1, T, H, K)
    scores = torch.einsum("bmhk,bnhk->hmn", apply_rotary(q, cos, sin), apply_rotary(k, cos, sin))
    for offset in (-5, 0, 3, 20):
        diagonal = torch.diagonal(scores, offset=offset, dim1=1, dim2=2)  # every (m, m + offset) pair
        torch.testing.assert_close(diagonal, diagonal[:, :1].expand_as(diagonal), rtol=1e-4, atol=1e-4)
    assert (scores[:, 0, 0] - scores[:, 0, 1]).abs().max() > 1e-3


def test_rope_preserves_norms_and_rotates_by_the_documented_angles():
    head_dim, context = 16, 512
    cos, sin = Rotary(head_dim, context)(context)
    x = torch.randn(2, context, 3, head_dim)
    y = apply_rotary(x, cos, sin)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(y[:, 0], x[:, 0])  # position 0 is the identity
    # pair i = (x[i], x[i + K/2]) turns by pos * 10000^(-2i/K): check the first and the last pair
    m = 300
    for i in (0, head_dim // 2 - 1):
        e = torch.zeros(1, 1, 1, head_dim)
        e[..., i] = 1.0
        out = apply_rotary(e, cos[m : m + 1], sin[m : m + 1]).flatten()
        angle = m * 10000.0 ** (-2 * i / head_dim)
        assert out[i].item() == pytest.approx(math.cos(angle), abs=1e-5)
        assert out[i + head_dim // 2].item() == pytest.approx(math.sin(angle), abs=1e-5)


# ----------------------------------------------------------------------------------------------------------
# nGPT


def test_ngpt_scales_take_their_documented_values_at_init():
    model, _ = tiny("ngpt")
    d = 64
    block = model.layers[0]
    cases = [  # (module, stored value, effective value): paper Section 2.5
        (block.alpha_attn, 1 / math.sqrt(d), 0.05),
        (block.alpha_mlp, 1 / math.sqrt(d), 0.05),
        (block.attn.s_qk, 1 / math.sqrt(d), 1.0),
        (block.mlp.s_u, 1.0, 1.0),
        (block.mlp.s_v, 1.0, 1.0),
        (model.s_z, 1 / math.sqrt(d), 1.0),
    ]
    for module, stored, effective in cases:
        assert isinstance(module, LearnedScale)
        torch.testing.assert_close(module.weight, torch.full_like(module.weight, stored))
        torch.testing.assert_close(module(), torch.full_like(module.weight, effective))
    assert block.attn.softmax_scale == pytest.approx(math.sqrt(16))  # sqrt(d_k), d_k = 64 / 4 heads
    assert block.mlp.v_gain == pytest.approx(math.sqrt(d))
    assert model.s_z.weight.shape == (VOCAB,) and block.attn.s_qk.weight.shape == (d,)
    assert not any("norm" in name for name, _ in model.named_parameters())  # no normalisation layers


def _assert_unit_along_norm_dim(infos: list[MatrixInfo]) -> None:
    for info in infos:
        norms = info.weight.norm(dim=info.norm_dim)
        assert norms.numel() == info.weight.shape[1 - info.norm_dim]
        torch.testing.assert_close(norms, torch.ones_like(norms), rtol=0, atol=1e-5, msg=info.name)


def test_ngpt_invariants_hold_after_real_optimizer_steps():
    model, recipe = tiny("ngpt")
    before = {i.name: i.weight.clone() for i in model.matrices()}
    alpha_before = model.layers[0].alpha_attn.weight.clone()
    adamw_steps(model, recipe, steps=3)
    infos = model.matrices()
    assert all(not torch.equal(before[i.name], i.weight) for i in infos)  # the steps moved every matrix
    assert not torch.equal(alpha_before, model.layers[0].alpha_attn.weight)
    _assert_unit_along_norm_dim(infos)

    hidden = []
    hooks = [layer.register_forward_hook(lambda m, a, out: hidden.append(out)) for layer in model.layers]
    x, _ = random_batch(99)
    with torch.no_grad():
        model(x)
    for hook in hooks:
        hook.remove()
    assert len(hidden) == 4
    for h in hidden:  # after every block every token's hidden state is on the unit sphere
        torch.testing.assert_close(h.norm(dim=-1), torch.ones(h.shape[:2]), rtol=0, atol=1e-5)
    # and the input embedding rows the first block reads are unit too
    torch.testing.assert_close(model.embed_in.weight.norm(dim=1), torch.ones(VOCAB), rtol=0, atol=1e-5)


def _block_outputs(model, seed: int = 99) -> list[torch.Tensor]:
    hidden = []
    hooks = [layer.register_forward_hook(lambda m, a, out: hidden.append(out)) for layer in model.layers]
    with torch.no_grad():
        model(random_batch(seed)[0])
    for hook in hooks:
        hook.remove()
    return hidden


def test_ngpt_freew_keeps_unit_hidden_states_but_frees_the_weights():
    model, recipe = tiny("ngpt-freew")
    _assert_unit_along_norm_dim(model.matrices())  # it starts where ngpt starts
    adamw_steps(model, recipe, steps=3)
    drift = max((i.weight.norm(dim=i.norm_dim) - 1).abs().max().item() for i in model.matrices())
    assert drift > 1e-3  # no post-step normalisation: the steps moved the norms
    for h in _block_outputs(model):  # hidden states still on the unit sphere after every block
        torch.testing.assert_close(h.norm(dim=-1), torch.ones(h.shape[:2]), rtol=0, atol=1e-5)
    assert recipe.weight_decay == 0.0 and recipe.warmup is False  # the rest of nGPT's recipe
    ngpt, _ = tiny("ngpt")
    assert [n for n, _ in ngpt.named_parameters()] == [n for n, _ in model.named_parameters()]


def test_gpt_qknorm_normalises_queries_and_keys_per_head():
    model, recipe = tiny("gpt-qknorm")
    attn = model.layers[1].attn
    seen = {}
    original = attn.transform_qk

    def spy(q, k):
        seen["q"], seen["k"] = out = original(q, k)
        return out

    attn.transform_qk = spy
    with torch.no_grad():
        model(random_batch(3)[0])
    head_dim = attn.head_dim
    for t in seen.values():  # [B, T, H, K]: unit RMS over each head's K values (gains 1 at init)
        rms = t.pow(2).mean(dim=-1).sqrt()
        torch.testing.assert_close(rms, torch.ones_like(rms), rtol=0, atol=1e-4)
        assert t.shape[-1] == head_dim
    before = attn.q_norm.weight.clone()
    adamw_steps(model, recipe, steps=2)
    assert not torch.equal(before, attn.q_norm.weight)  # the gains are learned
    assert attn.q_norm.weight.shape == (head_dim,)


def test_gpt_rownorm_fixes_weights_but_not_hidden_states():
    model, recipe = tiny("gpt-rownorm")
    adamw_steps(model, recipe, steps=3)
    _assert_unit_along_norm_dim(model.matrices())
    hidden = []
    hook = model.layers[1].register_forward_hook(lambda m, a, out: hidden.append(out))
    with torch.no_grad():
        model(random_batch(5)[0])
    hook.remove()
    assert (hidden[0].norm(dim=-1) - 1).abs().max() > 0.1  # residual stream as in gpt, not normalised
    assert hasattr(model, "norm_out") and hasattr(model.layers[0], "norm_attn")


# ----------------------------------------------------------------------------------------------------------
# Probe arms


@pytest.mark.parametrize("shape", [(48, 48), (64, 256), (256, 64)])
def test_polar_factor_matches_the_svd(shape):
    g = torch.Generator().manual_seed(1)
    w = torch.randn(shape, generator=g, dtype=torch.float64)
    w = torch.linalg.qr(w if shape[0] >= shape[1] else w.T)[0]
    w = (w if shape[0] >= shape[1] else w.T) + 0.02 * torch.randn(shape, generator=g, dtype=torch.float64)
    u, _, vh = torch.linalg.svd(w, full_matrices=False)
    torch.testing.assert_close(polar_factor(w), u @ vh, rtol=0, atol=1e-10)
    # far from orthogonal too (a fresh Gaussian matrix: singular values spread over orders of magnitude)
    w = torch.randn(shape, generator=g, dtype=torch.float64)
    u, _, vh = torch.linalg.svd(w, full_matrices=False)
    torch.testing.assert_close(polar_factor(w), u @ vh, rtol=0, atol=1e-8)


def test_gpt_orth_singular_values_equal_its_scalar_after_a_step():
    model, recipe = tiny("gpt-orth")
    init = {n: m.scalar.item() for n, m in model.named_modules() if isinstance(m, OrthLinear)}
    adamw_steps(model, recipe, steps=2)
    checked = 0
    for info in model.matrices():
        if info.kind in ("embed_in", "embed_out"):
            assert info.underlying is None  # embeddings as gpt
            continue
        module = model.get_submodule(info.name)
        assert isinstance(module, OrthLinear)
        assert module.scalar.item() != init[info.name]  # the scalar is learned
        sv = torch.linalg.svdvals(info.weight.double())
        assert sv.numel() == min(info.weight.shape)
        torch.testing.assert_close(sv, torch.full_like(sv, abs(module.scalar.item())), rtol=0, atol=1e-4)
        checked += 1
    assert checked == 4 * 7


# The RMSNorm gains the probe arms freeze at 1, so the map on the normalised input is the constrained matrix
FROZEN_GAINS = {"gpt-rownorm": ("layers.2.norm_attn.weight", "norm_out.weight"),
                "gpt-orth": ("layers.2.norm_attn.weight",)}


def named_parameter(model, name: str) -> torch.nn.Parameter:
    return dict(model.named_parameters())[name]


def applied_maps(model) -> dict[str, torch.Tensor]:
    """Every matrix as the linear map the forward pass applies to its input, the preceding RMSNorm's gain
    g folded in (W diag(g)); matrices without a norm in front (o projections, embed_in) as they are."""
    maps = {}
    for info in model.matrices():
        w = info.weight.double()
        if info.layer is not None and info.kind in ("q", "k", "v"):
            w = w * model.layers[info.layer].norm_attn.weight.double()
        elif info.layer is not None and info.kind in ("mlp_u", "mlp_v"):
            w = w * model.layers[info.layer].norm_mlp.weight.double()
        elif info.kind == "embed_out":
            w = w * model.norm_out.weight.double()
        maps[info.name] = (w, info)
    return maps


def test_gpt_rownorm_applied_maps_keep_unit_vectors_after_real_steps():
    model, recipe = tiny("gpt-rownorm")
    adamw_steps(model, recipe, steps=5, lr=3e-2)  # large steps: a free gain would drift visibly
    gains = [m.weight for m in model.modules() if isinstance(m, RMSNorm)]
    assert gains and all(not g.requires_grad and torch.equal(g, torch.ones_like(g)) for g in gains)
    for name, (w, info) in applied_maps(model).items():
        norms = w.norm(dim=info.norm_dim)
        torch.testing.assert_close(norms, torch.ones_like(norms), rtol=0, atol=1e-6, msg=name)


def test_gpt_orth_applied_maps_have_condition_number_one_after_real_steps():
    model, recipe = tiny("gpt-orth")
    adamw_steps(model, recipe, steps=5, lr=3e-2)
    checked = 0
    for name, (w, info) in applied_maps(model).items():
        if info.kind in ("embed_in", "embed_out"):
            continue  # the baseline's embeddings and LM head
        sv = torch.linalg.svdvals(w)
        assert (sv.max() / sv.min()).item() - 1 <= TOLERANCE, name  # float32 Q: kappa - 1 <= ||Q^T Q - I||_F
        checked += 1
    assert checked == 4 * 7
    assert named_parameter(model, "norm_out.weight").requires_grad  # the LM head's norm stays the baseline's


def test_gpt_orth_init_matches_gpt_frobenius_norms():
    model, _ = tiny("gpt-orth")
    d, L = 64, 4
    q, mlp_o = model.layers[0].attn.q, model.layers[0].mlp.o
    assert q.effective_weight().norm().item() == pytest.approx(0.02 * math.sqrt(d * d), rel=1e-5)
    assert mlp_o.effective_weight().norm().item() == pytest.approx(
        0.02 / math.sqrt(2 * L) * math.sqrt(d * 4 * d), rel=1e-5
    )


@pytest.mark.parametrize("arm", ["gpt-scalar", "gpt-lrm"])
def test_multiplier_arms_reduce_exactly_to_gpt_when_multipliers_are_one(arm):
    gpt, _ = tiny("gpt", seed=3)
    probe, _ = tiny(arm, seed=4)  # other random weights, then gpt's copied in
    missing, unexpected = probe.load_state_dict(gpt.state_dict(), strict=False)
    assert not unexpected
    assert missing and all(k.endswith(("scalar", "mult_row", "mult_col")) for k in missing)
    x, y = random_batch(7)
    with torch.no_grad():
        logits_gpt, loss_gpt = gpt(x, y)
        logits_probe, loss_probe = probe(x, y)
        assert torch.equal(logits_gpt, logits_probe)
        assert torch.equal(loss_gpt, loss_probe)
        for name, p in probe.named_parameters():  # multipliers away from 1: a different function
            if name.endswith(("scalar", "mult_row", "mult_col")):
                p.mul_(1.5)
        assert not torch.allclose(probe(x)[0], logits_gpt)


def test_lrm_effective_weight_is_rows_times_matrix_times_columns_and_used_by_forward():
    model, _ = tiny("gpt-lrm")
    q = model.layers[0].attn.q
    with torch.no_grad():
        q.mult_row.uniform_(0.5, 2.0)
        q.mult_col.uniform_(0.5, 2.0)
    expected = torch.diag(q.mult_row) @ q.weight @ torch.diag(q.mult_col)
    torch.testing.assert_close(q.effective_weight(), expected)
    x = torch.randn(3, 64)
    torch.testing.assert_close(q(x), x @ expected.T)
    emb = model.embed_in
    with torch.no_grad():
        emb.mult_row.uniform_(0.5, 2.0)
        emb.mult_col.uniform_(0.5, 2.0)
    idx = torch.tensor([[0, 5, 60]])
    torch.testing.assert_close(emb(idx), emb.effective_weight()[idx])
    assert not hasattr(model.embed_out, "mult_row")  # none on the LM head


# ----------------------------------------------------------------------------------------------------------
# Recipes


def _group_of(groups: list[dict]) -> dict[int, dict]:
    seen: dict[int, dict] = {}
    for group in groups:
        for p in group["params"]:
            assert id(p) not in seen, "a parameter is in two groups"
            seen[id(p)] = group
    return seen


def test_recipes_follow_the_paper_and_the_design():
    for arm in arm_table():
        model, recipe = tiny(arm)
        groups = recipe.param_groups(model, lr=1e-3)
        by_param = _group_of(groups)
        assert set(by_param) == {id(p) for p in model.parameters() if p.requires_grad}, arm
        assert all(g["lr"] == 1e-3 for g in groups)
        assert recipe.betas == (0.9, 0.95) and recipe.eps == 1e-8
        decay = {name: by_param[id(p)]["weight_decay"] for name, p in model.named_parameters()
                 if p.requires_grad}
        if arm in ("ngpt", "ngpt-freew", "ngpt-angle"):
            assert recipe.warmup is False and set(decay.values()) == {0.0}
            continue
        assert recipe.warmup is True
        matrix_decay = 0.0 if arm == "gpt-nowd" else 0.1
        assert decay["embed_in.weight"] == decay["embed_out.weight"] == matrix_decay
        assert decay["layers.2.mlp.o.weight"] == matrix_decay
        gains = ("layers.2.norm_attn.weight", "norm_out.weight")
        frozen = FROZEN_GAINS.get(arm, ())
        assert all(decay[g] == 0.0 for g in gains if g not in frozen)
        assert all(g not in decay and not named_parameter(model, g).requires_grad for g in frozen)
        multipliers = [n for n in decay if n.endswith(("scalar", "mult_row", "mult_col"))]
        assert bool(multipliers) == (arm in ("gpt-lrm", "gpt-scalar", "gpt-orth", "gpt-angle"))
        assert all(decay[n] == 2e-3 for n in multipliers)
        clipped = {id(p) for p in recipe.clip_parameters(model)}
        named = dict(model.named_parameters())
        assert clipped == {id(p) for n, p in named.items() if n not in multipliers and p.requires_grad}


def test_gpt_init_stds():
    torch.manual_seed(0)
    model, _ = build("gpt", "cpu-8l", 4096, CONTEXT)
    L = 8
    assert model.layers[3].attn.q.weight.std().item() == pytest.approx(0.02, rel=0.02)
    assert model.embed_in.weight.std().item() == pytest.approx(0.02, rel=0.02)
    assert model.layers[3].mlp.o.weight.std().item() == pytest.approx(0.02 / math.sqrt(2 * L), rel=0.02)
    assert model.layers[3].attn.o.weight.std().item() == pytest.approx(0.02 / math.sqrt(2 * L), rel=0.02)


# ----------------------------------------------------------------------------------------------------------
# Every arm: matrices(), checkpoints, autocast, learning


EXPECTED_KINDS = ["embed_in"] + ["q", "k", "v", "o", "mlp_u", "mlp_v", "mlp_o"] * 4 + ["embed_out"]
UNDERLYING = {"gpt-lrm": "all but the LM head", "gpt-scalar": "all but the LM head", "gpt-orth": "blocks"}


@pytest.mark.parametrize("arm", list(arm_table()))
def test_matrices_report_every_effective_matrix(arm):
    model, _ = tiny(arm)
    infos = model.matrices()
    assert [i.kind for i in infos] == EXPECTED_KINDS and set(EXPECTED_KINDS) == set(MATRIX_KINDS)
    d, V = 64, VOCAB
    shapes = {"embed_in": (V, d), "embed_out": (V, d), "q": (d, d), "k": (d, d), "v": (d, d), "o": (d, d),
              "mlp_u": (4 * d, d), "mlp_v": (4 * d, d), "mlp_o": (d, 4 * d)}
    for i in infos:
        assert tuple(i.weight.shape) == shapes[i.kind], i.name
        assert not i.weight.requires_grad
        assert i.norm_dim == (0 if i.kind in ("o", "mlp_o") else 1)
        assert i.weight.shape[i.norm_dim] == d  # vectors along norm_dim have length d_model
        assert i.n_heads == (4 if i.kind in ("q", "k", "v") else None)
        if i.layer is None:
            assert i.name == i.kind
        else:
            assert i.name.startswith(f"layers.{i.layer}.")
        model.get_submodule(i.name)  # the name is the module path
        has_underlying = {"gpt-lrm": i.kind != "embed_out", "gpt-scalar": i.kind != "embed_out",
                          "gpt-angle": i.kind != "embed_out", "gpt-orth": i.layer is not None,
                          "gpt-pc1": i.layer is not None, "gpt-pc2": i.layer is not None,
                          "gpt-pc4": i.layer is not None}.get(arm, False)
        assert (i.underlying is not None) == has_underlying, i.name
        if i.underlying is not None:
            assert i.underlying.shape == i.weight.shape
    assert [i.layer for i in infos[1:8]] == [0] * 7 and infos[-2].layer == 3


@pytest.mark.parametrize("arm", list(arm_table()))
def test_checkpoint_round_trip_through_safetensors(arm, tmp_path):
    model, recipe = tiny(arm)
    adamw_steps(model, recipe, steps=1)
    state = model.state_dict()
    assert not any("rotary" in k for k in state)  # RoPE tables are recomputed, never stored
    path = tmp_path / "model.safetensors"
    save_file(state, path)  # refuses shared or non-contiguous tensors
    fresh, _ = tiny(arm, seed=1)
    fresh.load_state_dict(load_file(path))
    x, _ = random_batch(11)
    with torch.no_grad():
        torch.testing.assert_close(fresh(x)[0], model(x)[0], rtol=0, atol=0)


@pytest.mark.parametrize("arm", list(arm_table()))
def test_bf16_autocast_forward_backward(arm):
    model, _ = tiny(arm)
    x, y = random_batch(2)
    with torch.no_grad():
        _, loss32 = model(x, y)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits, loss = model(x, y)
    loss.backward()
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    assert loss.item() == pytest.approx(loss32.item(), abs=0.05)
    trained = [p for p in model.parameters() if p.requires_grad]  # frozen gains get no gradient
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in trained)


def _r50k_cache_file() -> Path | None:
    """tiktoken's cached r50k_base ranks, if some earlier step (ngptlab prepare) put them on this machine."""
    key = hashlib.sha1(b"https://openaipublic.blob.core.windows.net/encodings/r50k_base.tiktoken").hexdigest()
    dirs = [os.environ.get("TIKTOKEN_CACHE_DIR"), os.environ.get("NGPTLAB_CACHE") and
            Path(os.environ["NGPTLAB_CACHE"]) / "tiktoken", REPO / "data" / "cache" / "tiktoken",
            Path(tempfile.gettempdir()) / "data-gym-cache"]
    return next((Path(d) / key for d in dirs if d and (Path(d) / key).is_file()), None)


def real_tokens(monkeypatch) -> tuple[torch.Tensor, int]:
    """The paragraph in GPT-2 BPE where the tokenizer is cached here (no network), else its UTF-8 bytes;
    renumbered densely so the tiny model's vocabulary is only the tokens that occur."""
    cached = _r50k_cache_file()
    if cached is not None:
        import tiktoken

        monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cached.parent))
        ids = tiktoken.get_encoding("r50k_base").encode(PARAGRAPH)
    else:
        ids = list(PARAGRAPH.encode())
    vocab = {t: i for i, t in enumerate(sorted(set(ids)))}
    return torch.tensor([vocab[t] for t in ids]), len(vocab)


@pytest.mark.parametrize("arm", list(arm_table()))
def test_every_arm_learns_real_text(arm, monkeypatch):
    tokens, vocab = real_tokens(monkeypatch)
    model, recipe = tiny(arm, vocab=vocab)
    g = torch.Generator().manual_seed(0)

    def batch():
        starts = torch.randint(0, len(tokens) - CONTEXT - 1, (8,), generator=g)
        return (torch.stack([tokens[s : s + CONTEXT] for s in starts]),
                torch.stack([tokens[s + 1 : s + CONTEXT + 1] for s in starts]))

    probe = batch()
    with torch.no_grad():
        before = model(*probe)[1].item()
    opt = torch.optim.AdamW(recipe.param_groups(model, 1e-2), betas=recipe.betas, eps=recipe.eps)
    for _ in range(30):
        _, loss = model(*batch())
        assert torch.isfinite(loss)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(recipe.clip_parameters(model), 1.0)
        opt.step()
        recipe.post_step(model)
    with torch.no_grad():
        after = model(*probe)[1].item()
    assert math.isfinite(after)
    assert after < 0.7 * before, f"{arm}: loss {before:.3f} -> {after:.3f}"
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_unit_helper_and_normalization_are_fp32():
    x = torch.randn(2, 3, 8, dtype=torch.bfloat16)
    from ngptlab.models.layers import unit

    assert unit(x).dtype == torch.float32
    torch.testing.assert_close(unit(x), F.normalize(x.float(), dim=-1))


@pytest.mark.parametrize("arm", ["ngpt", "gpt-lrm", "gpt-pc2"])
def test_forward_compiles_as_one_graph(arm):
    # torch.compile(fullgraph=True) fails on any graph break (data-dependent Python control flow)
    model, _ = tiny(arm)
    x, y = random_batch(3)
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x, y)[1], model(x, y)[1])
