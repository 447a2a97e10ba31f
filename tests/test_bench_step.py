"""nGPT's faster computation (scales folded into the weights, batched in-place post-step normalisation)
against the computation before it (bench/before.py), which `ngptlab bench step --before` times beside it."""

from __future__ import annotations

import copy

import pytest
import torch

from ngptlab.bench.before import as_before
from ngptlab.models.registry import build
from ngptlab.models.scales import Scale

SHAPE = Scale(n_layer=2, d_model=32, n_head=2)


def pair() -> tuple:
    torch.manual_seed(0)
    model, recipe = build("ngpt", SHAPE, 96, 16)
    with torch.no_grad():  # move the scales off their init so that folding them is really exercised
        for p in model.parameters():
            if p.ndim == 1:
                p.mul_(1 + 0.5 * torch.rand_like(p))
    before, before_recipe = as_before(copy.deepcopy(model), recipe)
    return (model, recipe), (before, before_recipe)


def test_ngpt_computes_as_before_forward_backward_and_post_step():
    (new, recipe), (old, old_recipe) = pair()
    idx = torch.randint(0, 96, (3, 17))
    logits_new, loss_new = new(idx[:, :-1], idx[:, 1:])
    logits_old, loss_old = old(idx[:, :-1], idx[:, 1:])
    torch.testing.assert_close(logits_new, logits_old, rtol=1e-5, atol=1e-6)
    loss_new.backward()
    loss_old.backward()
    for (name, a), b in zip(new.named_parameters(), old.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-7, msg=name)
    with torch.no_grad():  # a step off the sphere, the same for both, then each one's renormalisation
        for a in new.parameters():
            a.sub_(0.05 * a.grad)
    old.load_state_dict(new.state_dict())
    recipe.post_step(new)
    old_recipe.post_step(old)
    for (name, a), b in zip(new.state_dict().items(), old.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-7, msg=name)
    for m in new.matrices():
        norms = torch.linalg.vector_norm(m.underlying if m.underlying is not None else
                                         new.get_submodule(m.name).weight, dim=m.norm_dim)
        torch.testing.assert_close(norms, torch.ones_like(norms), rtol=0, atol=1e-6)


def test_ngpt_bf16_autocast_agrees_with_before():
    (new, _), (old, _) = pair()
    idx = torch.randint(0, 96, (3, 17))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, a = new(idx[:, :-1], idx[:, 1:])
        _, b = old(idx[:, :-1], idx[:, 1:])
    assert a.item() == pytest.approx(b.item(), abs=2e-2)


def test_bench_step_times_before_beside_after():
    from ngptlab.bench.step import run_step_bench

    rows = run_step_bench(["ngpt", "ngpt@before"], SHAPE, 16, 64, torch.device("cpu"), steps=1, warmup=1,
                          vocab_size=96)
    assert [r["arm"] for r in rows] == ["gpt", "ngpt", "ngpt@before"]
    assert all(r["median_ms"] > 0 for r in rows)


def test_bench_step_times_the_step_angle_and_the_rotational_step_beside_their_arm():
    from ngptlab.bench.step import format_table, run_step_bench, with_variants

    arms = with_variants(["gpt", "ngpt"], step_angle=True, rotational=True)
    assert arms == ["gpt", "gpt+step-angle", "gpt+rotational", "ngpt", "ngpt+step-angle", "ngpt+rotational"]
    rows = run_step_bench(arms, SHAPE, 16, 64, torch.device("cpu"), steps=1, warmup=1, vocab_size=96)
    assert [r["arm"] for r in rows] == arms
    assert [r["ratio_vs_arm"] > 0 for r in rows if "ratio_vs_arm" in r] == [True] * 4
    assert "ngpt+rotational: " in format_table(rows)


def test_bench_step_times_the_angle_arms_with_their_rotational_matrices():
    from ngptlab.bench.step import _Arm, run_step_bench

    arm = _Arm("gpt-angle", SHAPE, 96, 16, 2, torch.device("cpu"), compile_model=False)
    assert set(arm.recipe.rotation) == set(arm.recipe.turned_kinds)  # timed as it trains: its kinds turn
    assert any(group.get("rotational") for group in arm.optimizer.param_groups)
    rows = run_step_bench(["gpt-angle", "ngpt", "ngpt-angle"], SHAPE, 16, 64, torch.device("cpu"), steps=1,
                          warmup=1, vocab_size=96)
    assert [r["arm"] for r in rows] == ["gpt", "gpt-angle", "ngpt", "ngpt-angle"]


def test_bench_step_computes_on_a_training_process_threads_unless_told(capsys):
    from support import TEST_PARAMS

    from ngptlab.cli import main
    from ngptlab.train.threads import THREADS_PER_PROCESS

    before = torch.get_num_threads()
    tiny = ["bench", "step", "--params", str(TEST_PARAMS), "--arms", "gpt", "--context", "16",
            "--batch-tokens", "64", "--steps", "1", "--warmup", "1", "--vocab-size", "96", "--device", "cpu"]
    for extra, threads in (([], THREADS_PER_PROCESS), (["--threads", "2"], 2)):
        assert main([*tiny, *extra]) == 0
        assert f", threads {threads}," in capsys.readouterr().out
        assert torch.get_num_threads() == before  # the caller's count restored
    assert main([*tiny, "--threads", "0"]) != 0
    assert "--threads must be at least 1, got 0" in capsys.readouterr().err
