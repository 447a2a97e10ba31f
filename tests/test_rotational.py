"""The rotational step (models/rotational.py), measured with the per-step angle (observe/step_angle.py): tiny
models training on random tokens turn their rotational matrices by the target angle, keep their norms, leave
every other parameter to AdamW, and round-trip through a checkpoint; a run with them resumes byte for byte.
In bf16 a matrix turns as its float32 master copy, so that turns below bf16's rounding accumulate.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
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

from ngptlab import weight_dtype as weight_dtypes
from ngptlab.errors import ParamsError
from ngptlab.grid.enumeration import enumerate_runs, find_run
from ngptlab.models import registry, rotational
from ngptlab.models.gpt_scalar import GPTScalar, ScalarRecipe
from ngptlab.models.registry import build
from ngptlab.models.scales import Scale
from ngptlab.observe.angular import IntervalStart
from ngptlab.observe.step_angle import StepAngles, step_angle_
from ngptlab.settings import Params
from ngptlab.train import state
from ngptlab.train.jobs import make_job
from ngptlab.train.progress import Progress

torch.set_num_threads(1)
SHAPE = Scale(n_layer=2, d_model=16, n_head=2)
VOCAB, CONTEXT = 64, 16
# every kind but the LM head, which stays on AdamW (with its weight decay)
ANGLES = {"embed_in": 0.004, "q": 0.01, "k": 0.01, "v": 0.01, "o": 0.01, "mlp_u": 0.02, "mlp_v": 0.02,
          "mlp_o": 0.02}
FACTORS = [1.0 - 0.05 * t for t in range(12)]  # a decaying schedule: the angle follows it


def tiny(beta: float, seed: int = 0, dtype: str = "fp32") -> tuple[GPTScalar, torch.optim.Optimizer]:
    """gpt-scalar's model (W = s W~, the scalars on AdamW) with the ANGLES matrices rotational, its weights
    stored in `dtype` (train.weight_dtype)."""
    torch.manual_seed(seed)
    model = GPTScalar(SHAPE, VOCAB, CONTEXT)
    weight_dtypes.store(model, dtype)
    recipe = ScalarRecipe(rotation=dict(ANGLES), rotation_beta=beta)
    groups = rotational.param_groups(recipe, model, 3e-3)
    for group in groups:
        group["base_lr"] = group["lr"]
    return model, rotational.adamw(groups, betas=recipe.betas, eps=recipe.eps)


def backward(model: torch.nn.Module, step: int) -> None:
    tokens = torch.randint(0, VOCAB, (4, CONTEXT + 1), generator=torch.Generator().manual_seed(step))
    bf16 = next(model.parameters()).dtype == torch.bfloat16  # bf16 weights compute under autocast
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        _, loss = model(tokens[:, :-1], tokens[:, 1:])
    loss.backward()


def scheduled(optimizer: torch.optim.Optimizer, factor: float) -> dict[str, float]:
    """Set every group's lr as the trainer does; the target angle per rotational kind."""
    for group in optimizer.param_groups:
        group["lr"] = group["base_lr"] * factor
    return {group["name"].removeprefix("rotational "): group["lr"] for group in optimizer.param_groups
            if group.get("rotational")}


def train_measuring(beta: float, steps: int) -> tuple[list[tuple[str, float, float]], list[float]]:
    """(kind, realised angle, target) of every rotational matrix at every step, and the largest relative
    change of a rotational matrix's Frobenius norm from its first."""
    model, optimizer = tiny(beta)
    angles = StepAngles(model, every=1)
    names = [info.name for info in model.matrices()]
    norms0 = [torch.linalg.vector_norm(p.detach()).item() for p in angles.params]
    seen, drift, previous = [], [], angles.sums.clone()
    for step in range(steps):
        backward(model, step)
        target = scheduled(optimizer, FACTORS[step % len(FACTORS)])
        with angles.measuring(step):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        turned, previous = (angles.sums - previous).tolist(), angles.sums.clone()
        for (kind, _), angle, p, norm0, name in zip(angles.labels, turned, angles.params, norms0, names,
                                                    strict=True):
            if kind in ANGLES:
                seen.append((name, angle, target[kind]))
                drift.append(abs(torch.linalg.vector_norm(p.detach()).item() / norm0 - 1))
    return seen, drift


def test_without_a_running_average_every_step_turns_by_the_target_angle():
    seen, _ = train_measuring(beta=0.0, steps=8)
    assert len(seen) == 8 * (1 + 7 * SHAPE.n_layer)
    for name, angle, target in seen:
        assert angle == pytest.approx(target, rel=1e-2), name
    worst = max(abs(angle / target - 1) for _, angle, target in seen)
    assert worst < 1e-4  # float32 round-off of the turn and of its measurement


def test_with_a_running_average_the_angle_is_the_target_on_average():
    """Once Adam's own moments have settled (its update shrinks over its first ~1 / (1 - beta2) steps,
    which the running mean follows late: 0.6-0.9 of the target then, measured here), the mean over steps
    of every matrix's angle is the target's; single steps scatter around it."""
    seen, _ = train_measuring(beta=0.9, steps=100)
    ratios: dict[str, list[float]] = {}
    for name, angle, target in seen:
        ratios.setdefault(name, []).append(angle / target)
    for name, values in ratios.items():
        settled = values[50:]
        assert sum(settled) / len(settled) == pytest.approx(1.0, abs=0.04), name
        assert max(abs(v - 1) for v in settled) > 1e-2  # not every step exact


@pytest.mark.parametrize("beta", [0.0, 0.9])
def test_rotational_matrices_keep_their_frobenius_norm(beta):
    _, drift = train_measuring(beta, steps=12)
    assert max(drift) < 1e-6  # float32 round-off, no random walk over the steps


class OneAtATime(rotational.RotationalAdamW):
    """The rotational step written per matrix with torch's per-tensor ops (the module docstring's formulas
    in order): what the batched step must equal bit for bit on a CPU."""

    def _turn(self, params: list[torch.Tensor], group: dict, t: float) -> None:
        beta1, beta2 = group["betas"]
        beta = group["rotation_beta"]
        for p in params:
            state = self.state[p]
            state["step"] += 1
            state["exp_avg"].lerp_(p.grad, 1 - beta1)
            state["exp_avg_sq"].mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
            denominator = (state["exp_avg_sq"].float() / (1 - beta2**t)).sqrt_().add_(group["eps"])
            update = (state["exp_avg"].float() / (1 - beta1**t)).div_(denominator).flatten()
            master = state.get("master")
            if master is not None:
                master = torch.where(master.to(p.dtype) == p, master, p.float())
            w = (p.float() if master is None else master).flatten()
            ww = torch.dot(w, w)
            tangent = update.addcmul_(w, -torch.dot(update, w) / ww)
            size_sq = torch.dot(tangent, tangent)
            state["tangent_sq"].mul_(beta).add_((1 - beta) * size_sq)
            mean_sq = state["tangent_sq"] / (1 - beta**t)
            phi = group["lr"] * (size_sq / mean_sq.clamp(min=rotational.TINY)).sqrt()
            along = -torch.sin(phi) * ww.sqrt() / size_sq.sqrt().clamp(min=rotational.TINY)
            turned = (w * torch.cos(phi)).addcmul_(tangent, along)
            turned.mul_(state["norm"] / torch.linalg.vector_norm(turned))
            if master is not None:
                state["master"] = turned.view_as(p)
            p.copy_(turned.view_as(p))


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_the_batched_step_is_bit_for_bit_each_matrix_stepped_alone(dtype):
    """A group's matrices go through torch._foreach_* and stacked scalars together; OneAtATime steps each
    alone. 40 layers: 40 matrices of a kind, enough that the stacked scalars take the vectorised CPU loops
    (16 floats at a time with AVX-512), not only their scalar tail. Weights and the optimizer's state must
    match bit for bit."""
    shape = Scale(n_layer=40, d_model=16, n_head=2)

    def build_and_train(optimizer_class: type) -> tuple[torch.nn.Module, dict]:
        torch.manual_seed(0)
        model = GPTScalar(shape, VOCAB, CONTEXT)
        weight_dtypes.store(model, dtype)
        recipe = ScalarRecipe(rotation=dict(ANGLES), rotation_beta=0.9)
        groups = rotational.param_groups(recipe, model, 3e-3)
        optimizer = optimizer_class(groups, betas=recipe.betas, eps=recipe.eps)
        for step in range(6):
            backward(model, step)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return model, optimizer.state_dict()["state"]

    batched, batched_state = build_and_train(rotational.RotationalAdamW)
    alone, alone_state = build_and_train(OneAtATime)
    for (name, a), b in zip(batched.named_parameters(), alone.parameters(), strict=True):
        assert torch.equal(a, b), name
    assert batched_state.keys() == alone_state.keys()
    for index, values in batched_state.items():
        assert values.keys() == alone_state[index].keys()
        for key, value in values.items():
            assert torch.equal(value, alone_state[index][key]), (index, key)


def test_every_other_parameter_gets_exactly_adamws_update():
    """The same gradients into the rotational optimizer and a plain AdamW over the recipe's groups: every
    parameter outside the rotational groups is bit for bit AdamW's, step after step."""
    model, optimizer = tiny(beta=0.9)
    twin = copy.deepcopy(model)
    recipe = ScalarRecipe()
    plain = torch.optim.AdamW(recipe.param_groups(twin, 3e-3), betas=recipe.betas, eps=recipe.eps)
    rotating = {id(p) for g in optimizer.param_groups if g.get("rotational") for p in g["params"]}
    pairs = [(p, q) for p, q in zip(model.parameters(), twin.parameters(), strict=True)
             if id(p) not in rotating]
    assert len(pairs) == len(list(model.parameters())) - len(rotating) > 0
    for step in range(5):
        backward(model, step)
        for p, q in zip(model.parameters(), twin.parameters(), strict=True):
            q.grad = p.grad.clone()
        optimizer.step()
        plain.step()
        for p, q in pairs:
            assert torch.equal(p, q)
        assert not all(torch.equal(p, q) for p, q in zip(model.parameters(), twin.parameters(), strict=True))


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_the_state_round_trips_through_a_checkpoint_and_the_next_step_is_the_same(tmp_path, dtype):
    """fp32 weights keep AdamW's state and two scalars per rotational matrix, as before; bf16 weights add
    each rotational matrix's float32 master copy, saved as float32 and restored as float32."""
    model, optimizer = tiny(beta=0.9, dtype=dtype)
    for step in range(3):
        backward(model, step)
        scheduled(optimizer, FACTORS[step])
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    config = {"arm": "gpt-scalar", "scale": "tiny", "vocab_size": VOCAB, "context": CONTEXT}
    state.save_state(tmp_path, model, optimizer, config, Progress(step=3, identity={"arm": "gpt-scalar"}),
                     IntervalStart(3))
    saved = load_file(next(tmp_path.glob("ckpt-*")) / "optimizer.safetensors")
    masters = {key: value.dtype for key, value in saved.items() if key.endswith(".master")}
    rotating = sum(len(g["params"]) for g in optimizer.param_groups if g.get("rotational"))
    assert masters == ({} if dtype == "fp32" else {key: torch.float32 for key in masters})
    assert len(masters) == (0 if dtype == "fp32" else rotating)
    other, restored = tiny(beta=0.9, seed=1, dtype=dtype)
    state.load_state(tmp_path, other, restored, {"arm": "gpt-scalar"})
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), other.parameters(), strict=True))
    assert_same_optimizer_state(optimizer, restored)
    for m, opt in ((model, optimizer), (other, restored)):
        backward(m, 3)
        scheduled(opt, FACTORS[3])
        opt.step()
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), other.parameters(), strict=True))


def test_an_arm_without_rotation_gets_torchs_adamw_with_its_recipes_groups():
    model, recipe = build("gpt", SHAPE, VOCAB, CONTEXT)
    groups = rotational.param_groups(recipe, model, 1e-3)
    assert groups == recipe.param_groups(model, 1e-3)
    assert type(rotational.adamw(groups)) is torch.optim.AdamW


def test_an_unknown_kind_is_a_clear_error():
    model, _ = build("gpt", SHAPE, VOCAB, CONTEXT)
    with pytest.raises(ParamsError, match="unknown matrix kind.*attn"):
        rotational.param_groups(ScalarRecipe(rotation={"attn": 0.01}), model, 1e-3)


def test_the_equilibrium_angle_is_kosson_et_als():
    assert rotational.equilibrium_angle(3e-3, 0.1, 0.9) == pytest.approx(5.6e-3, rel=1e-2)


def test_the_measured_angle_is_exact_for_a_planted_rotation():
    w = torch.randn(40, 24, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    r = torch.randn(40, 24, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    u = w / torch.linalg.vector_norm(w)
    v = r - (r * u).sum() * u
    v = v / torch.linalg.vector_norm(v)
    for theta in (1e-5, 1e-3, 0.3, 2.5):
        for scale in (1.0, 0.7):
            after = scale * torch.linalg.vector_norm(w) * (math.cos(theta) * u + math.sin(theta) * v)
            assert step_angle_(w.float(), after.float()).item() == pytest.approx(theta, rel=2e-4, abs=1e-8)


# ----------------------------------------------------------------------------------------------------------
# bf16 weights: the turn of a float32 master copy


def turning_bf16(theta: float, n: int = 512) -> tuple[torch.nn.Parameter, rotational.RotationalAdamW]:
    """An n x n bf16 matrix of Frobenius norm ~sqrt(n), turned by `theta` per step (no running average)."""
    g = torch.Generator().manual_seed(0)
    p = torch.nn.Parameter(torch.randn(n, n, generator=g).mul(n**-0.5).to(torch.bfloat16))
    p.grad = torch.randn(n, n, generator=g).to(torch.bfloat16)  # the same every step: one plane of turns
    # eps as large as the gradient's entries: Adam's update then differs in size between entries (with a
    # tiny eps it is +-1 everywhere, and bf16's grid rounds every entry of a binade alike, a bias of a few
    # per cent in the angle between two bf16 matrices that no number of steps averages out)
    group = {"params": [p], "rotational": True, "rotation_beta": 0.0, "lr": theta, "weight_decay": 0.0,
             "fused": False}
    return p, rotational.RotationalAdamW([group], betas=(0.9, 0.95), eps=1.0)


def test_bf16_weights_turn_by_the_target_angle_through_a_float32_master():
    """Written straight into the bf16 parameter, a turn of 1e-4 rad rounded mostly away: on this 512 x 512
    matrix, before the master copy, its first 20 steps realised 0.22 of it on average and 200 steps 0.175 of
    200 x 1e-4 (1024 x 1024, random gradients: 0.26 at 1e-4, 0.44 at 3e-4, 0.78 at 1e-3). Now every step
    turns the float32 master by the target, and the bf16 parameter, its rounding, follows: after 200 steps
    its angle from the start is 200 x 1e-4 to within bf16's own rounding (~1.7e-3 rad at random, in
    quadrature: 0.4%). A single step's angle between bf16 parameters says little at this size: the entries
    that cross a rounding boundary jump by a whole ulp (3.4 x the target here, on average)."""
    theta, steps = 1e-4, 200
    p, optimizer = turning_bf16(theta)
    first = p.detach().float()
    turns = []
    for _ in range(steps):
        before = optimizer.state[p]["master"].clone() if optimizer.state[p] else p.detach().float()
        optimizer.step()
        master = optimizer.state[p]["master"]
        assert master.dtype == torch.float32 and torch.equal(master.to(torch.bfloat16), p.detach())
        turns.append(step_angle_(before, master).item())
    assert p.dtype == torch.bfloat16
    assert sum(turns[:20]) / 20 == pytest.approx(theta, rel=1e-2)
    assert max(abs(t / theta - 1) for t in turns) < 1e-3  # every step, float32 round-off only
    assert step_angle_(first.clone(), p.detach()).item() == pytest.approx(steps * theta, rel=1e-2)
    assert step_angle_(first, master).item() == pytest.approx(steps * theta, rel=1e-4)


def test_a_bf16_parameter_written_outside_the_optimizer_carries_its_master_along():
    """nGPT's renormalisation (ngpt-angle) writes the parameter after each step: the entries it changed
    take the parameter's value before the next turn, the others keep their float32 digits."""
    p, optimizer = turning_bf16(1e-4, n=64)
    for _ in range(3):
        optimizer.step()
    with torch.no_grad():
        p[0] = -p[0]  # a write the master cannot have made
    written = p[0].float()
    optimizer.step()
    master = optimizer.state[p]["master"]
    assert torch.equal(master.to(torch.bfloat16), p.detach())
    # the row turned from where the write left it (by ~1e-4 of its norm), not from the master's old row
    assert torch.linalg.vector_norm(p[0].float() - written) < 1e-2 * torch.linalg.vector_norm(written)
    assert not torch.equal(master[1:], master[1:].to(torch.bfloat16).float())  # below bf16's digits kept


# ----------------------------------------------------------------------------------------------------------
# In a training run


@dataclass
class TurningRecipe(ScalarRecipe):
    rotation: dict[str, float] = field(default_factory=lambda: {"q": 0.01, "mlp_u": 0.02})
    rotation_beta: float = 0.0


@pytest.fixture
def turning_gpt_scalar(monkeypatch):
    """gpt-scalar with TurningRecipe's rotational matrices."""
    recipe_of = registry.recipe_of
    monkeypatch.setattr(registry, "recipe_of",
                        lambda arm: TurningRecipe() if arm == "gpt-scalar" else recipe_of(arm))


def test_a_run_with_rotational_matrices_turns_them_and_resumes_byte_for_byte(tmp_path, monkeypatch,
                                                                             turning_gpt_scalar):
    """gpt-scalar with q and mlp_u rotational (no running average), evaluations every 5 steps: each row's
    step angle of those kinds is the mean of the schedule's angles over its interval; a run stopped every 3
    steps, checkpoints between evaluation points, ends with the bytes of one that ran through."""
    params = make_params(arms=["gpt-scalar"], budgets=[16 * 512], batch_sequences=16, micro_batch_tokens=512,
                         learning_rates={"cpu-4l": {"gpt-scalar": [3e-3]}}, eval_every_tokens=5 * 512,
                         checkpoint_every_tokens=2 * 512, step_angle_every=1)
    spec = find_run(Params.of(params), run_name("gpt-scalar", 16 * 512))
    train = Params.of(params).train
    whole, split = whole_and_split(spec, train, tmp_path, monkeypatch)
    for path in (run_dir(whole, spec.name) / "model.safetensors",
                 results_dir(whole, spec.name) / "metrics.jsonl"):
        assert path.read_bytes() == (split / path.relative_to(whole)).read_bytes(), path
    rows = [row for row in metrics(whole, spec.name) if "step_angle" in row]
    assert [row["step_angle_steps"] for row in rows] == [5, 5, 5, 1]
    schedule = make_job(spec, train, whole).schedule
    first = 0
    for row in rows:
        factors = [schedule.factor(s) for s in range(first, row["step"])]
        first = row["step"]
        for kind, peak in TurningRecipe().rotation.items():
            assert row["step_angle"][kind] == pytest.approx(peak * sum(factors) / len(factors), rel=1e-3)
        assert row["step_angle"]["k"] != pytest.approx(row["step_angle"]["q"], rel=1e-2)  # k: AdamW's


def test_a_bf16_run_with_rotational_matrices_resumes_byte_for_byte(tmp_path, monkeypatch,
                                                                   turning_gpt_scalar):
    """The same run with its weights in bf16: its checkpoints carry the float32 master copies, so a run
    stopped every 3 steps ends with the bytes of one that ran through (re-seeded from the bf16 weights at
    each start instead, it would not)."""
    params = make_params(arms=["gpt-scalar"], budgets=[8 * 512], batch_sequences=16, micro_batch_tokens=512,
                         learning_rates={"cpu-4l": {"gpt-scalar": [3e-3]}}, eval_every_tokens=4 * 512,
                         checkpoint_every_tokens=2 * 512, weight_dtype="bf16")
    (spec,) = enumerate_runs(Params.of(params))
    assert spec.weight_dtype == "bf16"
    train = Params.of(params).train
    saved = []

    def keep_optimizer_state(split: Path) -> None:
        state_dir = run_dir(split, spec.name) / "state"
        ckpt = state_dir / json.loads((state_dir / state.LATEST).read_text())["checkpoint"]
        saved.append(load_file(ckpt / "optimizer.safetensors"))

    whole, split = whole_and_split(spec, train, tmp_path, monkeypatch, keep_optimizer_state)
    assert saved and all({v.dtype for k, v in s.items() if k.endswith(".master")} == {torch.float32}
                         for s in saved)
    for path in (run_dir(whole, spec.name) / "model.safetensors",
                 results_dir(whole, spec.name) / "metrics.jsonl"):
        assert path.read_bytes() == (split / path.relative_to(whole)).read_bytes(), path
