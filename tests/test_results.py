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
