"""WSD schedules and shared trunks, in-process and through the CLI (tiny shapes, real training on CPU).

A branch equals the same budget trained alone (checkpoint and metrics bytes); the tokens a small WSD sweep
trains, as its runs record them, are B_k + f x (the other budgets); a killed trunk segment resumes to the
same bytes; a budget larger than every other continues the trunk from its kept state; kept states are deleted
once no branch needs them; bad WSD settings are one line each and touch nothing already trained.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from support.train import (
    CONTEXT,
    cli_env,
    make_params,
    metrics,
    results_dir,
    run_dir,
    train_command,
    write_params,
    write_shards,
)

from ngptlab import layout
from ngptlab.checkpoint import sha256_file
from ngptlab.config.load import validate_params
from ngptlab.errors import ParamsError
from ngptlab.grid.enumeration import enumerate_runs
from ngptlab.grid.runs import RunSpec
from ngptlab.grid.trunks import enumerate_segments
from ngptlab.plan.grid import resolved_grid
from ngptlab.schedule import branch_point, make_schedule, make_wsd, trunk_warmup
from ngptlab.settings import Params
from ngptlab.train.loop import EXIT_RESUMABLE, train_run

torch.set_num_threads(1)

BATCH_TOKENS = 16 * CONTEXT  # make_params: 16 sequences of 32 tokens per step
BUDGETS = [10 * BATCH_TOKENS, 20 * BATCH_TOKENS, 40 * BATCH_TOKENS]  # 10, 20, 40 steps: 2x apart
FRACTION = 0.2


def wsd_params(budgets=BUDGETS, **train) -> dict:
    params = make_params(arms=["gpt"], budgets=list(budgets), schedule="wsd", cooldown_fraction=FRACTION,
                         learning_rates={"cpu-4l": {"gpt": [3e-3]}}, warmup_steps=2,
                         checkpoint_every_tokens=4 * BATCH_TOKENS, **train)
    validate_params(params)
    return params


def train_all(root: Path, params: dict) -> None:
    """What the DAG does: every trunk segment in order, then every run (kappa in their rows, as the CLI)."""
    for job in (*enumerate_segments(Params.of(params)), *enumerate_runs(Params.of(params))):
        settings = Params.of(params)
        assert train_run(job, settings.train, root=root, progress=False, condition=settings.condition) == 0


def timings(root: Path) -> dict[str, dict]:
    return {path.stem: json.loads(path.read_text()) for path in (root / "results" / "timing").rglob("*.json")}


def kept_steps(root: Path, params: dict) -> list[int]:
    trunk = enumerate_segments(Params.of(params))[0].trunk
    folder = root / layout.trunk_dir(trunk.cell, trunk.name)
    return sorted(int(path.name[2:]) for path in folder.glob("to*"))


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    root = tmp_path_factory.mktemp("wsd") / "shared"
    write_shards(root)
    params = wsd_params()
    train_all(root, params)
    return root, params


# ----------------------------------------------------------------------------------------------------------
# The schedule and the branch points


def test_wsd_holds_the_rate_then_cools_down_to_zero_at_the_budget():
    train = Params.of(wsd_params()).train
    s = make_wsd(train, CONTEXT, BUDGETS[0], 10, 2)
    assert s.decay_start == 8  # round(0.8 x 10)
    assert [s.factor(i) for i in range(10)] == pytest.approx([0.5, 1, 1, 1, 1, 1, 1, 1, 1, 1 - 0.5 ** 0.5])
    linear = make_wsd(replace(train, cooldown_shape="linear"), CONTEXT, BUDGETS[0], 10, 2)
    assert linear.factor(9) == pytest.approx(0.5)
    # before its branch point every budget's factor is the trunk's: one trunk serves them all
    longer = make_wsd(train, CONTEXT, BUDGETS[2], 40, 2)
    assert [longer.factor(i) for i in range(8)] == [s.factor(i) for i in range(8)]


def test_branch_points_round_half_up_and_the_trunk_warms_up_by_the_smallest_budget():
    train = Params.of(wsd_params()).train
    assert [branch_point(train, CONTEXT, b) for b in BUDGETS] == [8, 16, 32]
    assert branch_point(replace(train, cooldown_fraction=0.25), CONTEXT, 6 * BATCH_TOKENS) == 5  # 4.5 -> 5
    # warmup_steps 2 of warmup_max_fraction 0.5 x 10 steps; the same for the 40-step budget
    assert trunk_warmup(train, CONTEXT, True) == 2 and trunk_warmup(train, CONTEXT, False) == 0
    assert make_schedule(40, 2).factor(20) < 1  # cosine would already be decaying


def test_segments_chain_from_branch_point_to_branch_point():
    segments = enumerate_segments(Params.of(wsd_params()))
    assert [(s.start, s.step) for s in segments] == [(0, 8), (8, 16), (16, 32)]
    assert segments[1].name == "cpu-4l-ctx32-gpt-lr0.003-s0-trunk-from8-to16"
    run = RunSpec("cpu-4l", CONTEXT, "gpt", BUDGETS[1], 3e-3, 0, "wsd")
    after = resolved_grid(Params.of(wsd_params()))["runs"][run.name]["after"]  # what orders the run in DVC
    assert after == layout.trunk_record(run.cell, segments[1].trunk.name, "from8-to16")


def test_a_cosine_run_and_a_wsd_run_of_one_grid_point_are_told_apart():
    params = wsd_params(calibrate={"budgets": [BUDGETS[-1]]})
    names = [run.name for run in enumerate_runs(Params.of(params))]
    assert "cpu-4l-ctx32-gpt-t20480-lr0.003-s0-wsd" in names
    assert "cpu-4l-ctx32-gpt-t20480-lr0.003-s0" in names and len(names) == 4


# ----------------------------------------------------------------------------------------------------------
# Training


def test_a_branch_is_byte_identical_to_the_same_budget_trained_alone(shared, tmp_path):
    root, params = shared
    alone = tmp_path / "alone"
    write_shards(alone)
    for run in enumerate_runs(Params.of(params))[:2]:
        # no trunk: from step 0
        settings = Params.of(params)
        assert train_run(run, settings.train, root=alone, progress=False, condition=settings.condition) == 0
        assert timings(alone)[run.name]["started_at_step"] == 0
        point = branch_point(Params.of(params).train, CONTEXT, run.budget)
        assert timings(root)[run.name]["started_at_step"] == point
        for name in ("model.safetensors", "config.json"):
            assert sha256_file(run_dir(root, run.name) / name) == sha256_file(run_dir(alone, run.name) / name)
        assert (results_dir(root, run.name) / "metrics.jsonl").read_bytes() == \
            (results_dir(alone, run.name) / "metrics.jsonl").read_bytes()


def test_the_sweep_trains_the_largest_budget_plus_f_times_the_others(shared):
    root, params = shared
    trained = sum(t["trained_tokens"] for t in timings(root).values())
    assert trained == BUDGETS[-1] + FRACTION * sum(BUDGETS[:-1])  # 23552, against 35840 in cosine
    rows = metrics(root, enumerate_runs(Params.of(params))[2].name)
    assert rows[-1]["tokens"] == BUDGETS[-1] and rows[-1]["lr"] == pytest.approx(3e-3 * (1 - (7 / 8) ** 0.5))


def test_kept_states_are_deleted_once_no_branch_needs_them_and_the_latest_stays(shared):
    root, params = shared
    assert kept_steps(root, params) == [32]  # kept: a larger budget continues from it


def test_a_larger_budget_continues_the_trunk_from_its_kept_state(shared, tmp_path):
    root, params = shared
    grown = wsd_params(budgets=[*BUDGETS, 80 * BATCH_TOKENS])
    before = {name: t["trained_tokens"] for name, t in timings(root).items()}
    train_all(root, grown)  # the old segments and runs are done: only the new ones train
    after = timings(root)
    new = {name: t["trained_tokens"] for name, t in after.items() if name not in before}
    assert new == {"cpu-4l-ctx32-gpt-lr0.003-s0-trunk-from32-to64": 32 * BATCH_TOKENS,
                   "cpu-4l-ctx32-gpt-t40960-lr0.003-s0-wsd": 16 * BATCH_TOKENS}
    assert {name: after[name]["trained_tokens"] for name in before} == before
    assert kept_steps(root, grown) == [64]


def test_a_killed_trunk_segment_resumes_to_the_same_bytes(shared, tmp_path):
    root, params = shared
    killed = tmp_path / "killed"
    write_shards(killed)
    write_params(killed, params)
    first = enumerate_segments(Params.of(params))[0]
    state_dir = killed / layout.trunk_dir(first.trunk.cell, first.trunk.name) / "state"
    proc = subprocess.Popen(train_command(killed, first.name), env=cli_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (state_dir / "latest.json").is_file():  # the checkpoint at step 4
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline
        time.sleep(0.002)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == EXIT_RESUMABLE
    assert not (killed / layout.trunk_record(first.trunk.cell, first.trunk.name, first.span)).exists()
    train_all(killed, params)  # resumes the segment, then the rest
    record = json.loads((killed / layout.trunk_record(first.trunk.cell, first.trunk.name,
                                                      first.span)).read_text())
    assert record["status"] == "completed" and record["step"] == 8
    for run in enumerate_runs(Params.of(params)):
        assert sha256_file(run_dir(killed, run.name) / "model.safetensors") == \
            sha256_file(run_dir(root, run.name) / "model.safetensors")
        assert (results_dir(killed, run.name) / "metrics.jsonl").read_bytes() == \
            (results_dir(root, run.name) / "metrics.jsonl").read_bytes()


def test_a_diverging_trunk_ends_its_segments_and_branches_as_diverged(tmp_path):
    params = wsd_params(diverge_loss=1.0)  # the first step's loss (~ln 256) is above it
    write_shards(tmp_path)
    train_all(tmp_path, params)
    for segment in enumerate_segments(Params.of(params)):
        record = json.loads((tmp_path / layout.trunk_record(segment.trunk.cell, segment.trunk.name,
                                                            segment.span)).read_text())
        assert record["status"] == "diverged" and record["diagnostics"]["step"] == 0
    for run in enumerate_runs(Params.of(params)):
        summary = json.loads((results_dir(tmp_path, run.name) / "summary.json").read_text())
        assert summary["status"] == "diverged" and summary["diagnostics"]["step"] == 0


# ----------------------------------------------------------------------------------------------------------
# Bad input: one line naming the key, nothing trained touched


@pytest.mark.parametrize("change, message", [
    ({"cooldown_fraction": 1.0}, "train.cooldown_fraction: 1.0 must be < 1"),
    ({"cooldown_fraction": 0}, "train.cooldown_fraction: 0 must be > 0"),
    ({"schedule": "linear"}, "train.schedule: 'linear' is not allowed; allowed values: cosine, wsd"),
    ({"cooldown_shape": "cosine"}, "train.cooldown_shape: 'cosine' is not allowed"),
    ({"warmup_steps": 9, "warmup_max_fraction": 1.0},
     "train.budgets: 5120 tokens (10 steps at context 32) would start its cooldown at step 8, inside the "
     "9-step warmup"),
    ({"calibrate": {"budgets": [1024]}}, "train.calibrate.budgets: 1024 is not in train.budgets"),
])
def test_bad_wsd_settings_are_one_line_naming_the_key(change, message):
    params = wsd_params()
    params["train"].update(change)
    with pytest.raises(ParamsError) as err:
        validate_params(params)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_bad_wsd_setting_leaves_what_was_trained_as_it_was(shared, tmp_path):
    root, params = shared
    before = {path: path.read_bytes() for path in (root / "results").rglob("*") if path.is_file()}
    bad = json.loads(json.dumps(params))
    bad["train"]["cooldown_fraction"] = 1.5
    path = write_params(tmp_path, bad)
    run = enumerate_runs(Params.of(params))[0].name
    proc = subprocess.run([*train_command(root, run)[:3], "train", "--params", str(path), "--root", str(root),
                           run], env=cli_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].endswith("train.cooldown_fraction: 1.5 must be < 1")
    assert {path: path.read_bytes() for path in (root / "results").rglob("*") if path.is_file()} == before


def test_only_the_schedule_module_tells_the_schedules_apart_by_name():
    from ngptlab import schedule

    wsd = RunSpec("cpu-4l", 128, "gpt", 4096, 1e-3, 0, schedule.WSD)
    cosine = RunSpec("cpu-4l", 128, "gpt", 4096, 1e-3, 0)
    assert schedule.shares_trunk(wsd) and not schedule.shares_trunk(cosine)
    assert wsd.name.endswith("-wsd") and cosine.name.endswith("-s0")
    assert [schedule.from_suffix(s) for s in ("-wsd", None)] == [schedule.WSD, schedule.COSINE]
    assert cosine.as_dict().keys() == {"scale", "context", "arm", "budget", "lr", "seed"}  # as before WSD
    assert schedule.is_wsd(Params.of(wsd_params()).train)
    assert not schedule.is_wsd(Params.of(make_params()).train)
