"""`ngptlab design`: the simulator plays a design through the stages' own functions, so on one planted world
it must decide and estimate exactly what the real commands do on the same runs written to disk."""

from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats
from support import fixture_params

from ngptlab.cli import main
from ngptlab.config.load import load_params, read_mapping, validate_params
from ngptlab.design.command import measured_mechanism_sd, measured_seed_sd, with_design
from ngptlab.design.loss_model import loss_model
from ngptlab.design.measured_noise import pooled_mechanism_sd
from ngptlab.design.outcome import world_outcome
from ngptlab.design.printout import table_lines
from ngptlab.design.protocol import analysed_world
from ngptlab.design.simulate import planted_world
from ngptlab.design.table import cell_summary, design_table, estimate_summary
from ngptlab.design.truths import Truth, truths
from ngptlab.errors import ParamsError
from ngptlab.grid.enumeration import compared_runs
from ngptlab.grid.runs import RunSpec
from ngptlab.layout import REPO_ROOT
from ngptlab.results import train_dir
from ngptlab.settings import Params
from ngptlab.speedup.equivalence import held_claim
from ngptlab.speedup.reading import CONDITIONING, EFFECTIVE_LR

ARMS = ["gpt", "gpt-rownorm", "gpt-orth", "ngpt"]
CELL = "cpu-4l-ctx128"


def small_params(protocol: bool = True) -> dict:
    """One cell, the 2x2, three budgets of a few thousand tokens, three learning rates, two seeds; with
    protocol: prune to two learning rates above the middle budget, then add a seed."""
    params = fixture_params()
    train = params["train"]
    train.update(scales=["cpu-4l"], contexts=[128], arms=ARMS, budgets=[4096, 8192, 16384], seeds=[0, 1],
                 learning_rates={"cpu-4l": {arm: [1e-3, 2e-3, 4e-3] for arm in ARMS}}, eval_every_tokens=2048)
    if protocol:
        train["protocol"] = {"prune_sweeps": {"after_budget": 8192, "keep": 2}, "add_seeds": 1}
    params["speedup"].update(baseline="gpt", bootstrap=50, seed=0)
    # a noisy world at a 2x ngpt: the seeds and the learning rates the protocol picks differ by arm
    params["design"] = {"seed_sd": 0.01, "run_sd": 0.01, "amplitude": 40.0, "lr_curvature": 0.05}
    validate_params(params, source="small design")
    return params


def write_world_runs(root: Path, params: Params, world) -> None:
    """Every compared run of the grid not yet on disk, as the train stage writes it (summary.json and the
    validation rows of metrics.jsonl with the planted kappa and angle per step), from the world's planted
    results."""
    for spec in compared_runs(params):
        out = train_dir(root, spec)
        if (out / "summary.json").is_file():
            continue
        result = world.result_of(spec)
        out.mkdir(parents=True, exist_ok=True)
        rows = [{"step": int(t) // 512, "tokens": int(t), "val_loss": loss} for t, loss in result.curve]
        for key, entries in result.observed.items():  # the planted kappa and angle, where they are logged
            for tokens, values in entries:
                next(r for r in rows if r["tokens"] == int(tokens))[key] = values
        (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (out / "summary.json").write_text(json.dumps({"run": spec.name, "spec": spec.as_dict(),
                                                      "status": "completed",
                                                      "final_val_loss": result.final_val_loss}))


def test_simulated_world_equals_the_real_commands(tmp_path):
    params = small_params()
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(params, sort_keys=False))
    settings = Params.of(params)
    truth = Truth("account true", 2.0)
    world = planted_world(settings, loss_model(settings), truth, seed=3, truth_index=0, world_index=0)
    simulated = analysed_world(settings, world)
    decisions = simulated["decisions"]
    assert decisions["pruned_sweeps"] and decisions["added_seeds"]

    # the project's steps on disk: train (planted), prune, train, add seeds, train, speed-up
    (tmp_path / "src").symlink_to(REPO_ROOT / "src")  # the plan fingerprints the code under --root
    write_world_runs(tmp_path, load_params(params_file), world)
    # the design plays the protocol on the sweeps as they are, edges and all (this world's optimum falls below
    # the sweep at the largest budget): the commands are told to go on where they would refuse
    grow = ["plan", "--params", str(params_file), "--root", str(tmp_path), "--allow-untuned"]
    assert main([*grow, "--prune-sweeps", "2"]) == 0
    write_world_runs(tmp_path, load_params(params_file), world)
    assert main([*grow, "--add-seeds", "1"]) == 0
    write_world_runs(tmp_path, load_params(params_file), world)
    grown, written = load_params(params_file), read_mapping(params_file)
    assert written["train"]["pruned_sweeps"] == decisions["pruned_sweeps"]
    assert written["train"]["added_seeds"] == decisions["added_seeds"]
    assert compared_runs(grown) == compared_runs(simulated["params"])
    assert main(["speedup", "--params", str(params_file), CELL, "--root", str(tmp_path)]) == 0

    on_disk = json.loads((tmp_path / "results" / "speedup" / f"{CELL}.json").read_text())
    in_memory = json.loads(json.dumps(simulated["cells"][CELL]))
    assert on_disk["reading"] == in_memory["reading"]
    assert on_disk["factorial"] == in_memory["factorial"]
    for arm in ARMS:
        assert on_disk["arms"][arm]["per_seed"] == in_memory["arms"][arm]["per_seed"]
    assert [p["seed"] for p in on_disk["arms"]["ngpt"]["per_seed"]] == [0, 1, 2]  # the added seed entered
    assert on_disk == in_memory  # and so does everything else the document holds


def test_seed_noise_has_its_set_sd():
    params = small_params(protocol=False)
    params["design"] = {"seed_sd": 0.004, "seed_shared": 0.5, "trunk_sd": 0.0, "run_sd": 0.0}
    settings = Params.of(params)
    model = loss_model(settings)
    world = planted_world(settings, model, Truth("null", 1.0), seed=0, truth_index=0, world_index=0)
    seeds = range(4000)
    spec = lambda arm, s: RunSpec("cpu-4l", 128, arm, 8192, 2e-3, s)  # noqa: E731
    gpt = [world.result_of(spec("gpt", s)).final_val_loss for s in seeds]
    ngpt = [world.result_of(spec("ngpt", s)).final_val_loss for s in seeds]
    assert statistics.stdev(gpt) == pytest.approx(0.004, rel=0.05)
    assert statistics.correlation(gpt, ngpt) == pytest.approx(0.5, abs=0.05)  # seed_shared: the same batches
    # every budget and learning rate of an (arm, seed) shares its seed noise: no run noise here
    other = world.result_of(RunSpec("cpu-4l", 128, "gpt", 16384, 4e-3, 7)).final_val_loss
    planted = model.curve(1.0, 4e-3, 16384, np.array([16384]), 0.0)[0]
    assert other - planted == pytest.approx(gpt[7] - model.curve(1.0, 2e-3, 8192, np.array([8192]), 0.0)[0])


def test_wrong_directional_rate_read_against_a_null_that_does_not_hold():
    """Worlds planted with gpt-orth and ngpt at 1.5x, read against the null: every directional claim of the
    conditioning effect is then wrong, so the rate is the share of worlds whose documents make one."""
    params = small_params(protocol=False)
    params["train"]["seeds"] = [0, 1, 2]
    params = with_design(params, ["seed_sd=0.06", "run_sd=0.01"], "small design")
    model, planted, null = loss_model(params), Truth("account true", 1.5), Truth("null", 1.0)
    analysed = [analysed_world(params, planted_world(params, model, planted, 1, 0, w)) for w in range(6)]
    outcomes = [world_outcome(a, planted) for a in analysed]
    wrong = sum(held_claim(a["cells"][CELL]["reading"]["p_values"]) in ("exceeds", "falls_short")
                for a in analysed)
    assert 0 < wrong < 6
    rate = cell_summary([w[CELL] for w in outcomes], null, "conditioning", 1.25)["wrong_directional"]
    assert rate == {"p": wrong / 6, "se": math.sqrt(wrong / 6 * (1 - wrong / 6) / 6), "n": 6}
    # read against the truth that was planted, exceeding is the right claim
    against_planted = cell_summary([w[CELL] for w in outcomes], planted, "conditioning", 1.25)
    assert against_planted["wrong_directional"]["p"] == 0
    table = design_table([outcomes], [null], "conditioning", 1.25)
    # under the null the planted values read the measured accounts "cannot tell the accounts apart" and the
    # norm pattern inconsistent: "consistent" is false for all three
    accounts = ("conditioning", "norm", "effective learning rate")
    assert [c["check"] for c in table["thresholds"]] == [
        *(f"reading consistent with the {account} account, false here" for account in accounts),
        "wrong directional reading", "coverage of the primary effect's interval"]
    for check, account in zip(table["thresholds"][:3], accounts, strict=True):
        consistent = sum(o[CELL]["accounts"][account].startswith("consistent") for o in outcomes) / 6
        assert check["value"]["p"] == consistent
    assert table["thresholds"][3]["passed"] == (wrong / 6 <= 0.05)


def test_wrong_directional_counts_only_claims_the_truth_does_not_make():
    def outcome(claim):
        estimate = {"estimate": 0.1, "interval": [-0.2, 0.4], "planted": 0.0}
        return {"reading": "not resolved", "accounts": {}, "arms": [], "claim": claim, "holm_reading": None,
                "estimates": {"primary": estimate}}
    claims = ["exceeds", "falls_short", "equivalent", None, None, "exceeds", "equivalent", None, None, None]
    null = cell_summary([outcome(c) for c in claims], Truth("null", 1.0), "conditioning", 1.25)
    assert null["wrong_directional"]["p"] == pytest.approx(0.3)
    assert null["estimates"]["primary"]["coverage"]["p"] == 1.0
    true = cell_summary([outcome(c) for c in claims], Truth("account true", 4.0), "conditioning", 1.25)
    assert true["wrong_directional"]["p"] == pytest.approx(0.1)  # exceeds is the planted claim there
    assert true["expected_reading"].startswith("consistent")


def test_noise_from_a_pilot_inverts_the_first_order_law(tmp_path):
    params = Params.of(small_params(protocol=False))
    model = loss_model(params)
    # the target sits at the reference budget: middle, the geometric mean of 4,096 and 16,384 tokens
    slope = model.exponent * model.amplitude * 8192 ** -model.exponent
    log_var = 2 * (0.003**2 + model.trunk_sd**2 + model.run_sd**2) / slope**2  # seed_sd 0.003, no sharing
    arms = {"gpt": {"speedup": {"log": None}},
            "ngpt": {"speedup": {"log": {"sd": math.sqrt(log_var * 0.5), "df": 1}}},
            "gpt-orth": {"speedup": {"log": {"sd": math.sqrt(log_var * 1.25), "df": 2}}}}  # pooled: log_var
    out = tmp_path / "results" / "speedup" / f"{CELL}.json"
    out.parent.mkdir(parents=True)
    out.write_text(json.dumps({"baseline": "gpt", "arms": arms}))
    measured = measured_seed_sd(params, str(tmp_path))
    assert measured["df"] == 3 and measured["log_sd"] == pytest.approx(math.sqrt(log_var))
    # the seed sd is read at the sd's one-sided 80% upper confidence bound (chi-square, 3 df), not at the
    # point estimate that inverts to 0.003: a pilot's few seeds measure the sd loosely
    upper = math.sqrt(log_var * 3 / stats.chi2.ppf(0.2, 3))
    assert measured["log_sd_upper"] == pytest.approx(upper) and measured["confidence"] == 0.8
    per_arm = upper**2 * slope**2 / 2 - model.trunk_sd**2 - model.run_sd**2
    assert measured["seed_sd"] == pytest.approx(math.sqrt(per_arm)) and measured["seed_sd"] > 0.003



def dose_points(arm: str, kappas: list, angles: list) -> list[dict]:
    return [{"arm": arm, "seed": s, "y": 0.0, "x_kappa": k, "x_angle": a}
            for s, (k, a) in enumerate(zip(kappas, angles, strict=True))]


def test_noise_from_a_pilot_pools_kappa_and_angle_within_arm(tmp_path, capsys):
    # two cells' documents with planted points: within each arm the deviations are known, so the pooled
    # sd is sqrt(sum of squares / sum of (n - 1)); the arms' own levels (gpt's ln kappa 6.9, ngpt's 1.4)
    # must not enter it
    arms = {"gpt": {"speedup": {"log": None}}, "ngpt": {"speedup": {"log": {"sd": 0.05, "df": 2}}}}
    first = {"baseline": "gpt", "arms": arms, "dose_response": {"points": [
                 *dose_points("gpt", [6.8, 6.9, 7.0], [-4.6, -4.6, -4.6]),  # kappa SS 0.02; angle SS 0
                 *dose_points("ngpt", [1.2, 1.6, None], [-3.9, -3.8, -3.7]),  # kappa SS 0.08 (n 2); 0.02
                 *dose_points("gpt-orth", [0.0], [-4.5])]}}  # one seed: no df
    second = {"baseline": "gpt", "arms": arms,
              "dose_response": {"points": dose_points("gpt-muon", [2.3, 2.5], [-4.2, -4.4])}}  # 0.02; 0.02
    older = {"baseline": "gpt", "arms": arms}
    folder = tmp_path / "results" / "speedup"
    folder.mkdir(parents=True)
    for name, doc in (("a", first), ("b", second), ("c", older)):  # an older document: no dose_response
        (folder / f"{name}.json").write_text(json.dumps(doc))
    pooled = pooled_mechanism_sd(tmp_path)
    assert pooled["kappa_sd"][1] == 2 + 1 + 1 and pooled["kappa_sd"][0] == pytest.approx(math.sqrt(0.12 / 4))
    assert pooled["angle_sd"][1] == 2 + 2 + 1 and pooled["angle_sd"][0] == pytest.approx(math.sqrt(0.04 / 5))
    measured = measured_mechanism_sd(str(tmp_path))
    # each taken at its one-sided 80% upper confidence bound, as seed_sd is
    kappa_upper = math.sqrt(0.12 / stats.chi2.ppf(0.2, 4))
    assert measured["kappa_sd"]["value"] == pytest.approx(kappa_upper) and measured["kappa_sd"]["df"] == 4
    # the command sets the design's kappa_sd and angle_sd from them, and says so with their df
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(small_params(protocol=False), sort_keys=False))
    assert main(["design", "--params", str(params_file), "--worlds", "1", "--jobs", "1", "--json", "--only",
                 "labels", "--noise-from", str(tmp_path), "--no-progress"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["model"]["kappa_sd"] == pytest.approx(kappa_upper)
    assert doc["model"]["angle_sd"] == pytest.approx(math.sqrt(0.04 / stats.chi2.ppf(0.2, 5)))
    assert doc["noise_from"]["mechanisms"]["angle_sd"]["df"] == 5
    lines = table_lines({**doc, "scenarios": []})
    assert any(line.startswith("kappa_sd 0.2") and "(df 4)" in line for line in lines)
    # documents with no two seeds' points of any arm leave the design's own (and say so)
    (folder / "a.json").unlink()
    (folder / "b.json").unlink()
    assert pooled_mechanism_sd(tmp_path) == {}


def test_design_command_prints_the_table_as_json(tmp_path, capsys):
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(small_params(protocol=False), sort_keys=False))
    assert main(["design", "--params", str(params_file), "--worlds", "1", "--jobs", "1", "--json",
                 "--loss-model", "seed_sd=0.003", "--only", "labels"]) == 0  # dose-response: test_design_dose
    out, err = capsys.readouterr()
    doc = json.loads(out)  # stdout is the JSON alone: the progress lines go to stderr, one per truth
    said, first = err.splitlines(), doc["scenarios"][0]["truth"]
    assert len(said) == len(doc["scenarios"]) and all(s.startswith("ngptlab design: truth ") for s in said)
    assert said[0].startswith(f"ngptlab design: truth 1/{len(said)} ({first}): 1 world played (")
    assert doc["model"]["seed_sd"] == 0.003 and doc["worlds"] == 1
    assert [s["truth"] for s in doc["scenarios"]] == [
        f"{account}, ngpt x{s}" for account in ("account true", "account false", "ngpt only", "partial")
        for s in (1.5, 4)] + ["null", "null, ngpt curvature x0.5 optimum x1.41 drift x0.5",
                              "account true, ngpt x1.5, gpt-orth curvature x2 optimum x0.707, "
                              "ngpt curvature x0.5 optimum x1.41 drift x0.5"]
    # per truth: a correct-reading check of each account where the conditioning account, the norm account or
    # only ngpt is true (3), a "consistent" check of each account the world makes false or the planted
    # values read otherwise (design/truths.py MADE_TRUE), directional (null) and coverage (every truth).
    # Account true (x1.5 and its unequal-laws world: norm and the effective learning rate false; x4 also
    # conditioning, which the 2x2 reads not resolved there) 3 + 2 + 1 and 3 + 3 + 1; account false (two
    # false) 3 + 2 + 1 each; ngpt only (all three false) 3 + 3 + 1 each; partial (none false by construction,
    # none read consistent) 3 + 1 each; the null and its unequal-laws world 3 + 1 + 1 each
    assert len(doc["thresholds"]) == 2 * 6 + 7 + 2 * 6 + 2 * 7 + 2 * 4 + 2 * 5
    assert doc["gpu_hours"]["projected"] is None
    norm = [c for c in doc["thresholds"] if c["check"] == "correct reading of the norm account"]
    # at x1.5 (x4 lies beyond this small grid's budgets) one world at seed sd 0.003 reads the norm account
    assert len(norm) == 2 * 3 + 1 and all(c["passed"] for c in norm if "x4" not in c["truth"])
    assert main(["design", "--params", str(params_file), "--loss-model", "seed_sd=-1"]) == 2
    # design's --set was renamed: it fails naming --loss-model (plan's --set edits params keys)
    with pytest.raises(SystemExit) as exit_:
        main(["design", "--params", str(params_file), "--set", "seed_sd=0.003"])
    assert exit_.value.code == 2 and "--set is now --loss-model KEY=VALUE" in capsys.readouterr().err


@pytest.mark.parametrize("assignment, message", [
    ("seed_sd=.nan", "design.seed_sd: nan is not a finite number"),
    ("seed_sd", "--loss-model 'seed_sd': expected KEY=VALUE, e.g. --loss-model seed_sd=0.005"),
    ("slope=1", "--loss-model slope: not a loss-model parameter; keys: irreducible"),
])
def test_a_bad_design_assignment_is_refused_in_one_line(assignment, message):
    with pytest.raises(ParamsError, match=re.escape(message)):
        with_design(small_params(protocol=False), [assignment], "params.yaml")


def test_design_command_reads_a_list_of_baselines_by_its_primary(tmp_path, capsys):
    params = small_params(protocol=False)
    params["train"]["arms"] = [*ARMS, "gpt-qknorm"]
    params["train"]["learning_rates"]["cpu-4l"]["gpt-qknorm"] = [1e-3, 2e-3, 4e-3]
    params["speedup"]["baseline"] = ["gpt", "gpt-qknorm"]
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(params, sort_keys=False))
    # the planted optimum: the geometric centre of the primary baseline's sweep, as with one baseline
    assert loss_model(Params.of(params)).lr_optimum == pytest.approx(2e-3)
    assert main(["design", "--params", str(params_file), "--worlds", "1", "--jobs", "2", "--json",
                 "--no-progress"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["worlds"] == 1 and doc["model"]["lr_optimum"] == pytest.approx(2e-3)
    assert err == ""  # --no-progress: not a line on stderr (and over 2 processes, the same stdout)


def test_the_planted_optimum_reads_a_sweep_given_per_context():
    params = small_params(protocol=False)
    params["train"]["learning_rates"]["cpu-4l"]["gpt"] = {"ctx128": [1e-3, 2e-3, 4e-3]}
    assert loss_model(validate_params(params)).lr_optimum == pytest.approx(2e-3)


def test_the_estimand_is_what_a_noise_free_world_estimates_and_its_gap_is_the_policys():
    """Without learning-rate drift the noise-free world estimates the planted law's ln S (up to the
    interpolation between budgets); with drift, a choice at the largest budget costs ngpt more at the budgets
    it reaches the target at than gpt at the reference, and the estimand falls short, while the choice at
    each arm's crossing of the target keeps it (measured: largest -0.029, crossing -0.007 at drift 0.5)."""
    params = small_params(protocol=False)
    params["train"]["schedule"] = "wsd"
    truth = Truth("account true", 2.0)
    gaps = {}
    for rule in ("largest", "crossing"):
        params["speedup"]["lr_policy"] = rule
        for drift in (0.0, 0.5):
            model = loss_model(with_design(params, [f"lr_drift={drift}", "seed_sd=0", "run_sd=0",
                                                    "trunk_sd=0"], "drift"))
            world = planted_world(Params.of(params), model, truth, 0, 0, 0)
            estimates = world_outcome(analysed_world(Params.of(params), world), truth)[CELL]["estimates"]
            gaps[rule, drift] = estimates["arm ngpt"]["estimate"] - estimates["arm ngpt"]["planted"]
    assert abs(gaps["largest", 0.0]) < 0.01 and gaps["largest", 0.5] < -0.02
    assert abs(gaps["crossing", 0.0]) < 0.01 and abs(gaps["crossing", 0.5]) < 0.01
    # the table measures bias and coverage against the estimand, not the law
    entries = [{"estimate": 0.6, "interval": [0.55, 0.65], "planted": math.log(2), "estimand": 0.6}]
    summary = estimate_summary(entries)
    assert summary["bias"] == 0 and summary["coverage"]["p"] == 1 and summary["coverage_planted"]["p"] == 0
    assert summary["policy_gap"] == pytest.approx(0.6 - math.log(2))


def test_the_angle_truths_are_planted_where_the_grid_runs_the_angle_square():
    square = ("gpt", "gpt-rownorm", "gpt-orth", "ngpt")
    both = (*square, "gpt-angle", "ngpt-angle")
    assert not [t for t in truths([1.5, 4.0], square) if t.account.startswith("angle")]
    angle = [t.label for t in truths([1.5, 4.0], both) if t.account.startswith("angle")]
    assert angle == ["angle account, ngpt x1.5", "angle account, ngpt x4", "angle account, half, ngpt x1.5",
                     "angle account, half, ngpt x4"]
    # the readings the planted speed-ups give: the angle account's in its world, none in the half world
    full, half = Truth("angle account", 4.0), Truth("angle account, half", 4.0)
    assert [full.speedup(arm) for arm in ("gpt-angle", "ngpt-angle", "gpt-orth")] == [4.0, 1.0, 1.0]
    assert full.reading(1.25, EFFECTIVE_LR, both) == EFFECTIVE_LR.consistent
    assert full.reading(1.25, CONDITIONING, both) == CONDITIONING.inconsistent
    assert half.reading(1.25, EFFECTIVE_LR, both) == EFFECTIVE_LR.inconsistent  # gpt-angle short of ngpt
    # the conditioning account's world, read with the angle arms: they run as their architecture
    true = Truth("account true", 4.0)
    assert true.reading(1.25, CONDITIONING, both) == CONDITIONING.consistent
    assert true.reading(1.25, EFFECTIVE_LR, both) == EFFECTIVE_LR.inconsistent
    # without the angle arms the angle account cannot read consistent
    assert full.reading(1.25, EFFECTIVE_LR, square) != EFFECTIVE_LR.consistent


def test_resolution_scans_up_from_the_margin_and_stops_at_the_first_speedup_read_right():
    from ngptlab.design.resolution import SCAN, readable_range

    # quiet in the losses and in the arms' measured kappa and angle, which the accounts are read from
    quiet = with_design(small_params(protocol=False), ["seed_sd=0.0002", "run_sd=0.0002", "trunk_sd=0.0002",
                                                       "kappa_sd=0.0002", "angle_sd=0.0002"], "quiet design")
    found = readable_range(quiet, loss_model(quiet), 2, 0, 1)
    assert found["smallest"] == SCAN[0] and [r["ngpt"] for r in found["scanned"]] == [SCAN[0]]
    assert found["scanned"][0]["least_correct"] >= 0.8
    # a wider margin starts the scan above it: no speed-up inside the margin can be read as faster
    wide = small_params(protocol=False)
    wide["speedup"]["equivalence_margin"] = 1.45
    wide = with_design(wide, ["seed_sd=0.0002", "run_sd=0.0002", "trunk_sd=0.0002"], "wide margin")
    assert readable_range(wide, loss_model(wide), 2, 0, 1)["scanned"][0]["ngpt"] == 1.5
    # noise far beyond any speed-up of the scan: every one scanned, none read right
    noisy = with_design(small_params(protocol=False), ["seed_sd=0.5"], "noisy design")
    lost = readable_range(noisy, loss_model(noisy), 2, 0, 1)
    assert lost["smallest"] is None and [r["ngpt"] for r in lost["scanned"]] == list(SCAN)
    assert lost["upward"] == [] and lost["largest"] is None  # nothing to scan up from
    assert all(r["least_correct"] < 0.8 for r in lost["scanned"])


@pytest.mark.parametrize("covered, n, passed", [
    (183, 200, True),   # 91.5% at 200 worlds: its Monte-Carlo interval [86.7%, 94.9%] reaches the band
    (176, 200, False),  # 88%: [82.7%, 92.2%] lies below 93%, coverage shown to miss the band
    (196, 200, True),   # 98%: [95.0%, 99.5%] reaches 97%
    (400, 400, False),  # 100% at 400 worlds: [99.1%, 100%] lies above 97%
    (1880, 2000, True)])  # 94% well inside
def test_a_coverage_check_fails_only_where_its_monte_carlo_interval_excludes_the_band(covered, n, passed):
    from ngptlab.design.table import proportion, thresholds

    coverage = proportion(covered, n)
    scenario = {"truth": "t", "account": "partial", "cells": {"c": {
        "accounts": {}, "estimates": {"primary": {"coverage": coverage}}}}}
    (check,) = thresholds([scenario])
    expected = stats.binomtest(covered, n).proportion_ci(0.95, method="exact")
    assert check["monte_carlo_interval"] == pytest.approx([expected.low, expected.high])
    assert check["passed"] is passed and "Clopper-Pearson" in check["bound"]


def test_the_readable_range_ends_below_the_first_speedup_read_wrong_inside_the_budgets_span():
    from ngptlab.design.resolution import must_read, readable_range, resolution_line, upward_scan
    from ngptlab.design.simulate import simulate
    from ngptlab.speedup.estimator import measurable_range, reference_tokens

    quiet = with_design(small_params(protocol=False), ["seed_sd=0.0002", "run_sd=0.0002", "trunk_sd=0.0002",
                                                       "kappa_sd=0.0002", "angle_sd=0.0002"], "quiet design")
    budgets = quiet.train.budgets
    # budgets 4,096-16,384 about the middle one: the budgets' span x0.5 to x2
    assert measurable_range(reference_tokens(quiet.speedup.reference_budget, budgets), budgets) == [0.5, 2.0]
    # a document that played x1.3 already, in worlds too noisy to read it: the scan reads its table, not
    # worlds of its own, so x1.3 fails there and the smallest is the next speed-up
    noisy = with_design(small_params(protocol=False), ["seed_sd=0.5"], "noisy design")
    planted = must_read(noisy, 1.3)
    assert [t.account for t in planted] == ["account true", "account false", "ngpt only"]  # no lr-law world
    outcomes, _ = simulate(noisy, loss_model(noisy), planted, 2, 0, 1)
    document = {"worlds": 2, **design_table(outcomes, planted, "conditioning", 1.25)}
    found = readable_range(quiet, loss_model(quiet), 2, 0, 1, document=document)
    first, second = found["scanned"]
    assert (first["ngpt"], first["reused"], first["read_right"]) == (1.3, True, False)
    assert (second["ngpt"], second["reused"], second["read_right"]) == (1.4, False, True)
    # upward from x1.4: read right up to the span's top, x2; x3 is a bound in every world (it needs fewer
    # tokens than the smallest budget) and reads wrong; the scan stops there
    assert found["smallest"] == 1.4 and found["largest"] == 2.0
    assert [r["ngpt"] for r in found["upward"]] == upward_scan(1.4)[:4] == [1.5, 1.75, 2.0, 3.0]
    assert all(r["least_correct"] == 1.0 for r in found["upward"][:3])
    failure = found["first_failure"]
    assert failure["ngpt"] == 3.0 and failure["least_correct"] < 0.8 and not failure["read_right"]
    ci = stats.binomtest(round(failure["least_correct"] * 2), 2).proportion_ci(0.95, method="exact")
    assert failure["interval"] == pytest.approx([ci.low, ci.high])
    line = resolution_line(found)
    assert "reads the accounts right from x1.4 to x2 (" in line
    assert f"above x2: P = {failure['least_correct']:.0%} [{ci.low:.0%}, {ci.high:.0%}] at x3, the " in line
    assert failure["least_at"]["truth"].endswith("ngpt x3")
    assert f"expected {failure['least_at']['expected']}" in line
    # the scan's points: SCAN and UPWARD above the smallest, and the paper's claims (4x at 1k, 10x at 4k)
    assert {4.0, 10.0} <= set(upward_scan(1.4)) and upward_scan(16.0) == [20.0, 30.0]
