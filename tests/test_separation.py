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
from ngptlab.speedup.common_kappa import HEAD_KEYS, HEADS
from ngptlab.speedup.equivalence import NOT_RESOLVED
from ngptlab.speedup.separation import CANNOT, DRIFTED, KEEPS, SEPARATES, arm_separation
from ngptlab.stats import mean_sd_interval

ARMS = ["gpt", "gpt-rownorm", "gpt-orth", "ngpt", "gpt-angle", "ngpt-angle"]
KAPPA = {"gpt": 1800.0, "ngpt": 220.0, "gpt-rownorm": 900.0, "gpt-orth": 30.0}  # planted, heads of layers 3-4


GROWN_AT = 65536  # tokens at which a growing kappa is the planted value


def plant_kappa(root, spec, value: float, growth: float = 0.0) -> None:
    """Every metrics row (an evaluation point at t tokens) observes value (t / GROWN_AT)^growth as every
    layer 3-4 Q and K head median: growth 0, the same kappa throughout training."""
    path = train_dir(root, spec) / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        row["kappa"] = dict.fromkeys(HEAD_KEYS, value * (row["tokens"] / GROWN_AT) ** growth)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def planted_cell(tmp_path, angle_kappa: dict[str, float], seeds=(0, 1, 2, 3), growth: float = 0.0) -> dict:
    path = params_file(tmp_path, "crossing", arms=ARMS, seeds=list(seeds), design={})
    params = load_params(path)
    world = World(loss_model(params), Truth("angle account", 4.0), params.train.eval_every_tokens,
                  np.random.default_rng(7))
    noise = np.random.default_rng(3)
    for spec in compared_runs(params):
        write_result(tmp_path, world.result_of(spec))
        planted = {**KAPPA, **angle_kappa}[spec.arm]
        plant_kappa(tmp_path, spec, planted * math.exp(0.1 * noise.standard_normal()), growth)
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
    assert gpt_angle["own"] == "gpt" and gpt_angle["other"] == "ngpt" and gpt_angle["margin"] == 2.0
    assert gpt_angle["to_own"]["n_seeds"] == 4 and gpt_angle["to_own"]["level"] == 0.95
    assert gpt_angle["kappa_ratio"]["to_own"] == pytest.approx(angle_kappa["gpt-angle"] / 1800, rel=0.2)
    assert gpt_angle["kappa_ratio"]["to_other"] == pytest.approx(angle_kappa["gpt-angle"] / 220, rel=0.2)
    said = doc["reading"]["separation_clause"]
    assert doc["reading"]["reading"].endswith(f"; {said}")  # after the accounts' readings
    lead = f"the angle square {verdict}" if verdict != NOT_RESOLVED else \
        "not resolved whether the angle square separates the accounts"
    assert said.startswith(lead + ": gpt-angle " + verdicts["gpt-angle"]) and "95% paired t" in said
    assert f"at {found['kappa_tokens']:,.0f} tokens" in said and "margin x2" in said


def test_one_seed_gives_no_interval_and_no_verdict(tmp_path):
    doc = planted_cell(tmp_path, {"gpt-angle": 250.0, "ngpt-angle": 260.0}, seeds=(0,))
    entry = doc["separation"]["arms"]["gpt-angle"]
    assert entry["to_own"]["interval"] is None and entry["verdict"] == NOT_RESOLVED
    assert "no interval" in doc["reading"]["separation_clause"]


def test_each_arm_is_read_by_two_one_sided_tests_against_the_kappa_margin():
    rng = np.random.default_rng(0)
    gpt, ngpt = np.log(1000) + rng.normal(0, 0.1, 5), np.log(100) + rng.normal(0, 0.1, 5)
    arm = np.log(800) + rng.normal(0, 0.1, 5)
    log_kappa = {name: dict(enumerate(values)) for name, values in
                 (("gpt", gpt), ("ngpt", ngpt), ("gpt-angle", arm), ("ngpt-angle", arm))}
    kept = arm_separation(log_kappa, "gpt-angle", margin=2.0)
    for key, d in (("to_own", arm - gpt), ("to_other", arm - ngpt), ("gap", gpt - ngpt)):
        t = stats.t(df=4, loc=d.mean(), scale=stats.sem(d))
        assert kept[key]["interval"] == pytest.approx(list(t.interval(0.95)))
    lo, hi = kept["to_own"]["interval"]
    assert -math.log(2) < lo and hi < math.log(2) and kept["to_own"]["claim"] == "equivalent"
    assert kept["gap"]["claim"] == "exceeds" and kept["verdict"] == KEEPS
    # ngpt-angle at the same kappa sits within x2 of gpt's, the other architecture's
    drifted = arm_separation(log_kappa, "ngpt-angle", margin=2.0)
    assert drifted["to_other"]["claim"] == "equivalent" and drifted["verdict"] == DRIFTED
    # a margin the seeds cannot show: not resolved, not kept
    assert arm_separation(log_kappa, "gpt-angle", margin=1.1)["verdict"] == NOT_RESOLVED
    # no gap between the architectures: nothing to separate by, whatever the arm's kappa
    flat = {**log_kappa, "ngpt": log_kappa["gpt"]}
    assert arm_separation(flat, "gpt-angle", margin=2.0)["verdict"] == NOT_RESOLVED
    # a gap shown beyond the margin but under twice it: an arm halfway is within x2 of both, so neither
    tight = rng.normal(0, 0.01, 5)
    near = {"gpt": dict(enumerate(np.log(300) + tight)), "ngpt": dict(enumerate(np.log(100) + tight)),
            "gpt-angle": dict(enumerate(np.log(math.sqrt(300 * 100)) + tight))}
    halfway = arm_separation(near, "gpt-angle", margin=2.0)
    assert halfway["gap"]["claim"] == "exceeds"
    assert halfway["to_own"]["claim"] == halfway["to_other"]["claim"] == "equivalent"
    assert halfway["verdict"] == NOT_RESOLVED


GROWTH = 1.5  # kappa ~ tokens^1.5: x2.8 between budgets x2 apart


def last_kappas(root, doc: dict) -> dict[str, list[float]]:
    """arm -> ln of each estimate run's last kappa of the heads (what each arm was read at before the
    common token count), from the runs' metrics rows."""
    out = {}
    for arm, entries in doc["kappa_common"]["arms"].items():
        out[arm] = []
        for e in entries:
            rows = (root / "results" / "train" / CELL / e["run"] / "metrics.jsonl").read_text().splitlines()
            out[arm].append(math.log(json.loads(rows[-1])["kappa"][HEAD_KEYS[0]]))
    return out


def test_kappa_growing_with_tokens_separates_when_read_at_a_common_token_count(tmp_path):
    """kappa grows with tokens, every angle arm keeps its architecture's, and the estimate runs end at
    different budgets (the fast arms' sooner): read at each run's last, ngpt-angle (trained longest) sits
    nearer gpt's, so the midpoint rule read "cannot separate"; read at T_common, every arm keeps its own."""
    doc = planted_cell(tmp_path, {"gpt-angle": 1500.0, "ngpt-angle": 260.0}, growth=GROWTH)
    common = doc["kappa_common"]
    budgets = {arm: {int(e["run"].split("-t")[1].split("-")[0]) for e in entries}
               for arm, entries in common["arms"].items()}
    assert budgets["gpt"] == {65536} and budgets["ngpt"] == budgets["gpt-angle"] == {32768}
    assert budgets["ngpt-angle"] == {131072}
    assert common["tokens"] == 32768  # the fewest tokens among the runs' last kappas
    read = {e[HEADS]["tokens"] for entries in common["arms"].values() for e in entries}
    assert read == {32768}  # an evaluation point of every run: nothing interpolated
    # the last kappas: ngpt-angle's position against the midpoint, signed towards ngpt, wholly below 0
    last = {arm: np.array(v) for arm, v in last_kappas(tmp_path, doc).items()}
    position = -(last["ngpt-angle"] - (last["ngpt"] + last["gpt"]) / 2)
    assert mean_sd_interval(list(position))["interval"][1] < 0
    found = doc["separation"]
    assert found["kappa_tokens"] == 32768
    assert {e["verdict"] for e in found["arms"].values()} == {KEEPS} and found["verdict"] == SEPARATES
    assert found["arms"]["ngpt-angle"]["kappa_ratio"]["to_own"] == pytest.approx(260 / 220, rel=0.15)


def test_real_drift_still_cannot_separate_when_kappa_grows_with_tokens(tmp_path):
    """gpt-angle conditioned like ngpt, kappa growing with tokens, runs ending at different budgets."""
    doc = planted_cell(tmp_path, {"gpt-angle": 250.0, "ngpt-angle": 260.0}, growth=GROWTH)
    found = doc["separation"]
    assert found["arms"]["gpt-angle"]["verdict"] == DRIFTED and found["verdict"] == CANNOT
    assert found["arms"]["gpt-angle"]["to_other"]["claim"] == "equivalent"


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
