"""`ngptlab plan --match-angles` through the real command: the angle arms' targets are read off the chosen
runs of the arms they are matched to, at the schedule's peak, and written into params.yaml, where the
trainer's targets (train/angle_targets.py) and the grid's lineage keys see them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_lr_policy_drift import CELL, params_file, write_result

from ngptlab.cli import main
from ngptlab.config.load import load_params
from ngptlab.design.loss_model import loss_model
from ngptlab.design.truths import Truth
from ngptlab.design.world import World
from ngptlab.grid.enumeration import compared_runs
from ngptlab.models.scales import Scale
from ngptlab.plan.protocol import projected_params
from ngptlab.plan.sweeps import on_disk
from ngptlab.results import train_dir
from ngptlab.speedup.lr_policy import cell_policy
from ngptlab.train import angle_targets

ARMS = ["gpt", "ngpt", "gpt-angle", "ngpt-angle"]
KINDS = ("embed_in", "embed_out", "q", "k", "v", "o", "mlp_u", "mlp_v", "mlp_o")
PLANTED = {"gpt": 0.004, "ngpt": 0.02}  # the angle per step at the peak, every kind (q: x2)
# each metrics row's learning rate as a fraction of the peak: rows below half the peak (warmup, the end of
# the decay) are planted at 5x the angle, so a target that read them would come out wrong
FACTORS = (0.1, 0.3, 1.0, 0.8, 0.2)


def planted_angle(arm: str, kind: str) -> float:
    return PLANTED[arm] * (2 if kind == "q" else 1)


def with_step_angles(root: Path, spec) -> None:
    """The run's metrics rows given a learning rate and the planted step angles (observe/step_angle.py)."""
    path = train_dir(root, spec) / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row, factor in zip(rows, FACTORS * len(rows), strict=False):
        shrunk = 1 if factor >= 0.5 else 5
        row.update(lr=spec.lr * factor, step_angle={k: planted_angle(spec.arm, k) * factor * shrunk
                                                     for k in KINDS})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_match_angles_writes_the_matched_runs_peak_angles(tmp_path):
    path = params_file(tmp_path, "crossing", arms=ARMS)
    params = load_params(path)
    world = World(loss_model(params), Truth("account true", 4.0), params.train.eval_every_tokens,
                  np.random.default_rng(0))
    matched = [spec for spec in compared_runs(params) if spec.arm in ("gpt", "ngpt")]
    for spec in matched:
        write_result(tmp_path, world.result_of(spec))
        with_step_angles(tmp_path, spec)
    grid = tmp_path / "grid.json"
    assert main(["plan", "--params", str(path), "--root", str(tmp_path), "--write", str(grid)]) == 0
    before = json.loads(grid.read_text())["lineage"]["train"]

    assert main(["plan", "--params", str(path), "--root", str(tmp_path), "--match-angles",
                 "--write", str(grid)]) == 0
    written = yaml.safe_load(path.read_text())["train"]["angles"][CELL]
    policy = cell_policy(params, on_disk(tmp_path), "cpu-4l", 64)
    for arm, like in (("gpt-angle", "ngpt"), ("ngpt-angle", "gpt")):
        largest = max(policy.of_arm(like))
        assert written[arm]["lr"] == policy.of_arm(like)[largest]  # the chosen run at its largest budget
        assert written[arm]["run"].startswith(f"{CELL}-{like}-t{largest}-")
        assert written[arm]["kinds"] == pytest.approx({k: planted_angle(like, k) for k in KINDS})
    # the trainer's target at a learning rate twice the measured run's: twice the angle
    train = load_params(path).train
    spec = next(s for s in compared_runs(load_params(path)) if s.arm == "gpt-angle")
    spec = dataclasses.replace(spec, lr=2 * written["gpt-angle"]["lr"])
    angles, source = angle_targets.targets(train, spec, Scale(4, 64, 4), "ngpt", ("q", "k"))
    assert source == written["gpt-angle"]["run"] and angles == pytest.approx({"q": 0.08, "k": 0.04})
    # a measurement is a params value: it changes the angle arms' train keys, and no other arm's
    after = json.loads(grid.read_text())["lineage"]["train"]
    assert {group for group in after if after[group] != before[group]} == {
        "cosine-gpt-angle", "wsd-gpt-angle", "cosine-ngpt-angle", "wsd-ngpt-angle"}


def test_with_the_protocol_step_the_angle_arms_wait_for_their_measured_targets(tmp_path):
    """train.protocol.match_angles: the angle arms are not in the grid until `--match-angles` has written
    their targets (so they never train at the prior); the projection prices them; then they join, and
    no other run's lineage key moves."""
    path = params_file(tmp_path, "crossing", arms=ARMS)
    params = yaml.safe_load(path.read_text())
    params["train"]["protocol"] = {"match_angles": True}
    path.write_text(yaml.safe_dump(params))
    waiting = load_params(path)
    assert {s.arm for s in compared_runs(waiting)} == {"gpt", "ngpt"}
    projected = projected_params(waiting)
    assert {s.arm for s in compared_runs(projected)} == set(ARMS)
    world = World(loss_model(waiting), Truth("account true", 4.0), waiting.train.eval_every_tokens,
                  np.random.default_rng(0))
    for spec in compared_runs(waiting):
        write_result(tmp_path, world.result_of(spec))
        with_step_angles(tmp_path, spec)
    grid = tmp_path / "grid.json"
    assert main(["plan", "--params", str(path), "--root", str(tmp_path), "--write", str(grid)]) == 0
    before = json.loads(grid.read_text())
    assert main(["plan", "--params", str(path), "--root", str(tmp_path), "--match-angles",
                 "--write", str(grid)]) == 0
    after = json.loads(grid.read_text())
    joined = {name for name in after["runs"] if name not in before["runs"]}
    assert joined == {s.name for s in compared_runs(projected) if s.arm in ("gpt-angle", "ngpt-angle")}
    shared = [g for g in before["lineage"]["train"] if not g.endswith("-angle")]  # gpt's, ngpt's
    assert shared and all(before["lineage"]["train"][g] == after["lineage"]["train"][g] for g in shared)
