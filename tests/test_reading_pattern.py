"""The reading tests the account's whole pattern, through the real `ngptlab speedup` on planted worlds.

The worlds are the design's loss model (ngptlab.design) with its default seed noise, written as the train
stage writes its results; four seeds sweep four learning rates over the 2x2 at budgets x2 apart. Where only
ngpt is fast, or conditioning does half of it, the conditioning main effect still exceeds the margin (it
carries half of ngpt's speed-up), but the account's pattern does not hold: the reading must never say
"consistent" there, and must say it where gpt-orth is as fast as ngpt and gpt-rownorm as gpt; the norm
account, its mirror, likewise. These worlds' runs log no kappa and no angle (as runs trained before they were
logged), so the conditioning and effective-learning-rate accounts fall back to their label patterns (source
"labels"); the norm account is read by its pattern always (source "construction"). Where the runs measure
them, the accounts are read from the arms' measured mechanisms (tests/test_dose_response.py, and below the
design's planted placements).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest
from test_lr_policy_drift import CELL, params_file, write_result

from ngptlab.cli import main
from ngptlab.config.load import load_params
from ngptlab.design.loss_model import loss_model
from ngptlab.design.mechanisms import DoseWorld, agrees, dose_worlds, expected_fits, read_fits
from ngptlab.design.truths import SENSITIVITY, Truth
from ngptlab.design.world import World
from ngptlab.grid.enumeration import compared_runs
from ngptlab.results import train_dir
from ngptlab.speedup.equivalence import NOT_RESOLVED
from ngptlab.speedup.reading import CONDITIONING, CONSISTENT, EFFECTIVE_LR, INCONSISTENT, NORM

ARMS = ["gpt", "gpt-rownorm", "gpt-orth", "ngpt"]


@dataclass(frozen=True)
class Unmeasured(Truth):
    """A planted world whose runs log neither kappa nor the angle per step."""

    def mechanism(self, arm: str) -> None:
        return None


def unmeasured(truth: Truth) -> Unmeasured:
    return Unmeasured(truth.account, truth.ngpt, truth.lr_laws)


@pytest.mark.parametrize("truth, expected, norm", [
    (Truth("account true", 4.0), CONSISTENT, NORM.inconsistent),
    (Truth("ngpt only", 4.0), INCONSISTENT, NORM.inconsistent),
    (Truth("partial", 4.0), INCONSISTENT, NORM.inconsistent),
    (Truth("account false", 4.0), INCONSISTENT, NORM.consistent),
    # one learning-rate grid for arms of unequal learning-rate laws (curvature, optimum, drift): the flatter
    # ngpt gains under the null, the sharper gpt-orth loses where the account holds, yet neither reads as
    # the other account
    (Truth(*SENSITIVITY[0]), INCONSISTENT, NORM.inconsistent),
    (Truth(*SENSITIVITY[1]), CONSISTENT, NORM.inconsistent)])
def test_the_reading_is_the_accounts_pattern_never_its_primary_effect_alone(tmp_path, truth, expected, norm):
    path = params_file(tmp_path, "crossing", arms=ARMS, seeds=[0, 1, 2, 3], design={})
    params = load_params(path)
    account = truth.account
    world = World(loss_model(params), unmeasured(truth), params.train.eval_every_tokens,
                  np.random.default_rng(7))
    for spec in compared_runs(params):
        write_result(tmp_path, world.result_of(spec))
    assert main(["speedup", "--params", str(path), CELL, "--root", str(tmp_path)]) == 0
    reading = json.loads((tmp_path / "results" / "speedup" / f"{CELL}.json").read_text())["reading"]
    assert reading["pattern_reading"] == expected and reading["reading"].startswith(expected)
    assert reading["accounts"]["norm"]["reading"] == norm and f"; {norm}" in reading["reading"]
    sources = {name: a["source"] for name, a in reading["accounts"].items()}
    assert sources == {"conditioning": "labels", "norm": "construction", "effective learning rate": "labels"}
    assert "by the arms' labels" in reading["accounts"]["conditioning"]["words"]
    assert "no kappa or angular rate" in reading["accounts"]["conditioning"]["words"]
    statuses = {(t["a"], t["b"]): t["status"] for t in reading["pattern"]}
    assert len(statuses) == 4
    if account in ("ngpt only", "partial"):  # the primary effect alone would have said "consistent"
        assert reading["verdict"] == "exceeds by more than x1.25"
        assert statuses[("gpt-orth", "ngpt")] == "shown not to hold"


@pytest.mark.parametrize("truth, readings", [
    (Truth("angle account", 4.0), {"conditioning": INCONSISTENT, "norm": NORM.inconsistent,
                                   "effective learning rate": EFFECTIVE_LR.consistent}),
    (Truth("account true", 4.0), {"conditioning": CONSISTENT, "norm": NORM.inconsistent,
                                  "effective learning rate": EFFECTIVE_LR.inconsistent}),
    (Truth("ngpt only", 4.0), {"conditioning": INCONSISTENT, "norm": NORM.inconsistent,
                               "effective learning rate": EFFECTIVE_LR.inconsistent})])
def test_both_squares_read_each_account_by_its_pattern(tmp_path, capsys, truth, readings):
    """Planted worlds over both squares: each account reads as its pattern says, the angle square is a
    factorial of its own, and the angle account's test replaces the confound clause."""
    arms = [*ARMS, "gpt-angle", "ngpt-angle"]
    path = params_file(tmp_path, "crossing", arms=arms, seeds=[0, 1, 2, 3], design={})
    params = load_params(path)
    world = World(loss_model(params), unmeasured(truth), params.train.eval_every_tokens,
                  np.random.default_rng(7))
    for spec in compared_runs(params):
        write_result(tmp_path, world.result_of(spec))
    assert main(["speedup", "--params", str(path), CELL, "--root", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "results" / "speedup" / f"{CELL}.json").read_text())
    assert {name: a["reading"] for name, a in doc["reading"]["accounts"].items()} == readings
    source = {"conditioning": "labels", "norm": "construction", "effective learning rate": "labels"}
    said = "; ".join(f"{name} account {words.split(' with ')[0]} ({source[name]})"
                     for name, words in readings.items())
    assert f"  reading: {said}\n" in capsys.readouterr().out  # the command's one line per account
    assert doc["reading"]["reading"] == "; ".join(readings.values())  # no confound clause beside them
    angle = doc["angle_factorial"]["effects"]["angle"]
    expected = "exceeds by more than x1.25" if truth.account == "angle account" else "equivalent within x1.25"
    assert angle["verdict"] == expected


def write_measured(root, result) -> None:
    """write_result, and the run's planted kappa and angle per step in the metrics row of their tokens, as
    the train stage logs them (observe/observer.py)."""
    write_result(root, result)
    path = train_dir(root, result.spec) / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for key, entries in result.observed.items():
        for tokens, values in entries:
            next(r for r in rows if r["tokens"] == int(tokens))[key] = values
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def conditioned_all_the_way() -> DoseWorld:
    return next(w for w in dose_worlds([*ARMS, "gpt-angle", "ngpt-angle"])
                if w.label == "conditioning line, gpt-angle conditioned all the way to ngpt's kappa")


@pytest.mark.parametrize("truth, arms, conditioning, effective_lr", [
    # conditioning explains the speed-up and setting gpt-angle's angle conditions it like ngpt: the label
    # pattern (gpt-angle as slow as gpt, gpt-orth as fast as ngpt) read the true account inconsistent
    (conditioned_all_the_way(), [*ARMS, "gpt-angle", "ngpt-angle"], CONDITIONING.consistent,
     EFFECTIVE_LR.inconsistent),
    # only ngpt fast, on the 2x2: gpt-orth (kappa 1) below the line through ngpt reads as the capacity cost,
    # which leaves ngpt the only arm that moved kappa: a line through one arm tests nothing, not resolved
    # (the label pattern read inconsistent; the dial tells the two apart: design/truths.py)
    (Truth("ngpt only", 4.0), ARMS, NOT_RESOLVED, None)])
def test_the_accounts_are_read_from_the_arms_measured_mechanisms(tmp_path, truth, arms, conditioning,
                                                                  effective_lr):
    """Worlds planting each arm's kappa and angle per step (design/placements.py) through the real `ngptlab
    speedup`: the headline reads both accounts from the dose-response fits, as the planted values read
    (design/mechanisms.py expected_fits), whatever the label pattern says, and no confound clause where the
    angle line is fitted over every arm's measured angle."""
    path = params_file(tmp_path, "crossing", arms=arms, seeds=[0, 1, 2, 3], design={})
    params = load_params(path)
    world = World(loss_model(params), truth, params.train.eval_every_tokens, np.random.default_rng(7))
    for spec in compared_runs(params):
        write_measured(tmp_path, world.result_of(spec))
    assert main(["speedup", "--params", str(path), CELL, "--root", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "results" / "speedup" / f"{CELL}.json").read_text())
    reading, dose = doc["reading"], doc["dose_response"]
    expected = expected_fits(truth, tuple(doc["arms_order"]), "gpt", 1.25)
    accounts = reading["accounts"]
    assert accounts["conditioning"]["source"] == accounts["effective learning rate"]["source"] == "measured"
    assert accounts["conditioning"]["reading"] == conditioning
    assert accounts["conditioning"]["by_labels"] == CONDITIONING.inconsistent  # what the headline said before
    assert reading["pattern_reading"] == conditioning
    assert reading["reading"].startswith(CONDITIONING.sentence(conditioning) + "; ")
    for name, fit in read_fits(dose["accounts"]).items():
        assert agrees(fit, expected[name]), (name, fit, expected[name])
        assert accounts[name]["words"] == dose["accounts"][name]["words"]
    if effective_lr is not None:
        assert accounts["effective learning rate"]["reading"] == effective_lr
    assert reading["effective_lr_clause"] is None
    assert "by the effective learning rate" not in reading["reading"]
