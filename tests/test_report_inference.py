"""The report's inference over seeds, on synthetic results written by the real speed-up stage and rendered by
the real report: intervals on ln S and how they were made, per-seed S and ln S, the interpolated minima
between learning rates, the paired contrasts with their verdicts and seed counts, and what they conclude.
"""

from __future__ import annotations

import copy
import csv
import json
import math
import statistics
from pathlib import Path

import pytest
from scipy import stats
from support import synthetic
from support.synthetic import settings_of

from ngptlab.models.arms import arm as arm_row
from ngptlab.report.command import render_report, write_report
from ngptlab.report.kit.table import fmt_sig
from ngptlab.speedup.rivals import clause

NGPT_CONDITIONING = arm_row("ngpt").conditioning

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py

ARMS = ["gpt", "ngpt", "gpt-rownorm", "gpt-orth"]  # the 2x2: every contrast of the speed-up stage
GRID = (1.5e-3, 4.0e-3, 1.2e-2)  # brackets the planted optimum (synthetic.BEST_LR) off the grid
CELL = "cpu-4l-ctx64"


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def render(root: Path, params: dict, params_path: Path) -> Path:
    write_report(render_report(settings_of(params), root, params_path, code_revision="test"),
                 root / "reports")
    return root / "reports"


@pytest.fixture(scope="module")
def paired(tmp_path_factory) -> tuple[Path, dict, Path]:
    """Three seeds, three learning rates, the 2x2 at one context; the account's pattern planted: gpt-orth as
    fast as nGPT, gpt-rownorm within the margin of gpt (1.1x)."""
    root = tmp_path_factory.mktemp("paired")
    params = synthetic.synthetic_params(seeds=(0, 1, 2), min_budget_for_claims=1000, learning_rates=GRID)
    params["train"].update(contexts=[64], arms=ARMS)
    with pytest.MonkeyPatch.context() as mp:
        kappa = synthetic.PLANTED["gpt-orth"][1]
        mp.setitem(synthetic.PLANTED, "gpt-orth", (synthetic.PLANTED["ngpt"][0], kappa))
        mp.setitem(synthetic.PLANTED, "gpt-rownorm", (1.1, synthetic.PLANTED["gpt-rownorm"][1]))
        params_path = synthetic.write_results(root, params)
    render(root, params, params_path)
    return root, params, params_path


@pytest.fixture(scope="module")
def one_seed(tmp_path_factory) -> Path:
    """One seed, claims allowed, the default (two-point) sweeps."""
    root = tmp_path_factory.mktemp("one_seed")
    params = synthetic.synthetic_params(seeds=(0,), budgets=(16384, 65536), min_budget_for_claims=1000)
    params["speedup"]["reference_budget"] = "largest"  # budgets 4x apart: 1 to 4, nGPT's planted 3x a number
    params["train"].update(contexts=[64], arms=ARMS)
    return render(root, params, synthetic.write_results(root, params))


def speedup_doc(root: Path) -> dict:
    return json.loads((root / "results" / "speedup" / f"{CELL}.json").read_text())


# ----------------------------------------------------------------------------------------------------------
# The speed-up section


def test_every_speedup_with_seeds_shows_its_interval_and_how(paired):
    root, _, _ = paired
    out = root / "reports"
    doc = speedup_doc(root)
    rows = {r["arm"]: r for r in read_csv(out / "tables" / "speedup.csv")}
    for arm in ARMS[1:]:
        s = doc["arms"][arm]["speedup"]
        row = rows[arm]
        assert int(row["n_seeds"]) == 3 and row["method"] == "t on ln S"
        assert float(row["interval_lo"]) == s["interval"][0] and float(row["interval_hi"]) == s["interval"][1]
        # the value at the table's one precision (1.00, not the file's 1)
        assert row["display"].startswith(f"{fmt_sig(s['value'])} [") and row["verdict"] == s["verdict"]
        assert float(row["log_sd"]) == s["log"]["sd"]
    md = (out / "report.md").read_text()
    assert "| speed-up [95% interval] | seeds |" in md
    assert ("95% t-interval on ln S over seeds (where some seeds are bounds, the censored-normal profile "
            "likelihood's, calibrated to it: the entry names it); the value is the geometric mean") in md
    # No arm has bootstrap.min_seeds seeds: no bootstrap column, and the note says why.
    assert "bootstrap 95% interval" not in md and all(r["bootstrap_lo"] == "" for r in rows.values())
    assert "shown only with at least 10 seeds (bootstrap.min_seeds)" in md


def test_the_interval_can_be_recomputed_from_the_per_seed_table(paired):
    root, _, _ = paired
    tables = root / "reports" / "tables"
    per_seed = read_csv(tables / "speedup_per_seed.csv")
    assert {r["arm"] for r in per_seed} == set(ARMS[1:])  # the baseline's S is 1 by construction
    for row in read_csv(tables / "speedup.csv"):
        if row["arm"] == "gpt":
            continue
        logs = [float(r["log_speedup"]) for r in per_seed if r["arm"] == row["arm"]]
        assert [math.log(float(r["speedup"])) for r in per_seed if r["arm"] == row["arm"]] == logs
        half = stats.t.ppf(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
        mean = statistics.fmean(logs)
        assert float(row["speedup"]) == pytest.approx(math.exp(mean), rel=1e-12)
        assert float(row["interval_lo"]) == pytest.approx(math.exp(mean - half), rel=1e-9)
        assert float(row["interval_hi"]) == pytest.approx(math.exp(mean + half), rel=1e-9)


def test_an_optimum_between_grid_points_shows_its_vertex_and_correction(paired):
    root, _, _ = paired
    out = root / "reports"
    minima = read_csv(out / "tables" / "speedup_minima.csv")
    assert len(minima) == len(ARMS) * 3  # every (arm, budget) of the cell
    # The planted loss is a parabola in ln(lr) around BEST_LR: the vertex finds it, below the grid's best.
    planted = -0.05 * math.log(GRID[1] / synthetic.BEST_LR) ** 2
    for row in minima:
        assert row["status"] == "interpolated" and float(row["lr_best"]) == GRID[1]
        assert float(row["lr_vertex"]) == pytest.approx(synthetic.BEST_LR, rel=1e-6)
        assert float(row["correction"]) == pytest.approx(planted, rel=1e-6) and float(row["correction"]) < 0
        assert float(row["loss_vertex"]) == pytest.approx(float(row["loss_best"]) + planted, rel=1e-9)
        assert row["runs"]  # the sweep the parabola went through
    md = (out / "report.md").read_text()
    assert f"| {CELL} | ngpt | 65,536 | 0, 1, 2 | 0.0015, 0.004, 0.012 | 0.004 |" in md
    both = {r["arm"]: r for r in read_csv(out / "tables" / "speedup_interpolated.csv")}
    doc = speedup_doc(root)
    for arm, row in both.items():
        entry = doc["arms"][arm]["interpolated"]
        assert float(row["interpolated_speedup"]) == entry["speedup"]["value"]
        assert row["differs"] == ("true" if entry["differs"] else "false")
        assert row["flag"] in ("differs: more than the seed noise", "within the seed noise")
    # Every arm shares the correction, so no speed-up moves beyond the seed noise: one sentence says so.
    assert "Interpolating between learning rates moves no arm's speed-up by more than the seed noise." in md


# ----------------------------------------------------------------------------------------------------------
# Settle it


def test_settle_it_has_the_paired_contrasts_with_intervals_and_seeds_needed(paired):
    root, _, _ = paired
    out = root / "reports"
    doc = speedup_doc(root)
    contrasts = {r["label"]: r for r in read_csv(out / "tables" / "contrasts.csv")}
    assert list(contrasts) == [c["label"] for c in doc["contrasts"]] == [
        "gpt-orth vs ngpt", "gpt-rownorm vs ngpt", "gpt-orth vs gpt-rownorm"]
    for c in doc["contrasts"]:
        row = contrasts[c["label"]]
        assert float(row["ratio"]) == c["ratio"] and float(row["interval_lo"]) == c["interval"][0]
        lo, hi = (float(x) for x in row["ratio_display"].split("[")[1].rstrip("]").split(", "))
        assert (lo, hi) == pytest.approx(c["interval"], rel=5e-3)  # shown to 3 digits
        assert row["verdict"] == c["verdict"] and int(row["seeds_needed"]) == c["seeds_needed"]
        assert row["seeds_needed_text"] == str(c["seeds_needed"])
        for key in ("seeds_needed_upper", "seeds_needed_equivalence"):
            assert row[f"{key}_text"] == str(c[key]) and int(row[key]) == c[key]
    md = (out / "report.md").read_text()
    assert ("| contrast | seeds | S_a / S_b [95% interval] | verdict | seeds to resolve x1.5 | seeds to "
            "resolve x1.5 (sd's 80% upper bound) | seeds to show equivalence within x1.25 | note |") in md
    assert "exact TOST power" in md and "chi-square upper confidence bound" in md
    # The comparisons with the baseline read the speed-up stage's verdicts, with the seeds needed beside.
    for row in read_csv(out / "tables" / "comparisons.csv"):
        s = doc["arms"][row["arm"]]["speedup"]
        assert row["verdict"] == s["verdict"] and row["seeds_needed_text"] == str(s["seeds_needed"])
        assert row["seeds_needed_equivalence_text"] == str(s["seeds_needed_equivalence"])
    # The rule is stated, with the equivalence margin, and the verdict follows it.
    assert f"**The rule.** {doc['verdict_rule']} The equivalence margin is x1.25" in md
    verdict = md.split("**What the data show.**")[1].split("\n")[0]
    # gpt-orth planted as fast as nGPT, gpt-rownorm at 1.1x: every prediction of the account holds
    assert doc["reading"]["primary"] == "conditioning"
    consistent = "consistent with the account that conditioning explains nGPT's speed-up"
    # ngpt planted turning its weights 3x faster than the rest, gpt-orth as fast at gpt's angle: every
    # arm's angle measured, the angle line reads the effective-learning-rate account (gpt-orth departs from
    # it) in place of the confound clause
    assert doc["reading"]["reading"] == (
        f"{consistent}; inconsistent with the account that the weight norms explain nGPT's speed-up; "
        "inconsistent with the account that the effective learning rate (how far each matrix turns per "
        "step) explains nGPT's speed-up")
    assert doc["reading"]["effective_lr_clause"] is None
    assert f"; so {doc['reading']['reading']}" in verdict  # the report's words are the JSON's
    assert [t["status"] for t in doc["reading"]["pattern"]] == ["holds"] * 4
    assert "(95% paired t on ln S over seeds, 3 seeds)" in verdict
    assert "Seeds to resolve a x1.5 difference at the seed noise measured: gpt-orth vs ngpt" in verdict


def test_settle_it_shows_the_effective_learning_rate_and_the_rank_correlations(paired):
    root, _, _ = paired
    out = root / "reports"
    doc = speedup_doc(root)
    rivals = doc["rivals"]
    for row in read_csv(out / "tables" / "settle.csv"):
        assert float(row["angular_rate"]) == pytest.approx(rivals["arms"][row["arm"]]["angular_rate"])
    primary = read_csv(out / "tables" / "primary.csv")[0]
    assert rivals["primary"]["ratio"] == pytest.approx(math.sqrt(3))
    # the rivals' verdict stays in the file; the angle line over every arm's measured angle reads the account
    assert primary["confounded"] == "true" and rivals["primary"]["verdict"] == "confounded"
    assert clause(rivals["primary"]).startswith("confounded by the effective learning rate: the arms it "
                                                "credits turn their weights x1.73 [1.73, 1.73]")
    assert primary["confound"] == ("read from every arm's measured angle per step (the angle line): "
                                   + doc["reading"]["accounts"]["effective learning rate"]["words"])
    assert "gpt-orth x3" in primary["confound"]
    # Spearman over the cell's four arms of ln S with ln angular rate, by an independent computation
    tracking = {r["metric"]: r for r in read_csv(out / "tables" / "tracking.csv")}
    arms = list(rivals["arms"])
    ln_s = [math.log(doc["arms"][a]["speedup"]["value"]) for a in arms]
    ln_rate = [math.log(rivals["arms"][a]["angular_rate"]) for a in arms]
    rho = stats.spearmanr(ln_s, ln_rate).statistic
    half = stats.norm.ppf(0.975) * math.sqrt(1.06 / (len(arms) - 3))
    row = tracking["angular rate (rad/step)"]
    assert int(row["n"]) == 4 and float(row["rho"]) == pytest.approx(rho)
    assert float(row["interval_lo"]) == pytest.approx(math.tanh(math.atanh(rho) - half))
    assert float(row["interval_hi"]) == pytest.approx(math.tanh(math.atanh(rho) + half))
    md = (out / "report.md").read_text()
    assert "a correlation, not a cause" in md and "enters at its bound value" in md


def test_ngpts_conditioning_has_one_word_in_every_table(paired):
    """ngpt constrains no singular value; the 2x2 counts its conditioning fixed, and every table says so."""
    root, _, _ = paired
    tables = root / "reports" / "tables"
    assert NGPT_CONDITIONING.startswith("counted fixed")
    (settle_row,) = [r for r in read_csv(tables / "settle.csv") if r["arm"] == "ngpt"]
    assert settle_row["conditioning"] == NGPT_CONDITIONING
    (comparison,) = [r for r in read_csv(tables / "comparisons.csv") if r["arm"] == "ngpt"]
    assert comparison["design"] == f"norms fixed, conditioning {NGPT_CONDITIONING}"
    md = (root / "reports" / "report.md").read_text()
    assert f"y_11 ngpt (conditioning {NGPT_CONDITIONING};" in md  # the factorial table's coding
    assert "conditioning good" not in md and "observed good" not in md
    assert f"conditioning {NGPT_CONDITIONING}" in md  # what was run: the arm's bullet


def test_arms_planted_equal_are_not_called_different(paired):
    root, _, _ = paired
    contrasts = {r["label"]: r for r in read_csv(root / "reports" / "tables" / "contrasts.csv")}
    equal = contrasts["gpt-orth vs ngpt"]
    assert equal["verdict"] not in ("faster", "slower")
    assert equal["verdict"] == "equivalent within x1.25"  # three seeds narrow it inside the margin
    assert float(equal["interval_lo"]) < 1 < float(equal["interval_hi"])
    # planted 1.3x against 3x: beyond the margin, by the symmetric rule
    assert contrasts["gpt-rownorm vs ngpt"]["verdict"] == "falls short by more than x1.25"


def test_a_grid_too_small_concludes_nothing_whatever_the_intervals(paired, tmp_path):
    root, params, params_path = paired
    small = copy.deepcopy(params)
    small["report"]["min_budget_for_claims"] = 10 * max(params["train"]["budgets"])
    rendered = render_report(settings_of(small), root, params_path, code_revision="test")
    md = rendered.files["report.md"].decode()
    assert "**What the data show.** Nothing, by design" in md
    assert "consistent with the account" not in md.split("**What the data show.**")[1]


# ----------------------------------------------------------------------------------------------------------
# One seed


def test_one_seed_says_no_interval_and_seeds_needed_not_measured(one_seed):
    out = one_seed
    md = (out / "report.md").read_text()
    rows = {r["arm"]: r for r in read_csv(out / "tables" / "speedup.csv")}
    for arm in ARMS[1:]:
        assert rows[arm]["display"].endswith("(one seed: no interval)") and rows[arm]["interval_lo"] == ""
        assert rows[arm]["verdict"] == "not resolved (no interval)" and rows[arm]["n_seeds"] == "1"
    for row in read_csv(out / "tables" / "comparisons.csv"):
        assert row["seeds_needed"] == "" and row["seeds_needed_text"] == "needs 2 seeds to measure the noise"
    for row in read_csv(out / "tables" / "contrasts.csv"):
        assert row["interval_lo"] == "" and row["verdict"] == "not resolved (no interval)"
        assert row["seeds_needed_text"] == "not measured (one seed)"
    verdict = md.split("**What the data show.**")[1].split("\n")[0]
    # one seed: the effect without an interval, and no reading of the account; nor of the confound, though
    # the one seed's rates put ngpt's planted 3x faster turning far beyond the margin
    assert "(no interval: 95% paired t on ln S over seeds, 1 seed): not resolved (no interval); the " \
        "account's predictions: gpt-orth vs gpt open" in verdict and "consistent with" not in verdict
    # the angle line fitted over one seed per arm: no interval, so the account is not resolved, and no
    # clause beside it
    assert "; so not resolved for the account that conditioning explains nGPT's speed-up; not resolved for " \
        "the account that the weight norms explain nGPT's speed-up; not resolved for the account that the " \
        "effective learning rate (how far each matrix turns per step) explains nGPT's speed-up." in verdict
    (primary,) = read_csv(out / "tables" / "primary.csv")
    assert primary["confounded"] == "" and primary["confound"].startswith(
        "read from every arm's measured angle per step (the angle line): not resolved for the account")
    assert "one seed: no interval" in primary["confound"]
    assert "Seeds to resolve a x1.5 difference: not measured (one seed: the seed noise is unmeasured)" \
        in verdict
    flags = {r["flag"] for r in read_csv(out / "tables" / "speedup_interpolated.csv")}
    assert flags == {"seed noise not measured (one seed)"}


# ----------------------------------------------------------------------------------------------------------
# Enough seeds for a bootstrap


def test_the_bootstrap_interval_is_shown_where_the_speedup_stage_gives_one(tmp_path):
    seeds = tuple(range(10))  # bootstrap.min_seeds
    params = synthetic.synthetic_params(seeds=seeds, budgets=(16384, 65536), min_budget_for_claims=1000)
    params["train"].update(contexts=[64], arms=["gpt", "ngpt"])
    params["speedup"]["reference_budget"] = "largest"  # budgets 4x apart: 1 to 4, nGPT's planted 3x a number
    out = render(tmp_path, params, synthetic.write_results(tmp_path, params))
    doc = speedup_doc(tmp_path)
    s = doc["arms"]["ngpt"]["speedup"]
    assert doc["bootstrap"]["min_seeds"] == 10 and s["bootstrap_interval"]
    (row,) = [r for r in read_csv(out / "tables" / "speedup.csv") if r["arm"] == "ngpt"]
    assert float(row["bootstrap_lo"]) == s["bootstrap_interval"][0]
    assert float(row["bootstrap_hi"]) == s["bootstrap_interval"][1]
    md = (out / "report.md").read_text()
    assert "| bootstrap 95% interval |" in md and row["bootstrap_display"] in md
