"""The design's dose-response worlds (design/mechanisms.py): each arm planted a ln kappa and a ln angle per
step beside its speed-up, carried by the simulated runs where the speed-up stage reads them, and the real
dose-response reading (speedup/dose_response.py) checked against the reading the planted values give."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass

import numpy as np
import pytest
import yaml
from test_design import small_params

from ngptlab.cli import main
from ngptlab.design.dose_table import dose_table, scaled_noise
from ngptlab.design.loss_model import loss_model
from ngptlab.design.mechanisms import (
    ANGLE_LINE,
    BETA,
    CONDITIONING_LINE,
    GAMMA,
    MUON,
    DoseWorld,
    agrees,
    dose_worlds,
    expected_fits,
    label,
)
from ngptlab.design.simulate import planted_world, simulate
from ngptlab.design.table import right
from ngptlab.design.truths import Truth
from ngptlab.design.world import World
from ngptlab.grid.enumeration import compared_runs
from ngptlab.models import arms as arm_table
from ngptlab.settings import Params
from ngptlab.speedup.common_kappa import HEADS, kappa
from ngptlab.speedup.dose_response import CAPACITY, CONSISTENT, INCONSISTENT
from ngptlab.speedup.equivalence import NOT_RESOLVED
from ngptlab.speedup.reading import CONDITIONING, EFFECTIVE_LR
from ngptlab.speedup.rivals import angular_rate

SQUARE = ("gpt", "gpt-rownorm", "gpt-orth", "ngpt")
BOTH = (*SQUARE, "gpt-angle", "ngpt-angle")
DIAL = ("gpt-pc1", "gpt-pc2", "gpt-pc4")  # the PC layer's arms (models/arms.yaml)
MARGIN = 1.25


def by_name(arms) -> dict[str, DoseWorld]:
    return {w.label: w for w in dose_worlds(arms)}


def expected(world: DoseWorld, arms) -> dict[str, str]:
    return {name: label(read) for name, read in expected_fits(world, tuple(arms), "gpt", MARGIN).items()}


def test_a_world_is_planted_only_where_the_grid_has_its_arms():
    assert len(dose_worlds(SQUARE)) == 2  # the dose-response and capacity worlds
    assert len(dose_worlds(BOTH)) == 2 + 6  # and gpt-angle conditioned, all and part of the way, either line
    assert len(dose_worlds((*BOTH, *DIAL))) == 2 + 6 + 1  # the flat dial
    assert len(dose_worlds((*BOTH, *DIAL, MUON))) == 2 + 6 + 1 + 2  # gpt-muon well and ill conditioned
    assert len(dose_worlds(("gpt", "ngpt"))) == 1


def test_an_arm_without_a_place_of_its_own_sits_where_its_architecture_does():
    world = DoseWorld(CONDITIONING_LINE, 4.0)
    for arm in arm_table.names():
        kin = arm_table.arm(arm).architecture
        if arm not in (*BOTH, *DIAL, MUON):  # the arms with a place of their own
            assert world.mechanism(arm) == world.mechanism(kin), arm
            assert world.speedup(arm) == pytest.approx(world.speedup(kin)), arm
    assert world.mechanism("an arm not in the table") == world.mechanism("gpt")


def test_the_expected_reading_follows_from_the_planted_values():
    arms = (*BOTH, *DIAL, MUON)
    worlds = by_name(arms)
    line = worlds["dose-response: S follows kappa, ngpt and the dial on the line"]
    # ln S = beta (ln kappa - ln K): gpt-pc4 sits at ngpt's kappa (ln K / 5 = ln 4 nearly), so at its speed
    assert line.speedup("gpt-pc2") == pytest.approx(math.exp(BETA * (math.log(1000) / 3 - math.log(1000))))
    assert line.speedup("ngpt") == pytest.approx(4.0)
    assert line.speedup("gpt-orth") == pytest.approx(5.67, rel=0.01)
    fits = expected_fits(line, arms, "gpt", MARGIN)
    assert fits[CONDITIONING_LINE]["slope"] == pytest.approx(BETA)  # every arm on the planted line
    assert expected(line, arms)[CONDITIONING_LINE] == CONSISTENT
    assert expected(line, arms)[ANGLE_LINE].startswith(INCONSISTENT)
    capacity = worlds["capacity: the dial works, gpt-orth as slow as gpt"]
    assert expected(capacity, arms)[CONDITIONING_LINE] == CAPACITY
    flat = expected(worlds["flat dial: the dial moves kappa, S stays"], arms)[CONDITIONING_LINE]
    assert flat.startswith(INCONSISTENT) and all(arm in flat for arm in DIAL)
    assert expected(worlds["gpt-muon fast and well conditioned (on the kappa line)"], arms)[
        CONDITIONING_LINE] == CONSISTENT
    assert expected(worlds["gpt-muon fast and ill conditioned (gpt's kappa)"], arms)[
        CONDITIONING_LINE] == f"{INCONSISTENT} ({MUON})"
    for name, world in worlds.items():
        if name.startswith(("conditioning line", "angle line")):
            true, false = ((CONDITIONING_LINE, ANGLE_LINE) if world.account == CONDITIONING_LINE
                           else (ANGLE_LINE, CONDITIONING_LINE))
            assert expected(world, arms)[true] == CONSISTENT, name  # however far gpt-angle is conditioned
            assert expected(world, arms)[false].startswith(INCONSISTENT), name
    angle = worlds["angle line, gpt-angle conditioned all the way to ngpt's kappa"]
    assert angle.speedup("gpt-angle") == pytest.approx(4.0) and angle.speedup("ngpt-angle") == 1.0
    assert expected_fits(angle, arms, "gpt", MARGIN)[ANGLE_LINE]["slope"] == pytest.approx(GAMMA)


def test_an_inconsistent_reading_is_right_when_it_names_an_arm_that_departs():
    planted = {"reading": INCONSISTENT, "departs": ["gpt-angle", "ngpt"], "capacity": False}
    assert agrees({**planted, "departs": ["ngpt"]}, planted)
    assert agrees({**planted, "departs": ["ngpt", "gpt-rownorm"]}, planted)  # an edge arm named beside
    assert not agrees({**planted, "departs": ["gpt-rownorm"]}, planted)  # gpt-rownorm alone is on the line
    assert not agrees({**planted, "departs": []}, planted)  # the slope's sign is another reason
    assert not agrees({**planted, "reading": CONSISTENT, "departs": []}, planted)
    consistent = {"reading": CONSISTENT, "departs": [], "capacity": False}
    assert not agrees({**consistent, "capacity": True}, consistent)  # the capacity reading is another


def test_where_the_planted_values_read_not_resolved_the_worlds_construction_decides():
    """An arm at the margin's edge: noise decides the side, so a decisive reading is right where the world
    makes it so, and wrong where it contradicts the world."""
    edge = {"reading": NOT_RESOLVED, "departs": [], "capacity": False}
    inconsistent = {"reading": INCONSISTENT, "departs": ["gpt-pc4"], "capacity": False}
    consistent = {"reading": CONSISTENT, "departs": [], "capacity": False}
    only_ngpt, true = Truth("ngpt only", 1.5), Truth("account true", 1.5)
    assert right(edge, edge, only_ngpt, CONDITIONING)
    assert right(inconsistent, edge, only_ngpt, CONDITIONING)  # only ngpt fast: the account is false
    assert not right(consistent, edge, only_ngpt, CONDITIONING)
    assert right(consistent, edge, true, CONDITIONING)
    assert not right(inconsistent, edge, true, CONDITIONING)
    assert not right(consistent, edge, true, EFFECTIVE_LR)  # account true makes the angle account false
    # a decisive planted reading is not relaxed: naming an arm on the line stays wrong
    planted = {"reading": INCONSISTENT, "departs": ["gpt-rownorm"], "capacity": False}
    assert not right(inconsistent, planted, only_ngpt, CONDITIONING)


def wide_params(arms=BOTH, seeds=3) -> dict:
    """small_params with budgets over x16 (gpt-orth's planted x5.7 measurable) and seed 0 choosing the
    learning rate, `seeds` more estimating."""
    params = small_params(protocol=False)
    train = params["train"]
    train.update(arms=list(arms), budgets=[2048, 4096, 8192, 16384, 32768], seeds=[0],
                 learning_rates={"cpu-4l": {arm: [1e-3, 2e-3, 4e-3] for arm in arms}},
                 protocol={"add_seeds": seeds})
    params["design"] = {}
    return params


def test_the_runs_carry_the_planted_kappa_and_angle_and_the_losses_stay_as_they_were():
    params = Params.of(wide_params())
    model = loss_model(params)
    world = by_name(BOTH)["conditioning line, gpt-angle conditioned 0.6 of the way to ngpt's kappa"]

    @dataclass(frozen=True)
    class SameSpeeds(Truth):  # the world's speed-ups, no mechanisms
        def speedup(self, arm: str) -> float:
            return world.speedup(arm)

        def mechanism(self, arm: str) -> None:
            return None

    specs = compared_runs(params)
    planted = planted_world(params, model, world, 0, 0, 0)
    plain = planted_world(params, model, SameSpeeds("dose", 4.0), 0, 0, 0)
    for spec in specs:
        run, bare = planted.result_of(spec), plain.result_of(spec)
        assert run.curve == bare.curve and bare.observed == {}
        ln_kappa, ln_angle = world.mechanism(spec.arm)
        drawn = planted.noise[("kappa", spec.cell, spec.arm, spec.seed)]
        assert math.log(kappa(run)[HEADS]) == pytest.approx(ln_kappa + drawn)
        assert math.log(angular_rate(run)) == pytest.approx(
            ln_angle + planted.noise[("angle", spec.cell, spec.arm, spec.seed)])
    # gpt-angle 0.6 of the way from gpt's ln kappa to ngpt's
    assert world.mechanism("gpt-angle")[0] == pytest.approx(math.log(1000) + 0.6 * math.log(4 / 1000))
    # the seed noise: sd kappa_sd in ln kappa, twice it at x2
    spec = specs[0]
    for noise in (1, 2):
        noisy = scaled_noise(model, noise)
        worlds = [World(noisy, world, 1024, np.random.default_rng(i)) for i in range(400)]
        drawn = [math.log(kappa(w.result_of(spec))[HEADS]) for w in worlds]
        assert statistics.stdev(drawn) == pytest.approx(0.15 * noise, rel=0.15)


def test_the_simulated_reading_agrees_with_the_planted_one_and_the_true_account_is_never_inconsistent():
    """Four worlds each of the dose-response world and gpt-angle conditioned all the way to ngpt's kappa
    under either line: the conditioning line's reading right in most, the true account never read
    inconsistent, the false one never consistent (and read right in at least half)."""
    params = Params.of(wide_params())
    named = by_name(BOTH)
    worlds = [named["dose-response: S follows kappa, ngpt and the dial on the line"],
              named["conditioning line, gpt-angle conditioned all the way to ngpt's kappa"],
              named["angle line, gpt-angle conditioned all the way to ngpt's kappa"]]
    outcomes, _ = simulate(params, loss_model(params), worlds, 4, seed=0, jobs=1, stream=(1, 1))
    table = dose_table({1: outcomes}, worlds)
    by_world = {s["world"]: s["cells"]["cpu-4l-ctx128"] for s in table["scenarios"]}
    for world in worlds:
        accounts = by_world[world.label]
        true = accounts[world.account]
        false = accounts[ANGLE_LINE if world.account == CONDITIONING_LINE else CONDITIONING_LINE]
        assert not any(words.startswith(INCONSISTENT) for words in true["readings"]), world.label
        # the rest "not resolved": an arm beyond this small grid's budgets in a seed leaves it one seed
        assert false["consistent"]["p"] == 0 and false["correct"]["p"] >= 0.5, world.label
        if world.account == CONDITIONING_LINE:
            assert true["correct"]["p"] >= 0.75, world.label
            assert true["slope"]["planted"] == pytest.approx(BETA)
    checks = {(c["world"], c["account"], c["check"].split(" ")[0]) for c in table["thresholds"]}
    assert len(checks) == len(table["thresholds"])  # one check of each kind per world and account
    assert table["passed"] is all(c["passed"] for c in table["thresholds"])


def test_design_command_reports_the_dose_response_worlds_at_both_noise_levels(tmp_path, capsys):
    params_file = tmp_path / "params.yaml"
    # the 2x2 and one level of the dial: on the 2x2 alone gpt-orth's capacity cost leaves ngpt the only arm
    # that moved kappa, and the capacity world reads not resolved
    params_file.write_text(yaml.safe_dump(wide_params(arms=(*SQUARE, "gpt-pc2"), seeds=2), sort_keys=False))
    assert main(["design", "--params", str(params_file), "--worlds", "1", "--jobs", "1", "--json",
                 "--only", "dose-response"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    dose = doc["dose_response"]
    assert doc["scenarios"] == [] and dose["noises"] == [1, 2] and dose["kappa_sd"] == 0.15
    assert [(s["world"].split(":")[0], s["noise"]) for s in dose["scenarios"]] == [
        ("dose-response", 1), ("capacity", 1), ("flat dial", 1), ("dose-response", 2), ("capacity", 2),
        ("flat dial", 2)]
    assert len(err.splitlines()) == 6 and "at x2 seed noise (flat dial" in err.splitlines()[-1]
    assert doc["passed"] is dose["passed"]
    assert main(["design", "--params", str(params_file), "--worlds", "1", "--jobs", "1",
                 "--only", "dose-response", "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "capacity: the dial works, gpt-orth as slow as gpt — cpu-4l-ctx128, x2 seed noise" in text
    assert f"conditioning account, expected {CAPACITY}: correct" in text
    assert "coverage of the conditioning slope's interval" in text
