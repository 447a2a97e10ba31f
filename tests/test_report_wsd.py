"""The report of a WSD grid with cosine calibration runs (report/sections/calibration.py), on synthetic
results.

The calibration runs must never enter the comparison of arms; the calibration table must be WSD minus cosine
as the summaries give it; the grid section must name the schedule; the loss figure must draw one trunk with
its branches.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from pathlib import Path

import pytest
from scipy import stats
from support import synthetic
from support.synthetic import settings_of

from ngptlab.batch import steps_per_run
from ngptlab.grid.enumeration import enumerate_runs
from ngptlab.report.command import render_report, write_report
from ngptlab.report.kit import views
from ngptlab.report.kit.load import load_results
from ngptlab.report.sections.loss import shown_curve
from ngptlab.results import train_dir
from ngptlab.schedule import branch_point
from ngptlab.stats import t_interval, t_quantile

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py

REVISION = "test-revision"
CELL = "cpu-4l-ctx64"
LARGEST = 65536
# Left out of the calibration: a cosine twin of gpt-orth (which keeps one pair: no interval) and a WSD run of
# ngpt (which keeps three).
DIVERGED = (f"{CELL}-gpt-orth-t{LARGEST}-lr0.003-s1", f"{CELL}-ngpt-t{LARGEST}-lr0.01-s0-wsd")




@pytest.fixture(scope="module")
def wsd(tmp_path_factory) -> tuple[Path, dict, Path]:
    """One cell, two seeds, two budgets under WSD; cosine calibration runs at the largest budget."""
    root = tmp_path_factory.mktemp("wsd")
    params = synthetic.synthetic_params(seeds=(0, 1), budgets=(16384, LARGEST), schedule="wsd",
                                        calibrate=(LARGEST,), min_budget_for_claims=1000)
    params["train"]["contexts"] = [64]
    params_path = synthetic.write_results(root, params, diverged=DIVERGED)
    write_report(render_report(settings_of(params), root, params_path, code_revision=REVISION),
                 root / "reports")
    return root, params, params_path


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def summaries(root: Path, params: dict) -> dict[str, dict]:
    return {s.name: json.loads((train_dir(root, s) / "summary.json").read_text())
            for s in enumerate_runs(settings_of(params))}


def test_calibration_table_is_wsd_minus_cosine(wsd):
    root, params, _ = wsd
    runs = summaries(root, params)
    rows = {r["arm"]: r for r in read_csv(root / "reports" / "tables" / "calibration.csv")}
    assert set(rows) == set(params["train"]["arms"])
    assert {r["budget"] for r in rows.values()} == {str(LARGEST)}
    for arm, row in rows.items():
        specs = [s for s in enumerate_runs(settings_of(params)) if s.arm == arm and s.budget == LARGEST]
        loss = {(s.schedule, s.lr, s.seed): runs[s.name]["final_val_loss"] for s in specs
                if runs[s.name]["status"] == "completed"}
        diffs = [loss[("wsd", lr, seed)] - loss[("cosine", lr, seed)]
                 for (kind, lr, seed) in loss if kind == "wsd" and ("cosine", lr, seed) in loss]
        assert int(row["n_pairs"]) == len(diffs)
        assert float(row["mean_shift"]) == pytest.approx(statistics.fmean(diffs), rel=1e-12)
        if len(diffs) > 1:
            half = stats.t.ppf(0.975, len(diffs) - 1) * statistics.stdev(diffs) / math.sqrt(len(diffs))
            assert float(row["interval_lo"]) == pytest.approx(statistics.fmean(diffs) - half, rel=1e-9)
            assert float(row["interval_hi"]) == pytest.approx(statistics.fmean(diffs) + half, rel=1e-9)
        else:
            assert row["interval_lo"] == row["interval_hi"] == ""
            assert "one pair: no interval" in row["mean_display"]
        # at each schedule's best lr per seed (lowest loss), then the mean over the seeds both schedules have
        best: dict[str, dict[int, float]] = {"wsd": {}, "cosine": {}}
        for (kind, _, seed), value in loss.items():
            best[kind][seed] = min(value, best[kind].get(seed, math.inf))
        seeds = sorted(set(best["wsd"]) & set(best["cosine"]))
        assert int(row["n_seeds"]) == len(seeds) == (1 if arm == "gpt-orth" else 2)
        shift = statistics.fmean(best["wsd"][s] - best["cosine"][s] for s in seeds)
        assert float(row["best_shift"]) == pytest.approx(shift, rel=1e-12)
        assert float(row["cosine_loss"]) == pytest.approx(statistics.fmean(best["cosine"][s] for s in seeds),
                                                          rel=1e-12)
    # the planted shift comes back: every pair's difference is exactly the planted one
    ngpt = [s for s in enumerate_runs(settings_of(params)) if s.arm == "ngpt" and s.budget == LARGEST
            and s.schedule == "wsd" and s.name not in DIVERGED]
    assert float(rows["ngpt"]["mean_shift"]) == pytest.approx(
        statistics.fmean(synthetic.wsd_shift(s) for s in ngpt), abs=1e-9)
    assert rows["gpt-orth"]["n_pairs"] == "1" and rows["ngpt"]["n_pairs"] == "3"


def test_left_out_runs_are_named_and_the_shift_is_compared_with_the_baseline(wsd):
    root, _, _ = wsd
    md = (root / "reports" / "report.md").read_text()
    rows = {r["arm"]: r for r in read_csv(root / "reports" / "tables" / "calibration.csv")}
    assert rows["gpt-orth"]["left_out"] == DIVERGED[0] and rows["ngpt"]["left_out"] == DIVERGED[1]
    note = next(line for line in md.splitlines() if "Left out of the calibration" in line)
    assert all(f"`{name}` (diverged)" in note for name in DIVERGED)
    assert "95% t-interval over the n paired differences" in md
    assert "The speed-up is comparable across arms only if the shift is the same" in md
    (sentence,) = [line for line in md.splitlines() if line.startswith(f"- {CELL} at 65,536 tokens: against")]
    gpt = float(rows["gpt"]["mean_shift"])
    assert f"against gpt's shift of {gpt:+.4f}" in sentence
    # planted: ngpt's shift is 0.03, every other arm's 0.005
    ngpt = float(rows["ngpt"]["mean_shift"])
    assert f"ngpt ({ngpt:+.4f}) differs by more than the combined interval" in sentence
    assert "gpt-orth: fewer than two completed pairs, not tested" in sentence
    assert "gpt-rownorm" not in sentence


def test_the_grid_section_names_the_schedule(wsd):
    root, _, _ = wsd
    grid = {r["item"]: r["value"] for r in read_csv(root / "reports" / "tables" / "grid.csv")}
    assert grid["schedule"] == ("WSD: budgets share a trunk; each cools down over the last 20% of its "
                                "budget, 1-sqrt; cosine calibration runs at 65,536")
    md = (root / "reports" / "report.md").read_text()
    what = md[md.index("## What was run"):md.index("## The speed-up")]
    assert "Schedule: WSD (warmup, stable, decay), not the paper's cosine." in what
    assert "cools down to 0 over the last 20% of its budget (1-sqrt shape; Hägele et al. 2024, " \
           "arXiv 2405.18392)" in what
    runs = {r["run"]: r for r in read_csv(root / "reports" / "tables" / "runs.csv")}
    assert {r["schedule"] for r in runs.values()} == {"wsd", "cosine"}
    assert "Schedule WSD, not the paper's cosine: every speed-up here is one under WSD" in md


def test_calibration_runs_do_not_enter_the_headline(wsd):
    """A calibration run far better than every WSD run changes no headline number and no best-run choice."""
    root, params, params_path = wsd
    before = render_report(settings_of(params), root, params_path, code_revision=REVISION)
    results = load_results(settings_of(params), root, params_path)
    chosen = [r for per in views.best_runs(results, CELL).values() for r in per.values()]
    assert chosen and all(r.spec.schedule == "wsd" for r in chosen)
    assert all(rep.record.name.endswith("-wsd") for rep in views.representatives(results, CELL))
    metrics = {arm: json.loads(before.files[f"metrics/{CELL}/{arm}.json"]) for arm in params["train"]["arms"]}
    runs = summaries(root, params)
    for arm, values in metrics.items():
        best = [min(runs[s.name]["final_val_loss"] for s in enumerate_runs(settings_of(params))
                    if (s.arm, s.budget, s.seed, s.schedule) == (arm, LARGEST, seed, "wsd")
                    and runs[s.name]["status"] == "completed") for seed in params["train"]["seeds"]]
        assert values["best_val_loss"] == pytest.approx(statistics.fmean(best), rel=1e-12), arm

    calibration = next(s for s in enumerate_runs(settings_of(params))
                       if s.schedule == "cosine" and s.arm == "gpt")
    summary = train_dir(root, calibration) / "summary.json"
    good = summary.read_text()
    try:
        summary.write_text(json.dumps({**json.loads(good), "final_val_loss": 0.5}))
        after = render_report(settings_of(params), root, params_path, code_revision=REVISION)
    finally:
        summary.write_text(good)
    assert {path: body for path, body in after.files.items() if path.startswith("metrics/")} == \
        {path: body for path, body in before.files.items() if path.startswith("metrics/")}
    for table in ("final_loss", "status", "speedup", "settle", "conditioning_effective"):
        assert after.files[f"tables/{table}.csv"] == before.files[f"tables/{table}.csv"], table
    assert after.files[f"figures/loss_{CELL}.svg"] == before.files[f"figures/loss_{CELL}.svg"]
    assert after.files["tables/calibration.csv"] != before.files["tables/calibration.csv"]  # it is read there


def test_the_loss_figure_draws_one_trunk_with_its_branches(wsd):
    root, params, params_path = wsd
    figure = root / "reports" / "figures" / f"loss_{CELL}.svg"
    assert figure.read_text().startswith("<?xml")
    md = (root / "reports" / "report.md").read_text()
    assert "is drawn only from its branch point on, where it leaves the trunk" in md
    prov = json.loads((root / "reports" / "provenance.json").read_text())
    assert prov["figures"][f"loss_{CELL}"]["runs"] and all(
        name.endswith("-wsd") for name in prov["figures"][f"loss_{CELL}"]["runs"])
    # gpt, seed 0: both budgets' best runs are at lr 0.003, one trunk; the smaller budget is drawn from its
    # branch point on (from the last evaluation on the trunk), the largest whole
    results = load_results(settings_of(params), root, params_path)
    per = views.best_runs(results, CELL)[("gpt", 0)]
    small, large = per[16384], per[LARGEST]
    assert small.spec.lr == large.spec.lr
    train = settings_of(params).train
    assert shown_curve(results, large, list(per.values())) == large.curve
    shown = shown_curve(results, small, list(per.values()))
    start = branch_point(train, 64, 16384) * train.batch_sequences * 64
    assert 0 < branch_point(train, 64, 16384) < steps_per_run(train, 64, 16384)
    assert shown[0][0] <= start < shown[1][0] and shown == small.curve[small.curve.index(shown[0]):]
    assert shown[-1] == small.curve[-1] and len(shown) < len(small.curve)
    # alone (no longer run of its trunk drawn), a WSD run is drawn whole
    assert shown_curve(results, small, [small]) == small.curve


def test_t_quantile_matches_scipy():
    for df in range(1, 60):
        assert t_quantile(0.95, df) == pytest.approx(stats.t.ppf(0.975, df), rel=1e-9)
        assert t_quantile(0.9, df) == pytest.approx(stats.t.ppf(0.95, df), rel=1e-9)
    assert t_interval([1.0]) is None
