"""`ngptlab speedup` on a cell of train results, and the cross-arm table joining everything."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import scipy.stats
import torch
import yaml
from support import fixture_params
from support.synthetic import settings_of

from ngptlab import layout
from ngptlab.checkpoint import save_model
from ngptlab.cli import main
from ngptlab.condition.run import condition_run
from ngptlab.errors import NgptlabError
from ngptlab.grid.enumeration import enumerate_runs
from ngptlab.grid.runs import RunSpec
from ngptlab.models.registry import build
from ngptlab.report.kit.crossarm import arm_table, cross_arm_table, tracking, write_cross_arm_table
from ngptlab.results import train_dir

torch.set_num_threads(1)
BUDGETS = [16384, 32768, 65536]
PLANTED = {"gpt": 1.0, "ngpt": 3.0, "gpt-orth": 1.5}  # token efficiency relative to gpt
BEST_LR = 3e-3


def loss_at(tokens: float, arm: str, lr: float) -> float:
    """Loss a power law in tokens (so the estimator's fitted law is exact), worse away from the best lr."""
    return 3.0 + 5.0 * (PLANTED[arm] * tokens / BUDGETS[0]) ** -0.3 + 0.1 * abs(math.log(lr / BEST_LR))


@pytest.fixture
def grid(tmp_path) -> tuple[dict, Path]:
    params = fixture_params()
    params["train"].update(scales=["cpu-4l"], contexts=[64], budgets=BUDGETS, seeds=[0], arms=list(PLANTED))
    lrs = {"gpt": [3e-3, 1e-2], "ngpt": [3e-3, 1e-2], "gpt-orth": [3e-3]}
    params["train"]["learning_rates"] = {"cpu-4l": lrs}
    # the paper's reference: the planted 3x of ngpt is then a number (budgets 4x apart measure 1x to 4x)
    params["speedup"].update(baseline="gpt", bootstrap=100, seed=0, reference_budget="largest")
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return params, path


def write_train_results(root: Path, spec: RunSpec, status: str = "completed") -> None:
    """summary.json and metrics.jsonl as the train stage writes them, from the planted loss law."""
    out = train_dir(root, spec)
    out.mkdir(parents=True, exist_ok=True)
    final = loss_at(spec.budget, spec.arm, spec.lr)
    rows = []
    for step in range(1, spec.budget // 2048 + 1):
        tokens = step * 2048
        row = {"step": step, "tokens": tokens, "train_loss": final + 0.3, "lr": spec.lr}
        if tokens % 8192 == 0:  # eval points: mid-run losses sit above the annealed final one
            row["val_loss"] = final if tokens == spec.budget else loss_at(tokens, spec.arm, spec.lr) + 0.2
        rows.append(row)
    (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = {"run": spec.name, "spec": spec.as_dict(), "status": status,
               "final_val_loss": None if status == "diverged" else final}
    (out / "summary.json").write_text(json.dumps(summary))


def speedup(params_file: Path, root: Path, cell: str = "cpu-4l-ctx64") -> int:
    return main(["speedup", "--params", str(params_file), cell, "--root", str(root)])


def read_strict(path: Path) -> dict:
    """The document, refusing NaN and Infinity (strict JSON: "inf" is a string there, nan null)."""
    def refuse(name: str):
        raise AssertionError(f"{path}: non-strict JSON constant {name}")
    return json.loads(path.read_text(), parse_constant=refuse)


def test_speedup_cell_from_train_results(tmp_path, grid):
    params, params_file = grid
    for spec in enumerate_runs(settings_of(params)):
        diverged = spec.arm == "ngpt" and spec.lr == 1e-2 and spec.budget == 65536
        write_train_results(tmp_path, spec, "diverged" if diverged else "completed")
    assert speedup(params_file, tmp_path) == 0
    doc = read_strict(tmp_path / "results" / "speedup" / "cpu-4l-ctx64.json")
    assert doc["cell"] == "cpu-4l-ctx64" and doc["baseline"] == "gpt" and doc["budgets"] == BUDGETS
    target = doc["targets"][0]
    assert (target["reference"], target["reference_budget"]) == ("largest", 65536)
    assert target["runs"][0]["lr"] == BEST_LR
    for arm, k in PLANTED.items():
        assert doc["arms"][arm]["speedup"]["value"] == pytest.approx(k, rel=1e-9)
        assert doc["arms"][arm]["speedup"]["bound"] is None
    assert doc["arms_order"] == ["gpt", "gpt-orth", "ngpt"]
    assert doc["ignored"] == [{"run": "cpu-4l-ctx64-ngpt-t65536-lr0.01-s0", "reason": "diverged"}]
    # the cheaper estimate from ngpt's own validation curve: mid-run points are 0.2 worse, so it is smaller
    cheap = doc["arms"]["ngpt"]["cheap"]["speedup"]["value"]
    assert 1.0 < cheap < 3.0
    assert len(doc["runs"]) == len(enumerate_runs(settings_of(params)))
    # inference over one seed: a geometric mean of one, no interval, no verdict yet
    assert doc["bootstrap"] == {"resamples": 100, "seed": 0, "level": 0.95, "min_seeds": 10}
    assert (doc["equivalence_margin"], doc["resolve_ratio"]) == (1.25, 1.5)
    assert "equivalent within x1.25" in doc["verdict_rule"]
    # no gpt-rownorm here: no factorial, and the reading of the default primary effect says so
    assert doc["factorial"] is None and doc["reading"]["primary"] == "conditioning"
    assert doc["reading"]["reading"] == "not resolved" and "no factorial" in doc["reading"]["note"]
    ngpt = doc["arms"]["ngpt"]["speedup"]
    assert (ngpt["method"], ngpt["log"], ngpt["interval"], ngpt["bootstrap_interval"]) == ("t on ln S", None,
                                                                                          None, None)
    assert (ngpt["verdict"], ngpt["seeds_needed"]) == ("not resolved (no interval)", None)
    assert doc["arms"]["gpt"]["speedup"]["verdict"] is None
    [orth_vs_ngpt] = doc["contrasts"]  # gpt-rownorm is not in this cell
    assert orth_vs_ngpt["label"] == "gpt-orth vs ngpt" and orth_vs_ngpt["ratio"] == pytest.approx(0.5)
    assert orth_vs_ngpt["interval"] is None and orth_vs_ngpt["seeds"] == [0]
    # interpolation: gpt and ngpt's best lr is the bottom of a 2-point sweep, gpt-orth has 1: nothing moves
    for arm in PLANTED:
        interpolated = doc["arms"][arm]["interpolated"]
        assert interpolated["speedup"]["value"] == pytest.approx(PLANTED[arm], rel=1e-9)
        assert interpolated["log_difference"] == pytest.approx(0.0, abs=1e-12)
        assert interpolated["seed_noise_log"] is None and interpolated["differs"] is None
        assert [b["correction"] for b in interpolated["per_budget"]] == [0.0] * len(BUDGETS)
    statuses = {arm: {b["status"] for b in doc["arms"][arm]["interpolated"]["per_budget"]} for arm in PLANTED}
    assert statuses == {"gpt": {"best at the bottom edge of the sweep"},
                        "ngpt": {"best at the bottom edge of the sweep"},
                        "gpt-orth": {"no seed swept more than one learning rate"}}


# Planted sweeps around BEST_LR: gpt's best inside, ngpt's at the bottom edge, gpt-orth's at the top edge.
EDGE_SWEEPS = {"gpt": [1e-3, 3e-3, 1e-2], "ngpt": [3e-3, 1e-2, 3e-2], "gpt-orth": [3e-4, 1e-3, 3e-3]}


def edge_grid(tmp_path: Path, grid) -> tuple[dict, Path]:
    params, params_file = grid
    params["train"]["learning_rates"] = {"cpu-4l": {arm: list(v) for arm, v in EDGE_SWEEPS.items()}}
    params_file.write_text(yaml.safe_dump(params, sort_keys=False))
    for spec in enumerate_runs(settings_of(params)):
        write_train_results(tmp_path, spec)
    return params, params_file


def test_speedup_flags_every_best_learning_rate_at_an_edge_of_its_sweep(tmp_path, grid, capsys):
    params, params_file = edge_grid(tmp_path, grid)
    assert speedup(params_file, tmp_path) == 0
    tuning = json.loads((tmp_path / "results" / "speedup" / "cpu-4l-ctx64.json").read_text())["tuning"]
    edges = {(e["arm"], e["budget"]): (e["best_lr"], e["edge"]) for e in tuning["edges"]}
    for budget in BUDGETS:
        assert edges[("gpt", budget)] == (3e-3, None)
        assert edges[("ngpt", budget)] == (3e-3, "bottom")
        assert edges[("gpt-orth", budget)] == (3e-3, "top")
    assert tuning["tuned"] == {"gpt": True, "gpt-orth": False, "ngpt": False}
    out = capsys.readouterr().out
    assert "untuned: ngpt at budget 16384 (seed 0): best lr 0.003 is the bottom of its sweep" in out
    assert "untuned: gpt " not in out


def test_seeds_beyond_train_seeds_enter_the_speedup_but_not_the_sweep(tmp_path, grid):
    params, params_file = edge_grid(tmp_path, grid)
    # seed 1 runs only the best learning rate of every arm and budget; the verdict params left to defaults
    params["train"]["added_seeds"] = [{"scale": "cpu-4l", "context": 64, "arm": arm, "budget": budget,
                                       "lr": BEST_LR, "seeds": [1]} for arm in PLANTED for budget in BUDGETS]
    for key in ("equivalence_margin", "resolve_ratio"):
        params["speedup"].pop(key, None)
    params_file.write_text(yaml.safe_dump(params, sort_keys=False))
    for spec in enumerate_runs(settings_of(params)):
        write_train_results(tmp_path, spec)
    assert speedup(params_file, tmp_path) == 0
    doc = read_strict(tmp_path / "results" / "speedup" / "cpu-4l-ctx64.json")
    assert {e["seed"] for e in doc["tuning"]["edges"]} == {0}  # seed 1 has no sweep to be at an edge of
    assert doc["tuning"]["tuned"] == {"gpt": True, "gpt-orth": False, "ngpt": False}
    assert doc["seeds"] == [0, 1] and (doc["equivalence_margin"], doc["resolve_ratio"]) == (1.25, 1.5)
    ngpt = doc["arms"]["ngpt"]
    assert ngpt["speedup"]["n_seeds"] == 2 and ngpt["speedup"]["value"] == pytest.approx(3.0, rel=1e-9)
    # two identical seeds: no noise, so the interval is the point and the verdict is resolved at 2 seeds
    assert ngpt["speedup"]["verdict"] == "faster by more than x1.25" and ngpt["speedup"]["seeds_needed"] == 2
    # gpt's best lr is interior: its V-shaped loss in ln(lr) has a parabola whose vertex lies below the grid
    gpt = doc["arms"]["gpt"]["interpolated"]["per_budget"]
    assert all(b["status"] == "interpolated" and b["seeds"] == [0] and b["correction"] < 0 for b in gpt)
    # a lower target: every other arm needs more tokens to reach it
    assert doc["arms"]["ngpt"]["interpolated"]["speedup"]["value"] < ngpt["speedup"]["value"]


def test_missing_train_result_is_a_clear_error(tmp_path, grid, capsys):
    params, params_file = grid
    specs = enumerate_runs(settings_of(params))
    for spec in specs:
        write_train_results(tmp_path, spec)
    assert speedup(params_file, tmp_path) == 0
    out = tmp_path / "results" / "speedup" / "cpu-4l-ctx64.json"
    before = out.read_text()
    missing = train_dir(tmp_path, specs[3]) / "summary.json"
    missing.unlink()
    assert speedup(params_file, tmp_path) == 2
    assert f"{missing}: train summary not found" in capsys.readouterr().err
    assert out.read_text() == before  # the previous result is untouched
    missing.write_text("{not json")
    assert speedup(params_file, tmp_path) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert speedup(params_file, tmp_path, cell="cpu-4l-ctx999") == 2
    assert "cell 'cpu-4l-ctx999' is not in the grid" in capsys.readouterr().err


def test_cross_arm_table(tmp_path, grid):
    params, params_file = grid
    models = {}
    for arm in PLANTED:
        torch.manual_seed(0)
        models[arm], _ = build(arm, "cpu-4l", 256, 64)
    for spec in enumerate_runs(settings_of(params)):
        write_train_results(tmp_path, spec)
        config = {"arm": spec.arm, "scale": spec.scale, "vocab_size": 256, "context": 64,
                  "spec": spec.as_dict()}
        save_model(tmp_path / layout.run_dir(spec.cell, spec.name) / "model.safetensors",
                   models[spec.arm], config)
        condition_run(spec, tmp_path, settings_of(params).condition, progress=False)
    assert speedup(params_file, tmp_path) == 0

    table = write_cross_arm_table(settings_of(params), tmp_path / "runs.csv", root=tmp_path)
    assert list(table["run"]) == [s.name for s in enumerate_runs(settings_of(params))]
    assert (tmp_path / "runs.csv").read_text().splitlines()[0].startswith("run,cell,scale,context,arm,budget")
    ngpt = table[table["arm"] == "ngpt"]
    assert ngpt["speedup"].tolist() == pytest.approx([3.0] * 6) and set(ngpt["speedup_display"]) == {"3"}
    assert list(ngpt["best_lr_for_budget"]) == [True, False] * 3  # lr 3e-3 wins at every budget
    orth = table[table["arm"] == "gpt-orth"].iloc[0]
    assert orth["conditioning"] == "fixed (kappa = 1)"  # the registry's design column
    assert orth["eff_attn_condition_median"] == pytest.approx(1.0, abs=1e-4)
    gpt = table[table["arm"] == "gpt"].iloc[0]
    cond = json.loads((tmp_path / "results" / "conditioning" / f"{gpt['run']}.json").read_text())
    assert gpt["eff_layer3_q_condition"] == cond["headline"]["effective"]["layer3_q_condition"]
    assert gpt["renorm_embed_in_cov_condition"] == cond["headline"]["renormalized"]["embed_in_cov_condition"]
    # gpt's raw parameters: at init its RMSNorm gains are 1, so they are its effective matrices
    assert gpt["under_attn_condition_median"] == gpt["eff_attn_condition_median"]
    assert gpt["final_val_loss"] == pytest.approx(loss_at(gpt["budget"], "gpt", gpt["lr"]))

    arms = arm_table(table)
    assert list(arms["arm"]) == ["gpt", "ngpt", "gpt-orth"] and (arms["budget"] == 65536).all()
    rho = tracking(table)
    assert set(rho["n_arms"]) == {3}
    attn = rho[rho["metric"] == "eff_attn_condition_median"]["rho"].iloc[0]
    expected = scipy.stats.spearmanr(arms["speedup"], arms["eff_attn_condition_median"]).statistic
    assert attn == pytest.approx(expected)
    # at init gpt-orth has kappa 1 and ngpt/gpt random-matrix kappas, so the ranks are not a constant
    assert not math.isnan(attn)

    # a missing conditioning result: an error naming it, or nan columns when allowed
    missing = tmp_path / "results" / "conditioning" / f"{gpt['run']}.json"
    missing.unlink()
    with pytest.raises(NgptlabError, match=f"{missing}: conditioning not found"):
        cross_arm_table(settings_of(params), tmp_path)
    partial = cross_arm_table(settings_of(params), tmp_path, allow_missing=True)
    assert math.isnan(partial.iloc[0]["eff_attn_condition_median"])
    assert not math.isnan(partial.iloc[1]["eff_attn_condition_median"])
