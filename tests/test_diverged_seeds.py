"""A held-out seed that diverged: left out of the estimate, replaced by `ngptlab plan --add-seeds`, and its
arm's divergence reported as an outcome with an exact interval.

Runs are planted (tests/support/synthetic.py) and written as the train stage writes them; the params file,
the grid file, `ngptlab plan --add-seeds` and `ngptlab speedup` are the real ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scipy import stats
from support.synthetic import write_run
from test_grow import BUDGETS, finish, grid, project

from ngptlab.cli import main
from ngptlab.config.load import load_params
from ngptlab.grid.enumeration import enumerate_runs
from ngptlab.report.kit.load import load_results
from ngptlab.report.sections.speedup import divergence_table
from ngptlab.speedup.divergence import divergence_rate

CELL = "cpu-4l-ctx64"
LOST = f"{CELL}-ngpt-t{BUDGETS[-1]}-lr0.003-s2"  # ngpt's held-out seed 2 diverges at its largest budget


def plan(tmp_path: Path, path: Path, n: int = 2) -> int:
    return main(["plan", "--params", str(path), "--root", str(tmp_path),
                 "--write", str(tmp_path / "plan.json"), "--add-seeds", str(n)])


def speedup(tmp_path: Path, path: Path) -> dict:
    assert main(["speedup", "--params", str(path), "--root", str(tmp_path), CELL]) == 0
    return json.loads((tmp_path / "results" / "speedup" / f"{CELL}.json").read_text())


def seeds_of(path: Path, arm: str) -> set[int]:
    return {s for e in load_params(path).train.added_seeds if e.arm == arm for s in e.seeds}


@pytest.fixture
def diverged(tmp_path: Path) -> Path:
    """Swept seed 0, held-out seeds 1 and 2 trained; ngpt's seed 2 diverged at its largest budget."""
    path = project(tmp_path, grid())
    finish(tmp_path, path)
    assert plan(tmp_path, path) == 0
    finish(tmp_path, path)
    params = load_params(path)
    [spec] = [s for s in enumerate_runs(params) if s.name == LOST]
    write_run(tmp_path, spec, params, status="diverged")
    return path


def test_a_diverged_held_out_seed_is_left_out_and_the_estimate_says_it_reads_fewer(tmp_path, diverged):
    doc = speedup(tmp_path, diverged)
    ngpt = doc["arms"]["ngpt"]
    assert [p["seed"] for p in ngpt["per_seed"]] == [0, 1]  # seed 2 is not a biased value, nor a bound
    assert [r["seed"] for r in ngpt["replaced"]] == [2]
    assert LOST in ngpt["replaced"][0]["reason"]
    assert ngpt["speedup"]["n_seeds"] == 1  # the held-out seeds 1, 2 less the lost one
    assert "fewer than the 2" in ngpt["speedup"]["note"]
    assert doc["arms"]["gpt-orth"]["replaced"] == [] and doc["arms"]["gpt-orth"]["speedup"]["n_seeds"] == 2
    contrast = next(c for c in doc["contrasts"] if {c["a"], c["b"]} == {"ngpt", "gpt-orth"})
    assert contrast["seeds"] == [1]  # paired over the seeds both arms read


def test_add_seeds_plans_one_replacement_at_the_same_lr_and_the_estimate_reads_it(tmp_path, diverged):
    before = {arm: seeds_of(diverged, arm) for arm in ("gpt", "ngpt", "gpt-orth")}
    assert plan(tmp_path, diverged) == 0
    # the next unused seed, for the arm that lost one and the baseline whose target it needs
    assert seeds_of(diverged, "ngpt") == before["ngpt"] | {3}
    assert seeds_of(diverged, "gpt") == before["gpt"] | {3}
    assert seeds_of(diverged, "gpt-orth") == before["gpt-orth"]
    assert {e.lr for e in load_params(diverged).train.added_seeds if 3 in e.seeds} == {0.003}
    text = diverged.read_text()
    assert plan(tmp_path, diverged) == 0 and diverged.read_text() == text  # a second call changes nothing
    params = load_params(diverged)
    for spec in enumerate_runs(params):
        if spec.seed == 3:
            write_run(tmp_path, spec, params)
    doc = speedup(tmp_path, diverged)
    ngpt = doc["arms"]["ngpt"]
    assert [p["seed"] for p in ngpt["per_seed"]] == [0, 1, 3]
    assert ngpt["speedup"]["n_seeds"] == 2 and "replaced by later seeds" in ngpt["speedup"]["note"]
    assert ngpt["divergence"]["diverged_seeds"] == [2]
    assert (ngpt["divergence"]["diverged"], ngpt["divergence"]["seeds"]) == (1, 3)


def test_the_divergence_outcome_is_the_rate_with_its_clopper_pearson_interval(tmp_path, diverged):
    doc = speedup(tmp_path, diverged)
    ngpt, gpt = doc["arms"]["ngpt"]["divergence"], doc["arms"]["gpt"]["divergence"]
    # 1 of 2 held-out seeds: the exact interval's ends are Beta quantiles (Clopper and Pearson 1934)
    assert (ngpt["diverged"], ngpt["seeds"], ngpt["rate"]) == (1, 2, 0.5)
    assert ngpt["interval"] == pytest.approx([stats.beta.ppf(0.025, 1, 2), stats.beta.ppf(0.975, 2, 1)])
    # in closed form for 1 of 2: [1 - sqrt(0.975), sqrt(0.975)] = [0.01258, 0.98742]
    assert ngpt["interval"] == pytest.approx([1 - 0.975 ** 0.5, 0.975 ** 0.5])
    assert ngpt["interval"][0] == pytest.approx(0.0125791, abs=1e-7)
    # none of 2: the lower end is 0, the upper 1 - 0.025^(1/2)
    assert (gpt["diverged"], gpt["rate"]) == (0, 0.0)
    assert gpt["interval"] == pytest.approx([0.0, 1 - 0.025 ** 0.5])
    assert divergence_rate(0, 0)["interval"] is None


def test_a_lost_baseline_seed_is_lost_to_every_arm_and_every_arm_gets_its_replacement(tmp_path):
    path = project(tmp_path, grid())
    finish(tmp_path, path)
    assert plan(tmp_path, path) == 0
    finish(tmp_path, path)
    params = load_params(path)
    [spec] = [s for s in enumerate_runs(params) if s.name == f"{CELL}-gpt-t{BUDGETS[0]}-lr0.003-s1"]
    write_run(tmp_path, spec, params, status="diverged")
    doc = speedup(tmp_path, path)
    for arm in ("ngpt", "gpt-orth"):
        assert [r["seed"] for r in doc["arms"][arm]["replaced"]] == [1]
        assert "baseline's run diverged" in doc["arms"][arm]["replaced"][0]["reason"]
        assert doc["arms"][arm]["divergence"]["diverged"] == 0  # the baseline's divergence is not theirs
    assert doc["arms"]["gpt"]["divergence"]["diverged"] == 1
    assert plan(tmp_path, path) == 0
    assert all(seeds_of(path, arm) == {1, 2, 3} for arm in ("gpt", "ngpt", "gpt-orth"))


def test_the_reports_speedup_section_shows_the_divergence_outcome(tmp_path, diverged):
    speedup(tmp_path, diverged)
    table = divergence_table(load_results(load_params(diverged), tmp_path, diverged))
    rows = {row[table.columns.index("arm")]: dict(zip(table.columns, row, strict=True)) for row in table.rows}
    assert (rows["ngpt"]["diverged"], rows["ngpt"]["seeds"], rows["ngpt"]["rate"]) == (1, 2, 0.5)
    assert rows["ngpt"]["interval"] == "[0.0126, 0.987]"
    assert rows["ngpt"]["left_out"].startswith(f"seed 2: diverged: {LOST}")
    assert (rows["gpt-orth"]["diverged"], rows["gpt-orth"]["left_out"]) == (0, None)


def test_the_divergence_tables_header_states_the_level_the_file_states(tmp_path, diverged):
    """The speed-up file's divergence intervals at level 0.9: the table's header says 90%."""
    doc = speedup(tmp_path, diverged)
    for entry in doc["arms"].values():
        entry["divergence"]["level"] = 0.9
    (tmp_path / "results" / "speedup" / f"{CELL}.json").write_text(json.dumps(doc))
    table = divergence_table(load_results(load_params(diverged), tmp_path, diverged))
    assert table.headers["interval"] == "90% interval (Clopper-Pearson)"
