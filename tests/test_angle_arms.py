"""The angle arms (gpt-angle, ngpt-angle): built by the registry, their angles set from params or the prior
(train/angle_targets.py), they turn their matrices by the target angle per step, gpt-angle's directions keep
their norm while their conditioning moves, and ngpt-angle stays nGPT (unit rows); in bf16 the plan counts
their matrices' float32 master copies."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from support import fixture_params

from ngptlab.config.load import validate_params
from ngptlab.errors import ParamsError
from ngptlab.grid.runs import RunSpec
from ngptlab.models import rotational
from ngptlab.models.registry import build
from ngptlab.models.scales import Scale
from ngptlab.models.size import rotational_parameters
from ngptlab.observe.step_angle import StepAngles
from ngptlab.plan.memory import training_memory
from ngptlab.train import angle_targets

torch.set_num_threads(1)
SHAPE = Scale(n_layer=2, d_model=32, n_head=2)
VOCAB, CONTEXT, LR = 64, 16, 3e-3


def settings(angles: dict | None = None):
    """The tests' params with the angle square at context CONTEXT and these measured angles."""
    params = fixture_params()
    arms = ["gpt", "ngpt", "gpt-angle", "ngpt-angle"]
    params["train"].update(contexts=[CONTEXT], arms=arms,
                           learning_rates={"cpu-4l": dict.fromkeys(arms, [LR])}, angles=angles or {})
    return validate_params(params, source="test").train


def spec(arm: str, lr: float = LR) -> RunSpec:
    return RunSpec(scale="cpu-4l", context=CONTEXT, arm=arm, budget=2048, lr=lr, seed=0)


def backward(model: torch.nn.Module, step: int) -> None:
    tokens = torch.randint(0, VOCAB, (4, CONTEXT + 1), generator=torch.Generator().manual_seed(step))
    _, loss = model(tokens[:, :-1], tokens[:, 1:])
    loss.backward()


def train_strict(arm: str, steps: int = 6) -> tuple[torch.nn.Module, dict, list[tuple[str, float]], list]:
    """The arm at LR with its prior angles and no running average (every step turns by exactly the target),
    trained on random tokens: (model, target per kind, (kind, realised angle) per matrix and step,
    the rotational matrices' norms after each step)."""
    torch.manual_seed(0)
    model, recipe = build(arm, SHAPE, VOCAB, CONTEXT)
    recipe = dataclasses.replace(angle_targets.with_targets(recipe, settings(), spec(arm), SHAPE),
                                 rotation_beta=0.0)
    optimizer = rotational.adamw(rotational.param_groups(recipe, model, LR), betas=recipe.betas,
                                 eps=recipe.eps)
    angles = StepAngles(model, every=1)
    seen, norms, previous = [], [], angles.sums.clone()
    for step in range(steps):
        backward(model, step)
        with angles.measuring(step):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            with torch.no_grad():
                recipe.post_step(model)
        turned, previous = (angles.sums - previous).tolist(), angles.sums.clone()
        seen += [(kind, angle) for (kind, _), angle in zip(angles.labels, turned, strict=True)]
        norms.append([torch.linalg.vector_norm(p.detach()).item() for (kind, _), p
                      in zip(angles.labels, angles.params, strict=True) if kind in recipe.rotation])
    return model, recipe.rotation, seen, norms


def kappa(w: torch.Tensor) -> float:
    sigma = torch.linalg.svdvals(w.double())
    return float(sigma[0] / sigma[-1])


def test_the_prior_is_the_design_notes_estimate():
    d1024 = Scale(n_layer=1, d_model=1024, n_head=8)
    # AdamW's equilibrium at eta 3e-3, lambda 0.1, beta1 0.9, and the Adam-size estimate for ngpt: about 4x
    assert angle_targets.prior_angle("gpt", 3e-3, d1024) == pytest.approx(5.6e-3, rel=0.01)
    assert angle_targets.prior_angle("ngpt", 3e-3, d1024) == pytest.approx(0.022)
    assert angle_targets.prior_angle("ngpt", 6e-3, SHAPE) == pytest.approx(0.044 * math.sqrt(32 / 1024))


def test_measured_angles_scale_with_the_learning_rate_and_name_their_run():
    kinds = {kind: 0.01 for kind in ("embed_in", "q", "k", "v", "o", "mlp_u", "mlp_v", "mlp_o")}
    train = settings({"cpu-4l-ctx16": {"gpt-angle": {"lr": LR, "run": "the-ngpt-run", "kinds": kinds}}})
    angles, source = angle_targets.targets(train, spec("gpt-angle", 2 * LR), SHAPE, "ngpt", tuple(kinds))
    assert source == "the-ngpt-run" and angles == {kind: 0.02 for kind in kinds}  # x2 the lr, x2 the angle
    # a cell without a measurement takes the prior; a measurement missing a kind is refused by name
    _, source = angle_targets.targets(train, spec("ngpt-angle"), SHAPE, "gpt", ("q",))
    assert source == "prior"
    with pytest.raises(ParamsError, match="no angle for embed_out"):
        angle_targets.targets(train, spec("gpt-angle"), SHAPE, "ngpt", ("embed_out",))


def test_gpt_angle_turns_at_its_target_and_keeps_its_norms_while_its_conditioning_moves():
    model, target, seen, norms = train_strict("gpt-angle")
    assert set(target) == {"embed_in", "q", "k", "v", "o", "mlp_u", "mlp_v", "mlp_o"}  # the LM head on AdamW
    assert target["q"] == pytest.approx(angle_targets.prior_angle("ngpt", LR, SHAPE))
    turned = [(kind, angle) for kind, angle in seen if kind in target]
    assert turned and all(angle == pytest.approx(target[kind], rel=0.01) for kind, angle in turned)
    first = norms[0]
    assert all(n == pytest.approx(n0, rel=1e-5) for row in norms for n, n0 in zip(row, first, strict=True))
    q = model.get_submodule(next(i.name for i in model.matrices() if i.kind == "q")).weight.detach()
    torch.manual_seed(0)
    initial, _ = build("gpt-angle", SHAPE, VOCAB, CONTEXT)
    q0 = initial.get_submodule(next(i.name for i in initial.matrices() if i.kind == "q")).weight.detach()
    assert abs(kappa(q) / kappa(q0) - 1) > 1e-3  # conditioning free: it moved


def test_ngpt_angle_turns_near_its_target_and_stays_on_unit_rows():
    model, target, seen, _ = train_strict("ngpt-angle")
    assert target["q"] == pytest.approx(angle_targets.prior_angle("gpt", LR, SHAPE))
    # nGPT's renormalisation of the rows after the turn moves the realised angle off the target a little
    turned = [angle / target[kind] for kind, angle in seen if kind in target]
    assert turned and all(0.8 < ratio < 1.2 for ratio in turned)
    q = model.get_submodule(next(i.name for i in model.matrices() if i.kind == "q")).weight.detach()
    assert torch.allclose(q.norm(dim=-1), torch.ones(q.shape[0]), atol=1e-5) or torch.allclose(
        q.norm(dim=0), torch.ones(q.shape[1]), atol=1e-5)


@pytest.mark.parametrize("arm", ["gpt-angle", "ngpt-angle"])
def test_the_plan_counts_a_float32_master_per_rotational_parameter_in_bf16(arm):
    """The closed form of the rotational matrices' size is what the built arm turns; with bf16 weights
    their float32 master copies add 4 bytes each to the planned memory, fp32 weights nothing."""
    model, recipe = build(arm, SHAPE, VOCAB, CONTEXT)
    recipe = angle_targets.with_targets(recipe, settings(), spec(arm), SHAPE)
    groups = rotational.param_groups(recipe, model, LR)
    turned = sum(p.numel() for g in groups if g.get("rotational") for p in g["params"])
    assert turned == rotational_parameters(arm, SHAPE, VOCAB) > 0
    n = sum(p.numel() for p in model.parameters())
    fp32 = training_memory(arm, SHAPE, n, VOCAB, 512, bf16=True)
    bf16 = training_memory(arm, SHAPE, n, VOCAB, 512, bf16=True, weight_bytes=2)
    assert (fp32.weights_optimizer, bf16.weights_optimizer) == (16 * n, 8 * n + 4 * turned)
    assert rotational_parameters("gpt", SHAPE, VOCAB) == 0
    assert training_memory("gpt", SHAPE, n, VOCAB, 512, bf16=True, weight_bytes=2).weights_optimizer == 8 * n
