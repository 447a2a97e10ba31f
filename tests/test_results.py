"""Shared results I/O (ngptlab.results): the train summary reader refuses what would silently change a
speed-up."""

from __future__ import annotations

import json

import pytest

from ngptlab.errors import ResultsError
from ngptlab.grid.runs import RunSpec
from ngptlab.results import read_run_result, read_summary, train_dir

SPEC = RunSpec("cpu-4l", 64, "gpt", 8192, 3e-3, 0)


def write_summary(root, **fields) -> str:
    path = train_dir(root, SPEC) / "summary.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"run": SPEC.name, **fields}))
    (path.parent / "metrics.jsonl").write_text(json.dumps({"tokens": 8192, "val_loss": 5.0}) + "\n")
    return str(path)


def test_a_completed_run_without_a_final_loss_is_refused_naming_the_file(tmp_path):
    path = write_summary(tmp_path, status="completed", final_val_loss=None)
    with pytest.raises(ResultsError, match="status is 'completed' but final_val_loss is null") as err:
        read_run_result(tmp_path, SPEC)
    assert str(err.value).startswith(path)


def test_a_diverged_run_may_have_no_final_loss(tmp_path):
    write_summary(tmp_path, status="diverged", final_val_loss=None)
    result = read_run_result(tmp_path, SPEC)
    assert result.status == "diverged" and not result.usable


def test_a_completed_run_with_its_loss_is_read(tmp_path):
    write_summary(tmp_path, status="completed", final_val_loss=4.5)
    assert read_summary(tmp_path, SPEC)["final_val_loss"] == 4.5
    assert read_run_result(tmp_path, SPEC).usable


def test_one_pass_gives_the_curve_and_the_observations_old_runs_none(tmp_path):
    path = write_summary(tmp_path, status="completed", final_val_loss=4.5)
    rows = [{"tokens": 4096, "val_loss": 5.5, "angular_rate": {"q": 0.02, "k": None}},
            {"tokens": 2048, "val_loss": 6.0, "angular_rate": {"q": 0.03},
             "kappa": {"embed_in_cov_condition": "inf"}},
            {"tokens": 6144, "train_loss": 5.0}]
    (train_dir(tmp_path, SPEC) / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = read_run_result(tmp_path, SPEC)
    assert result.curve == [(2048.0, 6.0), (4096.0, 5.5)]
    assert result.observed["angular_rate"] == [(2048.0, {"q": 0.03}), (4096.0, {"q": 0.02})]
    assert result.observed["kappa"] == [(2048.0, {"embed_in_cov_condition": float("inf")})]
    assert result.observed["relative_change"] == []
    assert read_run_result(tmp_path, SPEC, with_curve=False).observed == {}
    assert path
