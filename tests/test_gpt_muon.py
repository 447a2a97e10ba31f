"""gpt-muon (models/gpt_muon.py, models/muon.py): the hidden matrices, and they alone, step by torch's Muon
with the learning rate scaled by 0.2 sqrt(max(m, n)) (Liu et al.'s match to AdamW's update RMS), every other
parameter exactly by AdamW; the momentum buffers round-trip through a checkpoint; a run trained through the
project's trainer lowers its loss, is measured like every arm, and resumes byte for byte."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file
from support.train import (
    assert_same_optimizer_state,
    make_params,
    metrics,
    results_dir,
    run_dir,
    run_name,
    whole_and_split,
)
from torch.optim._muon import _zeropower_via_newtonschulz  # the Newton-Schulz iteration torch's Muon runs

from ngptlab.checkpoint import atomic_save_tensors, tensors_sha256
from ngptlab.condition.run import condition_run
from ngptlab.errors import CheckpointError
from ngptlab.grid.enumeration import enumerate_runs, find_run
from ngptlab.models.gpt_muon import MuonRecipe, hidden_matrices
from ngptlab.models.layers import MATRIX_KINDS
from ngptlab.models.muon import MUON_DEFAULTS, MuonAdamW
from ngptlab.models.registry import build
from ngptlab.models.scales import Scale
from ngptlab.observe.angular import IntervalStart
from ngptlab.settings import Params
from ngptlab.train import state
from ngptlab.train.progress import Progress

torch.set_num_threads(1)
SHAPE = Scale(n_layer=2, d_model=16, n_head=2)
VOCAB, CONTEXT, LR = 64, 16, 3e-3
BLOCK_MATRIX = re.compile(r"layers\.\d+\.(attn|mlp)\.\w+\.weight")


def tiny(seed: int = 0) -> tuple[torch.nn.Module, MuonAdamW]:
    """gpt-muon at SHAPE and its optimizer, as the trainer builds them (every group's base_lr kept)."""
    torch.manual_seed(seed)
    model, recipe = build("gpt-muon", SHAPE, VOCAB, CONTEXT)
    groups = recipe.param_groups(model, LR)
    for group in groups:
        group["base_lr"] = group["lr"]
    return model, recipe.optimizer(groups, lr=LR, betas=recipe.betas, eps=recipe.eps)


def train_steps(model: torch.nn.Module, optimizer: torch.optim.Optimizer, steps: range) -> None:
    for step in steps:
        tokens = torch.randint(0, VOCAB, (4, CONTEXT + 1), generator=torch.Generator().manual_seed(step))
        _, loss = model(tokens[:, :-1], tokens[:, 1:])
        loss.backward()
        for group in optimizer.param_groups:  # a decaying schedule, set as the trainer sets it
            group["lr"] = group["base_lr"] * (1 - 0.1 * step)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def test_the_hidden_matrices_and_nothing_else_step_by_muon():
    model, optimizer = tiny()
    muon = [p for g in optimizer.param_groups if g.get("muon") for p in g["params"]]
    hidden = [p for name, p in model.named_parameters() if BLOCK_MATRIX.fullmatch(name)]
    assert len(hidden) == 7 * SHAPE.n_layer and all(p.ndim == 2 for p in hidden)
    assert [id(p) for p in muon] == [id(p) for p in hidden] == [id(p) for p in hidden_matrices(model)]
    others = {name for name, p in model.named_parameters() if not BLOCK_MATRIX.fullmatch(name)}
    assert {name for name in others if name.endswith(".weight") and "norm" not in name} == {
        "embed_in.weight", "embed_out.weight"}
    (group,) = [g for g in optimizer.param_groups if g.get("muon")]
    assert group["weight_decay"] == 0.1 and group["lr"] == LR and group["adjust_lr_fn"] == "match_rms_adamw"
    assert (group["momentum"], group["nesterov"], group["eps"], group["ns_steps"]) == (0.95, True, 1e-7, 5)
    adamw = {g["name"]: g for g in optimizer.param_groups if not g.get("muon")}
    assert {name: g["weight_decay"] for name, g in adamw.items()} == {"matrices": 0.1, "vectors": 0.0}
    assert all(g["betas"] == (0.9, 0.95) and g["eps"] == 1e-8 for g in adamw.values())
    assert sum(len(g["params"]) for g in optimizer.param_groups) == len(list(model.parameters()))


def test_muon_refuses_a_matrix_that_is_not_2d():
    with pytest.raises(ValueError, match="2D"):
        MuonAdamW([{"params": [torch.nn.Parameter(torch.ones(3))], "muon": True, "lr": LR}])


@pytest.mark.parametrize("shape", [(96, 32), (32, 96)])
def test_a_muon_step_is_orthogonalised_nesterov_momentum_at_the_rms_matched_rate(shape):
    """Two steps of one [m, n] matrix: W <- (1 - lr lambda) W - lr 0.2 sqrt(max(m, n)) NS(N_t), N_t
    Nesterov's momentum of the gradients (mu 0.95); the update's RMS is then ~0.2 lr (0.85 x that for
    Gaussian gradients, as the quintic iteration leaves singular values in ~(0.68, 1.14)); the vector beside
    it takes exactly torch's AdamW step."""
    torch.manual_seed(0)
    w, v = torch.nn.Parameter(torch.randn(shape) * 0.02), torch.nn.Parameter(torch.ones(5))
    twin = torch.nn.Parameter(v.detach().clone())
    lr, wd, mu = 0.01, 0.1, 0.95
    optimizer = MuonAdamW([{"params": [w], "muon": True, "weight_decay": wd},
                           {"params": [v], "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.95), eps=1e-8)
    adamw = torch.optim.AdamW([twin], lr=lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
    expected, buffer = w.detach().clone(), torch.zeros(shape)
    for _ in range(2):
        grad, vgrad = torch.randn(shape), torch.randn(5)
        w.grad, v.grad, twin.grad = grad.clone(), vgrad.clone(), vgrad.clone()
        before = w.detach().clone()
        optimizer.step()
        adamw.step()
        buffer.lerp_(grad, 1 - mu)  # B_t = mu B_(t-1) + (1 - mu) G_t, rounded as torch rounds it
        nesterov = grad.lerp(buffer, mu)  # N_t = (1 - mu) G_t + mu B_t: bf16 in NS, so rounded alike
        ortho = _zeropower_via_newtonschulz(nesterov, MUON_DEFAULTS["ns_coefficients"], 5, 1e-7).float()
        expected = expected * (1 - lr * wd) - lr * 0.2 * math.sqrt(max(shape)) * ortho
        torch.testing.assert_close(w.detach(), expected, rtol=1e-6, atol=1e-8)
        assert torch.equal(v, twin)
        update = w.detach() - before * (1 - lr * wd)
        assert 0.7 < update.pow(2).mean().sqrt().item() / (0.2 * lr) < 1.05
    assert torch.equal(optimizer.state[w]["momentum_buffer"], buffer)


def saved_after(steps: int, state_dir: Path) -> tuple[torch.nn.Module, MuonAdamW]:
    """A tiny gpt-muon trained `steps` steps, its checkpoint saved in `state_dir`."""
    model, optimizer = tiny()
    train_steps(model, optimizer, range(steps))
    config = {"arm": "gpt-muon", "scale": "tiny", "vocab_size": VOCAB, "context": CONTEXT}
    state.save_state(state_dir, model, optimizer, config,
                     Progress(step=steps, identity={"arm": "gpt-muon"}), IntervalStart(steps))
    return model, optimizer


def test_the_momentum_buffers_round_trip_through_a_checkpoint_and_the_next_step_is_the_same(tmp_path):
    model, optimizer = saved_after(3, tmp_path)
    saved = load_file(next(tmp_path.glob("ckpt-*")) / "optimizer.safetensors")
    buffers = sorted(int(key.split(".")[1]) for key in saved if key.endswith(".momentum_buffer"))
    params = [p for g in optimizer.param_groups for p in g["params"]]
    muon = {id(p) for g in optimizer.param_groups if g.get("muon") for p in g["params"]}
    assert buffers == [i for i, p in enumerate(params) if id(p) in muon] and len(buffers) == 14
    other, restored = tiny(seed=1)
    state.load_state(tmp_path, other, restored, {"arm": "gpt-muon"})
    assert_same_optimizer_state(optimizer, restored)
    train_steps(model, optimizer, range(3, 5))
    train_steps(other, restored, range(3, 5))  # Muon steps the restored groups and state, not stale ones
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), other.parameters(), strict=True))
    assert not torch.equal(restored.state[hidden_matrices(other)[0]]["momentum_buffer"],
                           saved[f"state.{buffers[0]}.momentum_buffer"])


def test_gpt_muon_has_no_rotational_matrices():
    model, recipe = build("gpt-muon", SHAPE, VOCAB, CONTEXT)
    groups = recipe.param_groups(model, LR) + [{"params": [], "rotational": True}]
    with pytest.raises(ValueError, match="no rotational matrices"):
        MuonRecipe().optimizer(groups)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple:
    """A gpt-muon run through the project's trainer, trained through and stopped every 3 steps (with the
    optimizer state of each stop's checkpoint), the per-step angle measured at every step."""
    params = make_params(arms=["gpt-muon"], budgets=[16 * 512], batch_sequences=16, micro_batch_tokens=512,
                         learning_rates={"cpu-4l": {"gpt-muon": [3e-3]}}, eval_every_tokens=5 * 512,
                         checkpoint_every_tokens=2 * 512, step_angle_every=1)
    spec = find_run(Params.of(params), run_name("gpt-muon", 16 * 512))
    saved: list[dict] = []

    def keep_optimizer_state(split: Path) -> None:
        state_dir = run_dir(split, spec.name) / "state"
        ckpt = state_dir / json.loads((state_dir / state.LATEST).read_text())["checkpoint"]
        saved.append(load_file(ckpt / "optimizer.safetensors"))

    with pytest.MonkeyPatch.context() as monkeypatch:
        whole, split = whole_and_split(spec, Params.of(params).train, tmp_path_factory.mktemp("muon"),
                                       monkeypatch, keep_optimizer_state)
    return spec, whole, split, saved, Params.of(params)


def test_a_run_stopped_and_resumed_ends_with_the_bytes_of_one_trained_through(trained):
    spec, whole, split, saved, _ = trained
    for path in (run_dir(whole, spec.name) / "model.safetensors",
                 results_dir(whole, spec.name) / "metrics.jsonl"):
        assert path.read_bytes() == (split / path.relative_to(whole)).read_bytes(), path
    assert saved and all(sum(key.endswith(".momentum_buffer") for key in s) == 7 * 4 for s in saved)


def test_a_run_lowers_its_loss_and_is_measured_like_every_arm(trained):
    """The loss falls; every evaluation row has each matrix kind's angular rate and angle per step, and
    `condition` analyses the run's matrices as any arm's (the observers read matrices, not optimizers)."""
    spec, whole, _, _, params = trained
    rows = metrics(whole, spec.name)
    losses = [row["val_loss"] for row in rows if "val_loss" in row]
    assert losses[-1] < losses[0] - 0.5
    measured = [row for row in rows if "step_angle" in row]
    assert len(measured) == 4
    for row in measured:
        assert set(row["step_angle"]) == set(row["angular_rate"]) == set(MATRIX_KINDS)
        assert all(0 < angle < 0.5 for angle in row["step_angle"].values())
    document = condition_run(spec, whole, params.condition, progress=False)
    assert list(document["matrices"]) == [info.name for info in build("gpt-muon", "cpu-4l", VOCAB, 32)[0]
                                          .matrices()]
    headline = document["headline"]["effective"]
    assert 1 < headline["layer3_q_condition"] < math.inf and 1 < headline["attn_condition_median"] < math.inf


def test_a_momentum_buffer_of_another_shape_is_refused_naming_it(tmp_path):
    saved_after(1, tmp_path)
    path = next(tmp_path.glob("ckpt-*")) / "optimizer.safetensors"
    tensors = load_file(path)
    key = next(k for k in tensors if k.endswith(".momentum_buffer") and len(set(tensors[k].shape)) == 2)
    tensors[key] = tensors[key].T.contiguous()  # another matrix's buffer, its file's hash consistent
    with safe_open(path, "pt") as f:
        metadata = f.metadata()
    atomic_save_tensors(path, tensors, {**metadata, "tensors_sha256": tensors_sha256(tensors)})
    other, restored = tiny(seed=1)
    with pytest.raises(CheckpointError, match=r"momentum_buffer of parameter \d+ has shape"):
        state.load_state(tmp_path, other, restored, {"arm": "gpt-muon"})


def test_a_bf16_run_trains_with_bf16_momentum_buffers_and_resumes_byte_for_byte(tmp_path, monkeypatch):
    """gpt-muon with its weights stored in bf16 (train.weight_dtype): the loss falls, every checkpoint's Muon
    momentum buffer is the parameter's dtype, bf16 (torch's Muon makes it like the gradient; models/muon.py),
    as AdamW's moments are, with no float32 master copies (gpt-muon turns no matrix: models/rotational.py),
    and a run stopped every 3 steps ends with the bytes of one trained through."""
    params = make_params(arms=["gpt-muon"], budgets=[16 * 512], batch_sequences=16, micro_batch_tokens=512,
                         learning_rates={"cpu-4l": {"gpt-muon": [3e-3]}}, eval_every_tokens=5 * 512,
                         checkpoint_every_tokens=2 * 512, weight_dtype="bf16")
    (spec,) = enumerate_runs(Params.of(params))
    assert spec.weight_dtype == "bf16"
    saved: list[dict] = []

    def keep_optimizer_state(split: Path) -> None:
        state_dir = run_dir(split, spec.name) / "state"
        ckpt = state_dir / json.loads((state_dir / state.LATEST).read_text())["checkpoint"]
        saved.append(load_file(ckpt / "optimizer.safetensors"))

    whole, split = whole_and_split(spec, Params.of(params).train, tmp_path, monkeypatch, keep_optimizer_state)
    assert saved
    for tensors in saved:
        buffers = {k: v for k, v in tensors.items() if k.endswith(".momentum_buffer")}
        assert len(buffers) == 7 * 4 and {v.dtype for v in buffers.values()} == {torch.bfloat16}
        moments = [v for k, v in tensors.items() if k.endswith((".exp_avg", ".exp_avg_sq"))]
        assert moments and {v.dtype for v in moments} == {torch.bfloat16}
        assert not any(k.endswith(".master") for k in tensors)
    weights = load_file(run_dir(whole, spec.name) / "model.safetensors")
    assert {v.dtype for v in weights.values()} == {torch.bfloat16}
    losses = [row["val_loss"] for row in metrics(whole, spec.name) if "val_loss" in row]
    assert losses[-1] < losses[0] - 0.5, losses
    for path in (run_dir(whole, spec.name) / "model.safetensors",
                 results_dir(whole, spec.name) / "metrics.jsonl"):
        assert path.read_bytes() == (split / path.relative_to(whole)).read_bytes(), path
