"""A run's curves as TensorBoard event files (ngptlab/tensorboard_view.py): the same numbers as its metrics
log, its final evaluation as its summary has it, the loss curves again by tokens, no byte of its outputs
changed, each step once after a resume, and a run that trains on when they cannot be written."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import numpy as np
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
    timing_file,
    train_command,
    write_params,
    write_shards,
)
from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

from ngptlab.grid.enumeration import find_run
from ngptlab.settings import Params
from ngptlab.tensorboard_view import BY_TOKENS, scalars
from ngptlab.train.loop import train_run

NAME = run_name("gpt", 8192)


def train(root: Path, params: dict) -> int:
    return train_run(find_run(Params.of(params), NAME), Params.of(params).train, root=root, progress=False,
                     condition=Params.of(params).condition)


def trained(base: Path, **train_overrides) -> Path:
    root = base / ("with" if train_overrides.get("tensorboard", True) else "without")
    write_shards(root)
    assert train(root, make_params(**train_overrides)) == 0
    return root


def curves(directory: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar tag's (step, value) points as the event files hold them, duplicates included."""
    events = EventAccumulator(str(directory), size_guidance={SCALARS: 0}, purge_orphaned_data=False)
    events.Reload()
    return {tag: [(event.step, event.value) for event in events.Scalars(tag)]
            for tag in events.Tags()["scalars"]}


def points(rows: list[dict]) -> dict[str, list[tuple[int, float]]]:
    """The rows' curves as TensorBoard stores them (float32 values), those of BY_TOKENS also at their tokens
    under by_tokens/."""
    found: dict[str, list[tuple[int, float]]] = {}
    for row in rows:
        for tag, value in scalars(row).items():
            found.setdefault(tag, []).append((row["step"], float(np.float32(value))))
            if tag in BY_TOKENS:
                found.setdefault(f"by_tokens/{tag}", []).append((row["tokens"], float(np.float32(value))))
    return found


def final_points(record: dict) -> dict[str, list[tuple[int, float]]]:
    """A completed run's final evaluation as its summary has it: at its last step, and at its tokens."""
    loss, se = (float(np.float32(record[key])) for key in ("final_val_loss", "final_val_loss_se"))
    return {"final_val_loss": [(record["steps"], loss)], "final_val_loss_se": [(record["steps"], se)],
            "by_tokens/final_val_loss": [(record["tokens"], loss)]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same run with event files and without."""
    base = tmp_path_factory.mktemp("tensorboard")
    return trained(base), trained(base, tensorboard=False)


def test_the_event_files_hold_the_numbers_of_the_metrics_rows(runs):
    root, _ = runs
    rows = metrics(root, NAME)
    # the measured tokens_per_s (and mfu, on a GPU) of the same rows are in the timing file
    timed = json.loads(timing_file(root, NAME).read_text())["rows"]
    expected = points([{**row, **time_row} for row, time_row in zip(rows, timed, strict=True)])
    assert {"train_loss", "lr", "grad_norm", "val_loss", "tokens", "tokens_per_s"} <= set(expected)
    # an evaluation point's observations of the weights (observe/observer.py), one tag per name
    assert {"angular_rate/q", "angular_rate/embed_in", "relative_change/mlp_o", "angular_steps",
            "kappa/embed_in_cov_condition", "kappa/layer4_k_head_condition_median"} <= set(expected)
    # the final evaluation (the whole val split, the summary's final_val_loss), and the curves by tokens
    record = summary(root, NAME)
    assert record["status"] == "completed" and record["tokens"] == rows[-1]["tokens"]
    expected |= final_points(record)
    assert {"by_tokens/train_loss", "by_tokens/val_loss", "by_tokens/lr"} <= set(expected)
    assert expected["by_tokens/val_loss"][-1][0] == record["tokens"] == 8192
    assert curves(run_dir(root, NAME) / "tensorboard") == expected


def test_the_event_files_change_no_byte_of_the_outputs(runs):
    watched, unwatched = runs
    assert not (run_dir(unwatched, NAME) / "tensorboard").exists()
    for path in (run_dir(watched, NAME) / "model.safetensors", run_dir(watched, NAME) / "config.json",
                 results_dir(watched, NAME) / "metrics.jsonl", results_dir(watched, NAME) / "summary.json"):
        twin = unwatched / path.relative_to(watched)
        assert path.read_bytes() == twin.read_bytes(), path.name


def test_a_resumed_run_holds_each_step_once(tmp_path):
    """Killed after rows its checkpoint does not keep reached the event files: the rerun writes them once."""
    root = tmp_path / "resume"
    write_shards(root)
    # 48 steps of 512 tokens, an evaluation (and so a flush of the events) every 2 steps, a checkpoint every 8
    write_params(root, make_params(budgets=[48 * 512], eval_every_tokens=1024, checkpoint_every_tokens=4096))
    name = run_name("gpt", 48 * 512)
    state_dir, events_dir = run_dir(root, name) / "state", run_dir(root, name) / "tensorboard"

    def checkpoint_step() -> int:
        try:
            return json.loads((state_dir / "latest.json").read_text())["step"]
        except (FileNotFoundError, json.JSONDecodeError):
            return -1

    def rows_logged() -> int:
        path = state_dir / "metrics.jsonl"
        return len(path.read_text().splitlines()) if path.exists() else 0

    proc = subprocess.Popen(train_command(root, name), env=cli_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    # the events flushed at the evaluation 2 steps after the checkpoint once row 4 after it is logged
    while not 8 <= checkpoint_step() < rows_logged() - 4:
        assert proc.poll() is None, f"training ended before the kill: {proc.communicate()[1]}"
        assert time.monotonic() < deadline
        time.sleep(0.002)
    proc.kill()
    proc.communicate(timeout=60)
    resumed_at = checkpoint_step()
    assert max(step for step, _ in curves(events_dir)["train_loss"]) > resumed_at  # rows to be written again

    result = run_train(root, name)
    assert result.returncode == 0, result.stderr
    assert json.loads((results_dir(root, name) / "summary.json").read_text())["resumed_from"] == [resumed_at]
    found = curves(events_dir)
    assert [step for step, _ in found["train_loss"]] == list(range(1, 49))
    assert {tag: points_ for tag, points_ in found.items() if tag not in ("tokens_per_s", "mfu")} == \
        points(metrics(root, name)) | final_points(summary(root, name))


def test_event_files_that_cannot_be_written_never_fail_a_run(tmp_path, capsys):
    root = tmp_path / "unwritable"
    write_shards(root)
    blocked = run_dir(root, NAME) / "tensorboard"
    blocked.parent.mkdir(parents=True)
    blocked.write_text("not a directory")
    assert train(root, make_params()) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if "TensorBoard" in line]
    assert len(said) == 1 and "training goes on" in said[0]
    assert len(metrics(root, NAME)) == 16 and blocked.read_text() == "not a directory"
