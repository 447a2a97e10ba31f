"""The angle arms are estimated at multiplier 1 (their angle per step their matched arm's), the multiplier the
learning-rate policy tunes over their sweep as a secondary estimate (speedup/lr_policy.py,
speedup/tuned_multiplier.py), on planted worlds held in memory.

The loss is a power law in tokens with a sharp parabola in ln(lr) around an optimum that does not drift:
L(arm, lr, T, seed) = 3 + 8 (S T / 4096)^-0.3 + 0.2 (ln lr - ln lr*_arm)^2 + seed noise. gpt and ngpt are best
at 2e-3, so each chooses 2e-3 and multiplier 1 of both angle arms on the prior is 2e-3; gpt-angle is planted
best at 4e-3 (x2), ngpt-angle at 2e-3 (x1). Seed 0 sweeps; `ngptlab plan --add-seeds` adds seeds 1-3.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from support.synthetic import synthetic_params
from test_lr_policy import World as PolicyWorld
from test_lr_policy import with_added_seeds

from ngptlab.config.load import validate_params
from ngptlab.grid.enumeration import compared_runs
from ngptlab.plan.protocol import with_stand_in_angles
from ngptlab.plan.prune import proposed_prunes
from ngptlab.plan.seeds import proposed_seeds
from ngptlab.report.sections.speedup import multiplier_text
from ngptlab.settings import Params
from ngptlab.speedup.cell import analyse_cell
from ngptlab.speedup.crossing import tokens_to_target
from ngptlab.speedup.document import SpeedupDocument
from ngptlab.speedup.estimator import seed_speedup
from ngptlab.speedup.lr_policy import MIN_LAW_BUDGETS, REACH, cell_policy, reach, runs_policy

LRS = [1e-3, 2e-3, 4e-3, 8e-3]
BUDGETS = (16384, 32768, 65536, 131072, 262144)
CELL = "cpu-4l-ctx64"
ARMS = ("gpt", "ngpt", "gpt-angle", "ngpt-angle")
PLANTED_S = {"gpt": 1.0, "ngpt": 2.5, "gpt-angle": 1.25, "ngpt-angle": 1.3}
OPTIMUM = {"gpt": 2e-3, "ngpt": 2e-3, "gpt-angle": 4e-3, "ngpt-angle": 2e-3}
NOISE = 0.002


def clean_loss(arm: str, budget: int, lr: float) -> float:
    return 3.0 + 8.0 * (PLANTED_S[arm] * budget / 4096) ** -0.3 + 0.2 * math.log(lr / OPTIMUM[arm]) ** 2


def grid(rule: str = "crossing", arms=ARMS, angles: dict | None = None, lrs=None) -> dict:
    params = synthetic_params(seeds=(0,), budgets=BUDGETS)
    sweeps = {arm: list(LRS) for arm in arms} | (lrs or {})
    params["train"].update(contexts=[64], arms=list(arms), learning_rates={"cpu-4l": sweeps},
                           angles=angles or {})
    params["speedup"].update(bootstrap=0, lr_policy=rule)
    validate_params(params)
    return params


class World(PolicyWorld):
    """test_lr_policy's planted runs in memory, under this module's law and noise."""

    law = staticmethod(clean_loss)
    sd = NOISE


def measured(lr: float) -> dict:
    """train.angles of the cell: gpt-angle's target measured on a run at lr."""
    return {CELL: {"gpt-angle": {"lr": lr, "run": f"ngpt-lr{lr:g}", "kinds": {"q": 0.02}}}}


@pytest.mark.parametrize("rule", ["crossing", "largest", "budget"])
def test_an_angle_arm_best_at_x2_is_estimated_at_x1_and_its_tuned_x2_is_the_secondary(rule):
    params, world = grid(rule), World()
    policy = cell_policy(Params.of(params), world.lookup(params), "cpu-4l", 64)
    assert set(policy.of_arm("ngpt").values()) == {2e-3}  # ngpt's choice: multiplier 1 on the prior
    assert set(policy.of_arm("gpt-angle").values()) == {2e-3}  # primary: x1, though its best is 4e-3
    assert set(policy.of_arm("ngpt-angle").values()) == {2e-3}
    gpt_angle = policy.angle_arms["gpt-angle"]
    assert gpt_angle.target.matched == "ngpt" and gpt_angle.target.source == "prior"
    assert set(gpt_angle.tuned.values()) == {4e-3} and set(gpt_angle.unit.values()) == {2e-3}
    assert {gpt_angle.multiplier(b) for b in gpt_angle.tuned} == {2.0}
    ngpt_angle = policy.angle_arms["ngpt-angle"]
    assert {ngpt_angle.multiplier(b) for b in ngpt_angle.tuned} == {1}
    assert policy.notes == ()

    results = with_added_seeds(params, world)
    doc = analyse_cell(Params.of(params), CELL, results)
    entry = doc["arms"]["gpt-angle"]
    # the primary estimate reads every seed's runs at x1; the held-out seeds estimate it
    assert all(b["lr"] == 2e-3 for p in entry["per_seed"] for b in p["best"])
    assert doc["lr_policy"]["estimate_seeds"] == [1, 2, 3] and entry["speedup"]["n_seeds"] == 3
    assert "an angle arm at multiplier 1" in doc["estimand"]
    assert doc["lr_policy"]["angle_arms"]["gpt-angle"]["tuned"][-1] == {
        "budget": max(gpt_angle.tuned), "lr": 4e-3, "multiplier": 2.0}
    tuned = entry["tuned_multiplier"]
    assert tuned["lr"] == 4e-3 and tuned["multiplier"] == 2.0 and tuned["seeds"] == [0]
    assert "winner's curse" in tuned["note"] and "held-out seeds ran" in tuned["note"]
    # the secondary is seed 0's own speed-up at the tuned lr, to the same target as the primary's
    target = next(t for t in doc["targets"] if t["seed"] == 0)
    seed0 = {r.spec.budget: r.final_val_loss for r in results
             if (r.spec.arm, r.spec.seed, r.spec.lr) == ("gpt-angle", 0, 4e-3) and r.spec.budget in
             gpt_angle.tuned}
    speedup = seed_speedup(seed0, target["loss"], target["reference_budget"])[1]
    assert tuned["speedup"]["n_seeds"] == 1 and tuned["speedup"]["interval"] is None
    assert tuned["speedup"]["estimate"] == speedup.value and speedup.bound is None
    # about the planted S at the tuned lr: the arm's own law, at its optimum there
    assert tuned["speedup"]["estimate"] == pytest.approx(PLANTED_S["gpt-angle"], rel=0.1)
    # at x2 the planted arm is at its optimum, at x1 it pays 0.2 ln(2)^2 nats: the tuned reads faster
    assert tuned["speedup"]["estimate"] > entry["speedup"]["value"]
    assert "tuned_multiplier" not in doc["arms"]["ngpt"] and "tuned_multiplier" in doc["arms"]["ngpt-angle"]
    # the typed reader and the report's table read it
    typed = SpeedupDocument.from_dict(doc)
    assert typed.arms["gpt-angle"].tuned_multiplier.multiplier == 2.0
    assert multiplier_text(typed, "gpt-angle").startswith("x2 (lr ")
    assert "swept seeds (optimistic)" in multiplier_text(typed, "gpt-angle")
    assert multiplier_text(typed, "ngpt") is None


def test_held_out_seeds_of_an_angle_arm_are_planned_at_multiplier_1():
    params, world = grid(), World()
    entries, notes = proposed_seeds(Params.of(params), world.lookup(params), 2)
    assert notes == []
    angle = [e for e in entries if e["arm"] == "gpt-angle"]
    assert angle and {e["lr"] for e in angle} == {2e-3} and all(e["seeds"] == [1, 2] for e in angle)
    # and only up to its reach at 2e-3, not at the tuned 4e-3 (the two cross the target at different tokens)
    swept = {r.spec.budget: r.final_val_loss for r in world.run(params)
             if (r.spec.arm, r.spec.seed, r.spec.lr) == ("gpt-angle", 0, 2e-3)}
    policy = cell_policy(Params.of(params), world.lookup(params), "cpu-4l", 64)
    target = min(r.final_val_loss for r in world.run(params) if (r.spec.arm, r.spec.budget) == ("gpt", 65536))
    crossing = tokens_to_target(sorted(swept.items()), target).value
    expected = reach(BUDGETS, REACH * crossing)
    assert len(expected) >= MIN_LAW_BUDGETS
    assert sorted(e["budget"] for e in angle) == expected == sorted(policy.of_arm("gpt-angle"))
    # x1 costs it 0.2 ln(2)^2 nats, so it crosses later there: one budget further than the tuned x2 reads
    assert expected == list(BUDGETS[:4]) and sorted(policy.angle_arms["gpt-angle"].tuned) == list(BUDGETS[:3])


def test_a_measured_target_sets_multiplier_1_and_one_outside_the_sweep_leaves_a_note():
    world = World()
    params = grid(angles=measured(4e-3))  # measured on a run at 4e-3: there the angle is the matched arm's
    policy = cell_policy(Params.of(params), world.lookup(params), "cpu-4l", 64)
    assert set(policy.of_arm("gpt-angle").values()) == {4e-3}
    assert policy.angle_arms["gpt-angle"].target.source == "measured"
    assert {policy.angle_arms["gpt-angle"].multiplier(b) for b in policy.angle_arms["gpt-angle"].tuned} == {1}
    assert policy.angle_arms["ngpt-angle"].target.source == "prior"  # the other arm is still on the prior

    params = grid(angles=measured(1.6e-2))
    for rule in ("crossing", "largest", "budget"):
        params["speedup"]["lr_policy"] = rule
        policy = cell_policy(Params.of(params), world.lookup(params), "cpu-4l", 64)
        assert policy.of_arm("gpt-angle") == {}
        note = policy.note_of("gpt-angle")
        assert "multiplier 1" in note and "not in its sweep" in note and "0.016" in note, note
        assert set(policy.angle_arms["gpt-angle"].tuned.values()) == {4e-3}  # the secondary is still there
        assert set(policy.of_arm("ngpt-angle").values()) == {2e-3}
    # the cell's estimate goes on: the arm's entry says why it has no primary estimate
    params["speedup"]["lr_policy"] = "crossing"
    doc = analyse_cell(Params.of(params), CELL, world.run(params))
    entry = doc["arms"]["gpt-angle"]
    assert entry["per_seed"] == [] and "not in its sweep" in entry["speedup"]["note"]
    assert entry["tuned_multiplier"]["multiplier"] == pytest.approx(4e-3 / 1.6e-2)
    assert doc["arms"]["ngpt"]["speedup"]["value"] is not None


def test_an_angle_arm_whose_matched_arm_is_not_in_the_cell_has_no_primary_choice():
    params, world = grid(arms=("gpt", "gpt-angle")), World()
    policy = cell_policy(Params.of(params), world.lookup(params), "cpu-4l", 64)
    assert policy.of_arm("gpt-angle") == {} and "ngpt" in policy.note_of("gpt-angle")
    assert set(policy.angle_arms["gpt-angle"].tuned.values()) == {4e-3}


@pytest.mark.parametrize("rule", ["crossing", "largest", "budget"])
def test_a_non_angle_arm_chooses_exactly_as_without_the_angle_arms(rule):
    world = World(3)
    with_angles = grid(rule)
    without = grid(rule, arms=("gpt", "ngpt"))
    a = cell_policy(Params.of(with_angles), world.lookup(with_angles), "cpu-4l", 64)
    b = cell_policy(Params.of(without), world.lookup(without), "cpu-4l", 64)
    for arm in ("gpt", "ngpt"):
        assert a.of_arm(arm) == b.of_arm(arm)
    assert b.angle_arms == {} and "angle_arms" not in b.as_dict()
    # runs read without their params: the same choice, the angle arms on the prior
    runs = world.run(with_angles)
    bare = runs_policy(runs, rule, ["gpt"], "middle", [0])
    assert bare.chosen == a.chosen
    # and pinning nothing gives the angle arms their tuned choice: the rule as for any arm
    free = runs_policy(runs, rule, ["gpt"], "middle", [0], angles={})
    assert free.of_arm("gpt-angle") == a.angle_arms["gpt-angle"].tuned
    assert all(free.of_arm(arm) == a.of_arm(arm) for arm in ("gpt", "ngpt", "ngpt-angle"))  # x1 is best


def test_a_stand_in_target_sets_no_multiplier_1_the_design_reads_the_prior():
    """The plan's projection and the design put a stand-in target (lr 1.0, measured nothing) where an angle
    arm waits for `--match-angles`: the arm is read at its matched arm's choice, as on the prior."""
    params, world = grid(), World()
    params["train"]["protocol"] = {"match_angles": True}
    validate_params(params)
    waiting = Params.of(params)
    standing_in = dataclasses.replace(waiting, train=with_stand_in_angles(waiting.train))
    assert standing_in.train.angles[CELL]["gpt-angle"].stand_in
    lookup = {spec: world.result(spec) for spec in compared_runs(standing_in)}.get
    policy = cell_policy(standing_in, lookup, "cpu-4l", 64)
    assert policy.angle_arms["gpt-angle"].target.source == "prior"
    assert set(policy.of_arm("gpt-angle").values()) == {2e-3} and policy.notes == ()


def test_pruning_keeps_an_angle_arms_multiplier_1_in_its_window():
    """Successive halving keeps each arm's best at B and the one below it; an angle arm's window keeps its
    multiplier 1 instead, which its primary estimate reads above B: here the measured target's 8e-3, above
    gpt-angle's best 4e-3, which a window around the best would drop."""
    params, world = grid("largest", angles=measured(8e-3)), World()
    prunes, notes = proposed_prunes(Params.of(params), world.lookup(params), 2)
    assert notes == [] and {p["after_budget"] for p in prunes} == {BUDGETS[-2]}
    window = {p["arm"]: (p["best_lr"], p["learning_rates"]) for p in prunes}
    assert window["gpt-angle"] == (4e-3, [4e-3, 8e-3])
    assert window["gpt"] == window["ngpt"] == (2e-3, [1e-3, 2e-3])
    assert window["ngpt-angle"] == (2e-3, [1e-3, 2e-3])  # on the prior: gpt's choice, also its best
    params["train"]["pruned_sweeps"] = prunes
    validate_params(params)
    policy = cell_policy(Params.of(params), world.lookup(params), "cpu-4l", 64)
    assert policy.of_arm("gpt-angle") == dict.fromkeys(BUDGETS, 8e-3) and policy.notes == ()
    assert policy.angle_arms["gpt-angle"].tuned == dict.fromkeys(BUDGETS, 4e-3)
