"""Grids that grow by their results: `ngptlab plan --prune-sweeps K` and `--add-seeds N`, train.protocol, and
the presets pilot and settle that use them (their projected totals within the stated limits).

Results are planted (tests/support/synthetic.py: a power law per arm, best learning rate 3e-3) and written as
the train stage writes them; the params file and the grid file are the real ones, edited by the real
command.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.synthetic import synthetic_params, write_run

from ngptlab.cli import main
from ngptlab.config.load import load_params, validate_params
from ngptlab.errors import ParamsError
from ngptlab.grid.enumeration import enumerate_runs
from ngptlab.grid.sweeps import lr_sweep
from ngptlab.grid.trunks import enumerate_segments
from ngptlab.plan.protocol import projected_params
from ngptlab.plan.prune import kept_window, prune_sweeps
from ngptlab.plan.seeds import add_seeds
from ngptlab.results import train_dir

REPO = Path(__file__).resolve().parents[1]
SWEEP = [1.0e-3, 3.0e-3, 1.0e-2]  # the planted optimum is 3e-3: interior
UNTUNED = [3.0e-3, 1.0e-2, 3.0e-2]  # the planted optimum at its bottom: the sweep may miss the true one
BUDGETS = (16384, 65536, 262144)


def grid(schedule: str = "cosine", protocol: dict | None = None, sweeps: dict | None = None) -> dict:
    """The tests' grid: three arms sweeping SWEEP, or the sweeps given for some of them."""
    params = synthetic_params(seeds=(0,), budgets=BUDGETS, schedule=schedule)
    train = params["train"]
    train.update(contexts=[64], arms=["gpt", "ngpt", "gpt-orth"],
                 learning_rates={"cpu-4l": {arm: list(SWEEP) for arm in ("gpt", "ngpt", "gpt-orth")}
                                 | (sweeps or {})})
    if protocol:
        train["protocol"] = protocol
    validate_params(params)
    return params


def project(tmp_path: Path, params: dict) -> Path:
    """A project directory: its params file, and its code (the grid file fingerprints it)."""
    (tmp_path / "src").symlink_to(REPO / "src")
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return path


def finish(root: Path, params_path: Path, budgets=None) -> None:
    """Planted results for every run of the grid now in the params file (at these budgets only)."""
    params = load_params(params_path)
    for spec in enumerate_runs(params):
        if budgets is None or spec.budget in budgets:
            write_run(root, spec, params)


def run_names(params_path: Path) -> set[str]:
    return {run.name for run in enumerate_runs(load_params(params_path))}


def test_the_kept_window_is_the_best_and_the_learning_rates_below_it():
    assert kept_window([1, 2, 4], 2, 2) == [1, 2]
    assert kept_window([1, 2, 4], 4, 2) == [2, 4]
    assert kept_window([1, 2, 4], 1, 2) == [1, 2]  # at the bottom the window moves up
    assert kept_window([4, 1, 2, 8], 8, 3) == [2, 4, 8]
    assert kept_window([1, 2], 2, 3) == [1, 2]


def test_prune_sweeps_drops_exactly_the_pruned_runs_and_a_second_call_changes_nothing(tmp_path):
    path = project(tmp_path, grid())
    finish(tmp_path, path, budgets=BUDGETS[:2])
    before = run_names(path)
    entries, notes = prune_sweeps(path, tmp_path, tmp_path / "plan.json", keep=2)
    assert notes == []
    assert [(e["arm"], e["after_budget"], e["best_lr"], e["learning_rates"]) for e in entries] == [
        (arm, BUDGETS[1], 3.0e-3, [1.0e-3, 3.0e-3]) for arm in ("gpt", "ngpt", "gpt-orth")]
    dropped = before - run_names(path)
    assert dropped == {f"cpu-4l-ctx64-{arm}-t262144-lr0.01-s0" for arm in ("gpt", "ngpt", "gpt-orth")}
    assert run_names(path) <= before
    grid_file = json.loads((tmp_path / "plan.json").read_text())
    assert set(grid_file["runs"]) == run_names(path)
    text = path.read_text()
    assert prune_sweeps(path, tmp_path, tmp_path / "plan.json", keep=2) == ([], [])
    assert path.read_text() == text
    assert lr_sweep(load_params(path).train, "cpu-4l", 64, "gpt", BUDGETS[0]) == SWEEP  # below: whole


def test_pruning_keeps_a_run_already_trained_at_a_learning_rate_it_drops(tmp_path):
    path = project(tmp_path, grid())
    finish(tmp_path, path, budgets=BUDGETS[:2])
    trained = f"cpu-4l-ctx64-gpt-t{BUDGETS[2]}-lr0.01-s0"  # trained before the pruning came to drop it
    spec = next(run for run in enumerate_runs(load_params(path)) if run.name == trained)
    write_run(tmp_path, spec, load_params(path))
    files = {f: f.read_bytes() for f in train_dir(tmp_path, spec).iterdir()}
    before = run_names(path)
    entries, _ = prune_sweeps(path, tmp_path, tmp_path / "plan.json", keep=2)
    kept = {e["arm"]: e.get("trained", []) for e in entries}
    assert kept == {"gpt": [{"budget": BUDGETS[2], "lr": 1.0e-2}], "ngpt": [], "gpt-orth": []}
    dropped = {f"cpu-4l-ctx64-{arm}-t{BUDGETS[2]}-lr0.01-s0" for arm in ("ngpt", "gpt-orth")}
    assert before - run_names(path) == dropped
    assert trained in run_names(path)  # still in the grid: Snakemake and DVC keep it, the speed-up reads it
    assert trained in json.loads((tmp_path / "plan.json").read_text())["runs"]
    assert lr_sweep(load_params(path).train, "cpu-4l", 64, "gpt", BUDGETS[2]) == SWEEP
    assert {f: f.read_bytes() for f in train_dir(tmp_path, spec).iterdir()} == files  # nothing deleted
    text = path.read_text()
    assert prune_sweeps(path, tmp_path, tmp_path / "plan.json", keep=2) == ([], [])
    assert path.read_text() == text


def cli(*args: str) -> int:
    return main(["plan", *args])


@pytest.mark.parametrize("command, trained", [(("--prune-sweeps", "2"), BUDGETS[:2]),
                                              (("--add-seeds", "1"), None)])
def test_growing_an_untuned_sweep_is_refused_and_writes_nothing_unless_allowed(tmp_path, capsys, command,
                                                                               trained):
    path = project(tmp_path, grid(sweeps={"gpt": UNTUNED}))
    finish(tmp_path, path, budgets=trained)
    plan_file = tmp_path / "results" / "plan.json"
    grow = ["--params", str(path), "--root", str(tmp_path), *command]
    assert cli("--params", str(path), "--root", str(tmp_path), "--write", str(plan_file)) == 0
    written = {f: f.read_bytes() for f in (path, plan_file)}
    capsys.readouterr()

    assert cli(*grow) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"ngptlab plan: error: {command[0]} refused: an arm's best learning rate sits "
                            "at an edge of its sweep")
    named = re.findall(r"^  (cpu-4l ctx64 \S+) at ([\d,]+): best lr 0.003 of 0.003, 0.01, 0.03: "
                       r"at the bottom edge$", error, flags=re.M)
    assert named and {arm for arm, _ in named} == {"cpu-4l ctx64 gpt"}  # the interior arms are not named
    if command[0] == "--prune-sweeps":
        assert [budget for _, budget in named] == [f"{BUDGETS[1]:,}"]  # the budget the pruning decides at
    assert "`ngptlab plan --extend-sweeps`" in error and "--allow-untuned" in error
    assert {f: f.read_bytes() for f in written} == written  # nothing written

    assert cli(*grow, "--allow-untuned") == 0
    assert path.read_bytes() != written[path] and plan_file.read_bytes() != written[plan_file]
    out = capsys.readouterr().out
    assert "note: went on with an untuned sweep (--allow-untuned): cpu-4l ctx64 gpt at" in out


def test_check_tuning_prints_each_best_and_fails_while_one_sits_at_an_edge(tmp_path, capsys):
    path = project(tmp_path, grid(sweeps={"gpt": UNTUNED}))
    check = ["--params", str(path), "--root", str(tmp_path), "--check-tuning"]
    finish(tmp_path, path, budgets=BUDGETS[:1])
    assert cli(*check) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == ["cpu-4l ctx64 gpt at 16,384: best lr 0.003 of 0.003, 0.01, 0.03: at the bottom edge",
                         "cpu-4l ctx64 gpt at 65,536: waiting for results",
                         "cpu-4l ctx64 gpt at 262,144: waiting for results"]
    assert "cpu-4l ctx64 ngpt at 16,384: best lr 0.003 of 0.001, 0.003, 0.01: interior" in lines
    assert lines[-1] == ("not tuned: 1 (arm, budget) with its best learning rate at an edge of its sweep "
                         "(fix: `ngptlab plan --extend-sweeps`, then train the new runs), 6 waiting for "
                         "results")

    (tmp_path / "tuned").mkdir()
    tuned = project(tmp_path / "tuned", grid())
    finish(tmp_path / "tuned", tuned)
    assert cli("--params", str(tuned), "--root", str(tmp_path / "tuned"), "--check-tuning") == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 * len(BUDGETS) + 1 and all(line.endswith(": interior") for line in lines[:-1])
    assert lines[-1] == "tuned: every arm's best learning rate lies inside its sweep at every budget"


def test_prune_sweeps_waits_for_every_budget_up_to_the_decision(tmp_path):
    path = project(tmp_path, grid())
    finish(tmp_path, path, budgets=BUDGETS[1:2])  # the smallest budget has no results
    entries, notes = prune_sweeps(path, tmp_path, tmp_path / "plan.json", keep=2)
    assert entries == [] and notes == ["cpu-4l ctx64: not pruned: no budget below the largest has all its "
                                       "results (and those below it) in"]


def test_add_seeds_adds_exactly_the_best_runs_and_a_second_call_changes_nothing(tmp_path):
    path = project(tmp_path, grid())
    finish(tmp_path, path)
    before = run_names(path)
    entries, notes = add_seeds(path, tmp_path, tmp_path / "plan.json", 2)
    assert notes == [] and len(entries) == 3 * len(BUDGETS)
    added = run_names(path) - before
    assert added == {f"cpu-4l-ctx64-{arm}-t{b}-lr0.003-s{s}" for arm in ("gpt", "ngpt", "gpt-orth")
                     for b in BUDGETS for s in (1, 2)}
    assert before <= run_names(path)
    text = path.read_text()
    assert add_seeds(path, tmp_path, tmp_path / "plan.json", 2) == ([], [])
    assert path.read_text() == text
    finish(tmp_path, path)
    entries, _ = add_seeds(path, tmp_path, tmp_path / "plan.json", 3)  # one more seed: only seed 3 is new
    assert run_names(path) - before - added == {f"cpu-4l-ctx64-{arm}-t{b}-lr0.003-s3"
                                                for arm in ("gpt", "ngpt", "gpt-orth") for b in BUDGETS}


def test_with_wsd_a_pruned_trunk_stops_at_its_last_budget_and_seeds_go_to_the_best_trunk(tmp_path):
    path = project(tmp_path, grid("wsd"))
    finish(tmp_path, path, budgets=BUDGETS[:2])
    prune_sweeps(path, tmp_path, tmp_path / "plan.json", keep=2)
    params = load_params(path)
    ends = {}
    for segment in enumerate_segments(params):
        ends[segment.trunk.lr, segment.trunk.arm] = max(ends.get((segment.trunk.lr, segment.trunk.arm), 0),
                                                        segment.step)
    last = {lr: {ends[lr, arm] for arm in ("gpt", "ngpt", "gpt-orth")} for lr in SWEEP}
    assert last[1.0e-2] == {round(0.8 * 65536 / 256)} and last[3.0e-3] == {round(0.8 * 262144 / 256)}
    finish(tmp_path, path)
    add_seeds(path, tmp_path, tmp_path / "plan.json", 1)
    seeded = {s.trunk for s in enumerate_segments(load_params(path)) if s.trunk.seed == 1}
    assert {(t.arm, t.lr) for t in seeded} == {(arm, 3.0e-3) for arm in ("gpt", "ngpt", "gpt-orth")}


def test_the_protocol_holds_budgets_back_until_the_sweep_is_pruned(tmp_path):
    path = project(tmp_path, grid(protocol={"prune_sweeps": {"after_budget": BUDGETS[1], "keep": 2},
                                            "add_seeds": 2}))
    assert {run.budget for run in enumerate_runs(load_params(path))} == set(BUDGETS[:2])
    finish(tmp_path, path)
    entries, notes = add_seeds(path, tmp_path, tmp_path / "plan.json", 2)
    assert entries == [] and notes[0].startswith("cpu-4l ctx64: no seeds added: train.protocol holds")
    prune_sweeps(path, tmp_path, tmp_path / "plan.json", keep=2)
    runs = enumerate_runs(load_params(path))
    assert sorted(run.lr for run in runs if run.budget == BUDGETS[2] and run.arm == "gpt") == SWEEP[:2]


def test_the_projection_applies_the_protocol_and_matches_the_grid_it_becomes(tmp_path):
    protocol = {"prune_sweeps": {"after_budget": BUDGETS[1], "keep": 2}, "add_seeds": 2}
    path = project(tmp_path, grid(protocol=protocol))
    projected = projected_params(load_params(path))
    finish(tmp_path, path)
    prune_sweeps(path, tmp_path, tmp_path / "plan.json", keep=2)
    finish(tmp_path, path)
    add_seeds(path, tmp_path, tmp_path / "plan.json", 2)
    assert len(enumerate_runs(projected)) == len(enumerate_runs(load_params(path))) == 3 * (3 * 2 + 2 + 2 * 3)


@pytest.mark.parametrize("change, message", [
    (lambda t: t.update(added_seeds=[{"scale": "cpu-4l", "context": 64, "arm": "gpt", "budget": 16384,
                                      "lr": 3.0e-3, "seeds": [0]}]),
     "train.added_seeds[0]: seed 0 is already in train.seeds"),
    (lambda t: t.update(added_seeds=[{"scale": "cpu-4l", "context": 64, "arm": "gpt", "budget": 16384,
                                      "lr": 5.0e-3, "seeds": [1]}]),
     "train.added_seeds[0]: lr 0.005 is not swept at budget 16384"),
    (lambda t: t.update(pruned_sweeps=[{"scale": "cpu-4l", "context": 64, "arm": "gpt", "after_budget": 1000,
                                        "keep": 2, "learning_rates": [1.0e-3]}]),
     "train.pruned_sweeps[0]: after_budget 1000 is not in train.budgets"),
    (lambda t: t.update(pruned_sweeps=[{"scale": "cpu-4l", "context": 64, "arm": "ngpt-freew",
                                        "after_budget": 16384, "keep": 2, "learning_rates": [1.0e-3]}]),
     "train.pruned_sweeps[0]: arm 'ngpt-freew' is not in train.arms"),
    (lambda t: t.update(pruned_sweeps=[{"scale": "cpu-4l", "context": 64, "arm": "gpt", "after_budget": 65536,
                                        "keep": 2, "learning_rates": [1.0e-3],
                                        "trained": [{"budget": 65536, "lr": 1.0e-2}]}]),
     "train.pruned_sweeps[0].trained: budget 65536 is not one of train.budgets above after_budget 65536"),
    (lambda t: t.update(pruned_sweeps=[{"scale": "cpu-4l", "context": 64, "arm": "gpt", "after_budget": 65536,
                                        "keep": 2, "learning_rates": [1.0e-3],
                                        "trained": [{"budget": 262144, "lr": 5.0e-3}]}]),
     "train.pruned_sweeps[0].trained: learning rate 0.005 is not in the sweep ['0.001', '0.003', '0.01']"),
    (lambda t: t.update(protocol={"prune_sweeps": {"after_budget": 262144, "keep": 2}}),
     "train.protocol.prune_sweeps.after_budget: 262144 must be one of train.budgets below the largest"),
])
def test_a_bad_record_is_refused_with_one_line_naming_it(change, message):
    params = copy.deepcopy(grid())
    change(params["train"])
    with pytest.raises(ParamsError, match="^params: " + re.escape(message)):
        validate_params(params)


def plan_json(preset: str) -> dict:
    out = subprocess.run([str(Path(sys.executable).parent / "ngptlab"), "plan", "--json", "--params",
                          str(REPO / "workflow" / "presets" / f"{preset}.yaml")],
                         capture_output=True, text=True, check=True, cwd=REPO)
    return json.loads(out.stdout)


@pytest.mark.parametrize("preset, limit", [("settle", 16_000), ("pilot", 3_000)])
def test_the_presets_that_settle_it_stay_within_their_limits(preset, limit):
    plan = plan_json(preset)
    assert plan["projected"]["total_gpu_hours"] <= limit
    assert plan["projected"]["runs"] > len(plan["runs"])  # the seeds (and pruned budgets) still to come
    header = (REPO / "workflow" / "presets" / f"{preset}.yaml").read_text().split("\n\n")[0]
    stated = f"{plan['projected']['total_gpu_hours']:,.0f} GPU-hours"
    lines = [n for n, line in enumerate(header.splitlines(), 1) if "GPU-hours" in line]
    assert stated in header, (f"workflow/presets/{preset}.yaml, header lines {lines}: state the whole "
                              f"protocol's cost, `ngptlab plan`'s projection, as '{stated}'")


def test_without_a_number_the_grow_commands_take_the_protocols(tmp_path):
    """`--prune-sweeps` and `--add-seeds` alone follow the params file's train.protocol (the preset's steps),
    so the cluster recipe's commands are the same for every preset."""
    protocol = {"prune_sweeps": {"after_budget": BUDGETS[1], "keep": 1}, "add_seeds": 2}
    path = project(tmp_path, grid(protocol=protocol))
    finish(tmp_path, path)
    common = ["plan", "--params", str(path), "--root", str(tmp_path), "--write", str(tmp_path / "plan.json"),
              "--allow-untuned"]
    assert main([*common, "--prune-sweeps"]) == 0
    assert {len(entry.learning_rates) for entry in load_params(path).train.pruned_sweeps} == {1}
    finish(tmp_path, path)
    assert main([*common, "--add-seeds"]) == 0
    assert {seed for entry in load_params(path).train.added_seeds for seed in entry.seeds} == {1, 2}


def test_add_seeds_without_a_number_needs_the_protocols(tmp_path, capsys):
    path = project(tmp_path, grid())
    finish(tmp_path, path)
    assert main(["plan", "--params", str(path), "--root", str(tmp_path), "--add-seeds"]) == 2
    assert "train.protocol.add_seeds" in capsys.readouterr().err
