"""Resume after SIGTERM and after kill -9 gives the uninterrupted run's result, byte for byte: its weights,
config and metrics rows (the angular update rate of the interval a checkpoint fell in included), and its
summary but for the steps it resumed from (real processes, real signals).

Also: a damaged, foreign or older checkpoint is refused with an error naming the file, and left as it was.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support.train import (
    cli_env,
    make_params,
    metrics,
    results_dir,
    run_dir,
    run_name,
    run_train,
    summary,
    train_command,
    write_params,
    write_shards,
)

from ngptlab.errors import CheckpointError
from ngptlab.grid.enumeration import find_run
from ngptlab.settings import Params
from ngptlab.train.loop import EXIT_RESUMABLE, train_run

BUDGET = 48 * 512  # 48 steps of 512 tokens: long enough to interrupt mid-run, seconds on one CPU thread
NAME = run_name("gpt", BUDGET)
PARAMS = {"budgets": [BUDGET], "checkpoint_every_tokens": 4096, "eval_every_tokens": 8192}


def fresh_root(base: Path, name: str) -> Path:
    root = base / name
    write_shards(root)
    write_params(root, make_params(**PARAMS))
    return root


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    root = fresh_root(tmp_path_factory.mktemp("resume"), "reference")
    result = run_train(root, NAME)
    assert result.returncode == 0, result.stderr
    return root


def start_and_wait(root: Path, until) -> subprocess.Popen:
    """Start training in a subprocess; return once `until(state_dir)` holds (the run still going)."""
    proc = subprocess.Popen(train_command(root, NAME), env=cli_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    state_dir = run_dir(root, NAME) / "state"
    deadline = time.monotonic() + 120
    while not until(state_dir):
        assert proc.poll() is None, f"training ended before the signal: {proc.communicate()[1]}"
        assert time.monotonic() < deadline
        time.sleep(0.002)
    return proc


def rows_logged(state_dir: Path) -> int:
    path = state_dir / "metrics.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


def checkpoint_step(state_dir: Path) -> int:
    try:
        return json.loads((state_dir / "latest.json").read_text())["step"]
    except (FileNotFoundError, json.JSONDecodeError):
        return -1


def same_bytes(root: Path, reference: Path, resumed_from: list[int]) -> None:
    """The resumed run's weights, config and whole metrics log are the uninterrupted run's bytes, and so is
    its summary but for the steps it resumed from."""
    for path in (run_dir(Path(), NAME) / "model.safetensors", run_dir(Path(), NAME) / "config.json",
                 results_dir(Path(), NAME) / "metrics.jsonl"):
        assert (root / path).read_bytes() == (reference / path).read_bytes(), f"{path} differs"
    resumed, uninterrupted = summary(root, NAME), summary(reference, NAME)
    assert resumed["resumed_from"] == resumed_from and uninterrupted["resumed_from"] == []
    assert {**resumed, "resumed_from": []} == uninterrupted


def interval_steps(root: Path) -> dict[int, int]:
    """angular_steps of every evaluation row, by step: how long each measured interval was."""
    return {row["step"]: row["angular_steps"] for row in metrics(root, NAME) if "angular_steps" in row}


def test_sigterm_checkpoints_exits_resumable_and_the_rerun_matches(reference, tmp_path):
    root = fresh_root(tmp_path, "sigterm")
    proc = start_and_wait(root, lambda d: rows_logged(d) >= 12)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_RESUMABLE == 75, stderr
    assert "interrupted at step" in stderr
    state_dir = run_dir(root, NAME) / "state"
    stopped_at = checkpoint_step(state_dir)
    assert 12 <= stopped_at < 48
    assert not (results_dir(root, NAME) / "summary.json").exists()  # nothing final yet

    result = run_train(root, NAME)
    assert result.returncode == 0, result.stderr
    assert summary(root, NAME)["status"] == "completed"
    same_bytes(root, reference, [stopped_at])
    assert interval_steps(root) == {16: 16, 32: 16, 48: 16}  # whichever step the checkpoint fell on


def test_kill_9_resumes_from_the_last_checkpoint_and_matches(reference, tmp_path):
    root = fresh_root(tmp_path, "kill9")
    # Kill once a checkpoint between two evaluation points (every 16 steps) exists and rows were logged after
    # it: those rows must be dropped and redone, and the interval measured from the point before it.
    between = (8, 24)
    proc = start_and_wait(root, lambda d: (at := checkpoint_step(d)) in between and at < rows_logged(d) - 2)
    proc.kill()
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    state_dir = run_dir(root, NAME) / "state"
    resumed_at = checkpoint_step(state_dir)

    result = run_train(root, NAME)
    assert result.returncode == 0, result.stderr
    assert resumed_at in between  # a checkpoint every 4096 tokens (8 steps)
    same_bytes(root, reference, [resumed_at])


def test_damaged_or_foreign_checkpoints_are_refused_and_left_alone(tmp_path):
    root = fresh_root(tmp_path, "damaged")
    proc = start_and_wait(root, lambda d: checkpoint_step(d) >= 8)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == EXIT_RESUMABLE
    state_dir = run_dir(root, NAME) / "state"
    snapshot = {p: p.read_bytes() for p in state_dir.rglob("*") if p.is_file()}

    def attempt(params: dict, arm: str = "gpt", lr: float = 3e-3) -> None:
        spec = find_run(Params.of(params), run_name(arm, BUDGET, lr))
        train_run(spec, Params.of(params).train, root=root, progress=False)

    # Other trajectory settings (grad_clip): refused, naming the state file and the differing key.
    with pytest.raises(CheckpointError, match=r"state\.json: checkpoint belongs to a run with different "
                                              r"settings \(train\.grad_clip differs"):
        attempt(make_params(**PARAMS, grad_clip=0.5))

    # Another arm's checkpoint in this run's place.
    ngpt_state = run_dir(root, run_name("ngpt", BUDGET)) / "state"
    shutil.copytree(state_dir, ngpt_state)
    (ngpt_state / ".lock").unlink()
    with pytest.raises(CheckpointError, match=r'different settings \(arm differs: "gpt" on disk, "ngpt" now'):
        attempt(make_params(**PARAMS), arm="ngpt")

    # A checkpoint of an older version, without the start of the angular interval its step falls in.
    ckpt = state_dir / json.loads((state_dir / "latest.json").read_text())["checkpoint"]
    interval = (ckpt / "interval.safetensors").read_bytes()
    (ckpt / "interval.safetensors").unlink()
    with pytest.raises(CheckpointError, match=rf"{ckpt.name}: no interval\.safetensors, where the angular "
                                              r"update rate's interval starts \(a checkpoint of an older"):
        attempt(make_params(**PARAMS))
    (ckpt / "interval.safetensors").write_bytes(interval)

    # Flipped bytes in the optimizer moments.
    optimizer_file = ckpt / "optimizer.safetensors"
    data = bytearray(optimizer_file.read_bytes())
    data[-3] ^= 0x10
    optimizer_file.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"optimizer\.safetensors: tensor data is corrupt"):
        attempt(make_params(**PARAMS))
    snapshot[optimizer_file] = bytes(data)

    # Truncated weights.
    model_file = ckpt / "model.safetensors"
    model_file.write_bytes(model_file.read_bytes()[:-100])
    with pytest.raises(CheckpointError, match=r"model\.safetensors: not a readable safetensors file"):
        attempt(make_params(**PARAMS))
    snapshot[model_file] = model_file.read_bytes()

    assert {p: p.read_bytes() for p in state_dir.rglob("*") if p.is_file()} == snapshot  # nothing overwritten
    assert not (root / "results").exists()
