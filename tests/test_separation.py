"""Whether the angle square can separate the accounts (speedup/separation.py): each angle arm's conditioning
against gpt's and ngpt's, paired by seed, through the real `ngptlab speedup` on planted worlds whose runs
also carry a planted kappa of the layer 3-4 Q and K heads."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from scipy import stats
from test_lr_policy_drift import CELL, params_file, write_result

from ngptlab.cli import main
from ngptlab.config.load import load_params
from ngptlab.design.loss_model import loss_model
from ngptlab.design.truths import Truth
from ngptlab.design.world import World
from ngptlab.grid.enumeration import compared_runs
from ngptlab.models.arms import turns_like
from ngptlab.models.registry import recipe_of
from ngptlab.report.command import render_report, write_report
from ngptlab.report.kit.load import load_results
from ngptlab.report.sections.accounts import prior_angle_text
from ngptlab.results import train_dir
from ngptlab.settings import MatchedAngle
from ngptlab.speedup.common_kappa import HEAD_KEYS
from ngptlab.speedup.equivalence import NOT_RESOLVED
from ngptlab.speedup.separation import CANNOT, DRIFTED, KEEPS, SEPARATES, arm_separation

ARMS = ["gpt", "gpt-rownorm", "gpt-orth", "ngpt", "gpt-angle", "ngpt-angle"]
KAPPA = {"gpt": 1800.0, "ngpt": 220.0, "gpt-rownorm": 900.0, "gpt-orth": 30.0}  # planted, heads of layers 3-4


def plant_kappa(root, spec, value: float) -> None:
    """The run's last metrics row observes `value` as every layer 3-4 Q and K head median."""
    path = train_dir(root, spec) / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[-1]["kappa"] = dict.fromkeys(HEAD_KEYS, value)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def planted_cell(tmp_path, angle_kappa: dict[str, float], seeds=(0, 1, 2, 3)) -> dict:
    path = params_file(tmp_path, "crossing", arms=ARMS, seeds=list(seeds), design={})
    params = load_params(path)
    world = World(loss_model(params), Truth("angle account", 4.0), params.train.eval_every_tokens,
                  np.random.default_rng(7))
    noise = np.random.default_rng(3)
    for spec in compared_runs(params):
        write_result(tmp_path, world.result_of(spec))
        planted = {**KAPPA, **angle_kappa}[spec.arm]
        plant_kappa(tmp_path, spec, planted * math.exp(0.1 * noise.standard_normal()))
    assert main(["speedup", CELL, "--params", str(path), "--root", str(tmp_path)]) == 0
    return json.loads((tmp_path / "results" / "speedup" / f"{CELL}.json").read_text())


@pytest.mark.parametrize("angle_kappa, verdicts, verdict", [
    # each angle arm keeps its architecture's conditioning: the square separates the accounts
    ({"gpt-angle": 1500.0, "ngpt-angle": 260.0}, {"gpt-angle": KEEPS, "ngpt-angle": KEEPS}, SEPARATES),
    # gpt-angle's conditioning drifted to ngpt's: the square cannot tell the accounts apart
    ({"gpt-angle": 250.0, "ngpt-angle": 260.0}, {"gpt-angle": DRIFTED, "ngpt-angle": KEEPS}, CANNOT),
    # gpt-angle halfway (the geometric mean of gpt's and ngpt's): not resolved
    ({"gpt-angle": math.sqrt(1800.0 * 220.0), "ngpt-angle": 260.0},
     {"gpt-angle": NOT_RESOLVED, "ngpt-angle": KEEPS}, NOT_RESOLVED)])
def test_the_reading_says_whether_the_angle_square_separates_the_accounts(tmp_path, angle_kappa, verdicts,
                                                                           verdict):
    doc = planted_cell(tmp_path, angle_kappa)
    found = doc["separation"]
    assert {arm: e["verdict"] for arm, e in found["arms"].items()} == verdicts
    assert found["verdict"] == verdict
    gpt_angle = found["arms"]["gpt-angle"]
    assert gpt_angle["own"] == "gpt" and gpt_angle["other"] == "ngpt"
    assert gpt_angle["position"]["n_seeds"] == 4 and gpt_angle["position"]["level"] == 0.95
    assert gpt_angle["kappa_ratio"]["to_own"] == pytest.approx(angle_kappa["gpt-angle"] / 1800, rel=0.2)
    said = doc["reading"]["separation_clause"]
    assert doc["reading"]["reading"].endswith(f"; {said}")  # after the accounts' readings
    lead = f"the angle square {verdict}" if verdict != NOT_RESOLVED else \
        "not resolved whether the angle square separates the accounts"
    assert said.startswith(lead + ": gpt-angle " + verdicts["gpt-angle"]) and "95% paired t" in said


def test_one_seed_gives_no_interval_and_no_verdict(tmp_path):
    doc = planted_cell(tmp_path, {"gpt-angle": 250.0, "ngpt-angle": 260.0}, seeds=(0,))
    entry = doc["separation"]["arms"]["gpt-angle"]
    assert entry["position"]["interval"] is None and entry["verdict"] == NOT_RESOLVED
    assert "no interval" in doc["reading"]["separation_clause"]


def test_the_position_is_a_paired_t_interval_towards_the_arms_own_architecture():
    rng = np.random.default_rng(0)
    gpt, ngpt = np.log(1000) + rng.normal(0, 0.2, 5), np.log(100) + rng.normal(0, 0.2, 5)
    arm = np.log(600) + rng.normal(0, 0.2, 5)
    log_kappa = {name: dict(enumerate(values)) for name, values in
                 (("gpt", gpt), ("ngpt", ngpt), ("gpt-angle", arm), ("ngpt-angle", arm))}
    position = arm - (gpt + ngpt) / 2
    t = stats.t(df=4, loc=position.mean(), scale=stats.sem(position))
    kept = arm_separation(log_kappa, "gpt-angle")
    assert kept["position"]["interval"] == pytest.approx(list(t.interval(0.95)))
    assert kept["verdict"] == KEEPS  # 600 sits nearer 1000 than 100 on the ln scale
    # ngpt-angle at the same kappa sits nearer gpt's, the other architecture's: its sign turns
    drifted = arm_separation(log_kappa, "ngpt-angle")
    assert drifted["position"]["mean"] == pytest.approx(-position.mean()) and drifted["verdict"] == DRIFTED
    # no gap between the architectures: nothing to separate by, whatever the position
    flat = {**log_kappa, "ngpt": log_kappa["gpt"]}
    assert arm_separation(flat, "gpt-angle")["verdict"] == NOT_RESOLVED


# Each arm's planted angle per step, x (0.01 rad for q, 0.02 for mlp_u): the angle arms, on the prior, short
# of the arms they should match as on the smoke grid (gpt-angle x0.125 ngpt's, ngpt-angle x0.55 gpt's)
TURNS = {"ngpt": 4.0, "gpt-angle": 0.5, "ngpt-angle": 0.55}


def test_the_report_shows_the_separation_and_the_realised_against_the_target_angle(tmp_path):
    """The section "Which account" on a planted cell whose runs logged their angle per step: the separation
    table, a figure per kind of each angle arm's realised angle beside its target, and, the angle arms
    having turned at the prior, that said plainly with their angle against the matched arm's."""
    doc = planted_cell(tmp_path, {"gpt-angle": 250.0, "ngpt-angle": 260.0})
    path = tmp_path / "params.yaml"
    params = load_params(path)
    for spec in compared_runs(params):  # every row turns each kind by its arm's planted angle
        rows_path = train_dir(tmp_path, spec) / "metrics.jsonl"
        rows = [json.loads(line) for line in rows_path.read_text().splitlines()]
        turns = TURNS.get(spec.arm, 1.0)
        for row in rows:
            row["step_angle"] = {"q": 0.01 * turns, "mlp_u": 0.02 * turns}
        rows_path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rendered = render_report(params, tmp_path, path)
    write_report(rendered, tmp_path / "reports")
    separation = (tmp_path / "reports" / "tables" / "separation.csv").read_text()
    assert "gpt-angle" in separation and DRIFTED in separation and CANNOT in separation
    figure = tmp_path / "reports" / "figures" / f"angles_{CELL}.svg"
    svg = figure.read_text()
    assert ">q<" in svg and ">mlp_u<" in svg and "target θ(t) of the angle arm" in svg
    assert doc["separation"]["verdict"] == CANNOT
    report = (tmp_path / "reports" / "report.md").read_text()
    assert (f"{CELL}: gpt-angle at the prior, not at ngpt's measured angle: it turned x0.12 ngpt's angle per "
            "step (mean over training and kinds); ngpt-angle at the prior, not at gpt's measured angle: it "
            "turned x0.55 gpt's") in report
    assert "`ngptlab plan --match-angles`" in report
    angles = next(t for t in rendered.document.tables if t.id == "angles")
    rows = {row[1]: dict(zip(angles.columns, row, strict=True)) for row in angles.rows}
    assert rows["gpt-angle"]["target_from"] == "prior"  # train/angle_targets.py's word for it
    assert rows["gpt-angle"]["to_matched"] == pytest.approx(0.125)
    # measured angles (train.angles, as `ngptlab plan --match-angles` writes them): nothing to say
    measured = {arm: MatchedAngle(1e-3, f"the-{like}-run", dict.fromkeys(recipe_of(arm).turned_kinds, 0.01))
                for arm, like in turns_like().items()}
    matched = dataclasses.replace(params, train=dataclasses.replace(params.train, angles={CELL: measured}))
    assert prior_angle_text(load_results(matched, tmp_path)) == ""
