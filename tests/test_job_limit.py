"""A job's own clock (ngptlab/jobclock.py, train/job_limit.py) and the time limits of the plan
(plan/runtime.py): a run longer than train.max_job_minutes trains over several jobs, each stopping before its
limit with a checkpoint and exit 75, and ends with the bytes of a run that went through in one (weights and
metrics log).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from support.train import (
    REPO,
    cli_env,
    make_params,
    results_dir,
    run_dir,
    run_name,
    train_command,
    write_params,
    write_shards,
)

from ngptlab.cli import main
from ngptlab.config.load import load_params
from ngptlab.grid.enumeration import find_run
from ngptlab.jobclock import EXIT_RESUMABLE, STARTED_ENV, JobClock, job_clock
from ngptlab.plan.runtime import JobTime, job_time, kill_wait_warning, retries, signal_lead_s
from ngptlab.settings import of_section
from ngptlab.train.loop import train_run

BUDGET = 64 * 512  # 64 steps of 512 tokens
NAME = run_name("gpt", BUDGET)


def test_the_clock_stops_work_that_would_overrun_the_deadline(monkeypatch):
    now = time.time()
    assert not JobClock(None).must_stop(1e9)
    assert JobClock(now + 100).must_stop(101) and not JobClock(now + 100).must_stop(90)
    assert JobClock(now + 100, margin_s=20).must_stop(90)  # the margin is the job's, not the work's
    monkeypatch.setenv(STARTED_ENV, str(now - 50))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    clock = job_clock(1.0)  # 60 s from a start 50 s ago: 10 s left, less a margin of 3 s
    assert clock.deadline == pytest.approx(now + 10)
    assert clock.remaining_s() == pytest.approx(7, abs=0.5)
    assert job_clock(None).deadline is None


def test_jobs_split_a_long_estimate_into_the_partition_limit():
    assert job_time(30, None) == JobTime(30, 30, 1)
    assert job_time(3, None).limit_min == 10  # the shortest limit a job gets
    assert job_time(300, 1440) == JobTime(300, 300, 1)
    # 3600 min over 24 h jobs: each loses 3 min of startup, 2 min of margin and a 1-minute checkpoint
    long = job_time(3600, 1440, checkpoint_min=1.0)
    assert (long.limit_min, long.jobs) == (1440, 3)
    assert job_time(2 * 1434, 1440, checkpoint_min=1.0).jobs == 2  # exactly two jobs' usable time
    assert job_time(2 * 1434 + 1, 1440, checkpoint_min=1.0).jobs == 3
    assert job_time(5, 0.2).limit_min == 1  # Slurm asks whole minutes
    with pytest.raises(ValueError, match="leaves no time to train"):
        job_time(600, 30, checkpoint_min=25)
    assert retries([1, 3]) == 3  # two more jobs, and one for a failure


def test_the_signal_lead_covers_twice_the_checkpoint_write():
    train = of_section("train", {**make_params()["train"], "checkpoint_write_gbps": 0.5})
    assert signal_lead_s(train, 10_000_000) == 120  # 0.12 GB: the two-minute floor
    assert signal_lead_s(train, 5_000_000_000) == 2 * 120 + 60  # 60 GB at 0.5 GB/s: 120 s, twice, +60
    assert signal_lead_s(train, 5_000_000_000, limit_min=4) == 120  # at most half the job
    assert signal_lead_s(train, 5_000_000_000, limit_min=2) == 0  # Slurm may signal a minute early
    assert signal_lead_s(replace(train, signal_lead_s=900), 1) == 900


def test_the_plan_warns_where_the_checkpoint_write_outlasts_the_stated_kill_wait(tmp_path, capsys):
    train = of_section("train", make_params()["train"])
    assert train.kill_wait_s is None and kill_wait_warning(train, "1B", 26.0) is None  # nothing stated
    assert kill_wait_warning(replace(train, kill_wait_s=30), "1B", 26.0) is None
    warning = kill_wait_warning(replace(train, kill_wait_s=20), "1B", 25.8)
    assert warning.startswith("warning: checkpoint 1B: the write (~26 s) outlasts train.kill_wait_s = 20 s")
    assert "KillWait (plus the partition's GraceTime) of at least 26 s" in warning
    # the paper preset's 1B resume state (12.9 GB at 0.5 GB/s: ~26 s) against a stated KillWait of 20 s
    preset = yaml.safe_load((REPO / "workflow" / "presets" / "paper.yaml").read_text())
    preset["train"]["kill_wait_s"] = 20
    (tmp_path / "paper.yaml").write_text(yaml.safe_dump(preset))
    assert main(["plan", "--params", str(tmp_path / "paper.yaml"), "--root", str(REPO)]) == 0
    warned = [line for line in capsys.readouterr().out.splitlines() if "outlasts train.kill_wait_s" in line]
    assert [line.split(":")[1] for line in warned] == [" checkpoint 1B"]
    preset["train"]["kill_wait_s"] = 0
    (tmp_path / "paper.yaml").write_text(yaml.safe_dump(preset))
    assert main(["plan", "--params", str(tmp_path / "paper.yaml"), "--root", str(REPO)]) != 0
    assert "train.kill_wait_s: 0 must be >= 1" in capsys.readouterr().err


def run_root(base, name, **train):
    root = base / name
    write_shards(root)
    params = make_params(budgets=[BUDGET], checkpoint_every_tokens=BUDGET, eval_every_tokens=8192, **train)
    return root, load_params(write_params(root, params))


def test_a_run_over_several_jobs_ends_with_the_bytes_of_one_that_ran_through(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    whole, params = run_root(tmp_path, "whole")
    assert train_run(find_run(params, NAME), params.train, root=whole, progress=False) == 0

    split, params = run_root(tmp_path, "split", max_job_minutes=1.0)
    spec, jobs, stops = find_run(params, NAME), 0, []
    while True:
        # Each job starts with 0.6 s of its minute left (after the 3 s margin): some steps, then a stop.
        monkeypatch.setenv(STARTED_ENV, str(time.time() - 60 + 3 + 0.6))
        jobs += 1
        code = train_run(spec, params.train, root=split, progress=False)
        if code == 0:
            break
        assert code == EXIT_RESUMABLE
        stops.append(json.loads((run_dir(split, NAME) / "state" / "latest.json").read_text())["step"])
        assert jobs <= 64, "the run makes no progress from one job to the next"
    assert jobs >= 2 and stops == sorted(set(stops)) and stops[-1] <= 64  # each job moved the run on
    summary = json.loads(next(split.glob("results/train/*/*/summary.json")).read_text())
    assert summary["resumed_from"] == stops
    for path in (run_dir(Path(), NAME) / "model.safetensors", results_dir(Path(), NAME) / "metrics.jsonl"):
        # every row too: each job's first evaluation measures from the point before it, as its checkpoint kept
        assert (split / path).read_bytes() == (whole / path).read_bytes(), path


def test_the_plan_prints_jobs_per_run_and_every_stage_limit(tmp_path):
    root, _ = run_root(tmp_path, "plan", max_job_minutes=0.2)
    out = subprocess.run([sys.executable, "-m", "ngptlab.cli", "plan", "--params", "params.yaml", "--json"],
                         cwd=root, capture_output=True, text=True, check=True).stdout
    plan = json.loads(out)
    for run in plan["runs"]:  # the grid's 10-minute estimate over 12-second jobs
        assert run["time_limit_min"] == 1 and run["jobs"] > 1
    assert set(plan["stages"]) == {"prepare", "condition", "speedup", "evaluate", "report"}
    assert all(entry["limit_min"] <= 1 for entry in plan["stages"]["evaluate"].values())
    text = subprocess.run([sys.executable, "-m", "ngptlab.cli", "plan", "--params", "params.yaml"], cwd=root,
                          capture_output=True, text=True, check=True).stdout
    assert "no job asks for more than train.max_job_minutes = 0.2 min" in text
    assert "stage limits (min): prepare 1" in text and "no early signal: jobs under 3 min" in text


def test_torchrun_does_not_restart_a_run_its_clock_stopped(tmp_path):
    """With train.max_restarts, torchrun restarts workers that exit non-zero; a stop by the job's clock asks
    the agent to shut down instead, so the job ends (exit non-zero, for the workflow's next attempt) with
    the checkpoint, rather than restarting in a job whose time is up."""
    long_budget = 16 * BUDGET  # far more steps than the job's seconds can hold, however fast the machine
    root = tmp_path / "ddp"
    write_shards(root)
    write_params(root, make_params(budgets=[long_budget], checkpoint_every_tokens=long_budget,
                                   eval_every_tokens=8192, max_job_minutes=1.0, max_restarts=2))
    name = run_name("gpt", long_budget)
    command = train_command(root, name, nproc=2)
    command[command.index("--nproc_per_node"):command.index("--nproc_per_node")] = ["--max-restarts", "2"]
    env = {**cli_env(), STARTED_ENV: str(time.time() - 60 + 3 + 6.0)}  # 6 s: start-up, then some steps
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0, proc.stderr[-3000:]
    assert proc.stderr.count("interrupted at step") == 1, proc.stderr[-3000:]
    assert "Restarting workers" not in proc.stderr
    stopped = json.loads((run_dir(root, name) / "state" / "latest.json").read_text())["step"]
    assert 0 < stopped < long_budget // 512
