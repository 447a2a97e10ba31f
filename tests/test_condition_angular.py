"""The angular update rate and the condition numbers over training (observe/angular.py, observer.py):
planted matrices, rescaled weights, and tiny training runs against the condition stage and a run without them.
"""

from __future__ import annotations

import contextlib
import json
import math

import numpy as np
import pytest
import torch
from support.code import made_up_code
from support.train import (
    StopsAfter3Steps,
    make_params,
    metrics,
    results_dir,
    run_dir,
    run_name,
    write_shards,
)

from ngptlab.checkpoint import load_model
from ngptlab.condition.run import condition_run
from ngptlab.grid.enumeration import enumerate_runs, find_run
from ngptlab.grid.trunks import enumerate_segments
from ngptlab.models.registry import build, build_seeded
from ngptlab.models.scales import Scale
from ngptlab.observe.angular import AngularRate, IntervalStart, kind_means, turn
from ngptlab.observe.effective import effective_matrices
from ngptlab.observe.observer import KAPPA_KEYS, Observer, restart_points
from ngptlab.plan.grid import lineage_keys
from ngptlab.plan.lineage import made_from
from ngptlab.settings import Params
from ngptlab.tensorboard_view import scalars
from ngptlab.train import loop
from ngptlab.train.identity import mismatch
from ngptlab.train.jobs import make_job
from ngptlab.train.loop import train_run

torch.set_num_threads(1)
NEW_FIELDS = ("angular_rate", "relative_change", "angular_steps", "step_angle", "step_angle_steps", "kappa")


# ----------------------------------------------------------------------------------------------------------
# Planted matrices


def rotated(w: torch.Tensor, theta: float, seed: int = 1) -> torch.Tensor:
    """w turned by theta in the plane of w and a random direction Frobenius-orthogonal to it, same norm."""
    u = w / torch.linalg.vector_norm(w)
    r = torch.randn(w.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    v = r - (r * u).sum() * u
    v = v / torch.linalg.vector_norm(v)
    return torch.linalg.vector_norm(w) * (math.cos(theta) * u + math.sin(theta) * v)


@pytest.mark.parametrize("theta", [1e-4, 0.3, 2.5])
def test_a_known_rotation_gives_its_angle_and_a_rescaling_leaves_it(theta):
    w = torch.randn(12, 7, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    now = rotated(w, theta)
    for scale in (1.0, 3.0, 0.25):
        angle, change = turn(w, scale * now).tolist()
        assert angle == pytest.approx(theta, rel=1e-9)
        # independent: numpy's Frobenius norm of the difference
        a, b = w.numpy(), scale * now.numpy()
        assert change == pytest.approx(np.linalg.norm(b - a) / np.linalg.norm(a), rel=1e-12)


def test_a_pure_rescaling_turns_nothing():
    w = torch.randn(9, 5, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    angle, change = turn(w, 1.7 * w).tolist()
    assert abs(angle) < 1e-14  # float64 round-off
    assert change == pytest.approx(0.7, rel=1e-12)


def test_kinds_average_the_layers_means_and_non_finite_is_none():
    values = [("q", 0, 1.0), ("q", 1, 3.0), ("q", 1, 5.0), ("embed_in", None, 2.0), ("o", 0, math.nan)]
    assert kind_means(values) == {"q": (1.0 + 4.0) / 2, "embed_in": 2.0, "o": None}


@pytest.mark.parametrize("arm", ["ngpt", "gpt-orth"])
def test_rescaled_raw_weights_of_normalised_arms_give_angle_zero(arm):
    """Every effective matrix of nGPT (unit-norm rows or columns, restored each step) and gpt-orth (s Q) is
    linear in its raw weight: scaling every raw matrix by c turns none of them; the relative change is
    |c - 1| / steps. gpt-orth's Q scaled by c and s by 1 / c leaves the effective matrix as it was: 0, 0."""
    torch.manual_seed(0)
    model, _ = build(arm, Scale(n_layer=2, d_model=16, n_head=2), 32, 8)
    rate = AngularRate(effective_matrices(model), step=0)
    matrices = [info.name for info in model.matrices()]
    with torch.no_grad():
        for name in matrices:
            model.get_submodule(name).weight.mul_(1.5)
    for info in effective_matrices(model):
        rate.add(info)
    row = rate.close(step=5)
    assert row["angular_steps"] == 5
    assert set(row["angular_rate"]) == {"embed_in", "q", "k", "v", "o", "mlp_u", "mlp_v", "mlp_o",
                                        "embed_out"}
    # the floor: the previous point's float32 copy rounds each entry by up to 6e-8 relative
    assert all(abs(v) < 1e-7 for v in row["angular_rate"].values()), row["angular_rate"]
    assert row["relative_change"] == pytest.approx({k: 0.5 / 5 for k in row["relative_change"]}, rel=1e-6)
    if arm == "gpt-orth":
        with torch.no_grad():
            for name in matrices:
                module = model.get_submodule(name)
                if hasattr(module, "scalar"):
                    module.weight.mul_(2.0)
                    module.scalar.div_(2.0)
        for info in effective_matrices(model):
            rate.add(info)
        row = rate.close(step=6)
        changed = {"embed_in", "embed_out"}  # the baseline's embeddings: no scalar to compensate
        assert all(abs(row["relative_change"][k]) < 1e-7 for k in row["relative_change"] if k not in changed)
        assert all(abs(v) < 1e-7 for v in row["angular_rate"].values())


# ----------------------------------------------------------------------------------------------------------
# Training runs


class Unobserved:
    """The loop's observer with nothing observed: a run as it trained before the observations existed."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def observe(self, *args, **kwargs) -> dict:
        return {}

    def passed(self, *args, **kwargs) -> None:
        pass

    def interval_start(self, step: int) -> IntervalStart:
        return IntervalStart(step)

    def stepping(self, step: int) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """gpt at 8192 tokens (4 evaluation points, kappa at the 3rd and the last) with and without the
    observations, and ngpt at 2048 tokens (one evaluation point, its last)."""
    base = tmp_path_factory.mktemp("angular")
    params = make_params(budgets=[8192, 2048], condition_every_evals=3)
    observed, unobserved = base / "observed", base / "unobserved"
    for root in (observed, unobserved):
        write_shards(root)
    train = Params.of(params).train
    for arm, budget in (("gpt", 8192), ("ngpt", 2048)):
        spec = find_run(Params.of(params), run_name(arm, budget))
        assert train_run(spec, train, root=observed, progress=False,
                         condition=Params.of(params).condition) == 0
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(loop, "Observer", Unobserved)
        assert train_run(find_run(Params.of(params), run_name("gpt", 8192)), train, root=unobserved,
                         progress=False, condition=Params.of(params).condition) == 0
    return observed, unobserved, params


def test_the_observations_change_no_training_byte(runs):
    observed, unobserved, _ = runs
    name = run_name("gpt", 8192)
    assert (run_dir(observed, name) / "model.safetensors").read_bytes() == \
        (run_dir(unobserved, name) / "model.safetensors").read_bytes()
    with_rows, without_rows = metrics(observed, name), metrics(unobserved, name)
    assert [{k: v for k, v in row.items() if k not in NEW_FIELDS} for row in with_rows] == without_rows
    assert not any(field in row for row in without_rows for field in NEW_FIELDS)


def test_every_evaluation_point_has_the_rates_and_kappa_comes_at_every_kth_and_the_last(runs):
    observed, _, _ = runs
    evaluations = [row for row in metrics(observed, run_name("gpt", 8192)) if "val_loss" in row]
    assert [row["step"] for row in evaluations] == [4, 8, 12, 16]
    assert [row["angular_steps"] for row in evaluations] == [4, 4, 4, 4]
    for row in evaluations:
        assert all(0 < v < math.pi / 4 for v in row["angular_rate"].values())
        assert all(v > 0 for v in row["relative_change"].values())
    assert ["kappa" in row for row in evaluations] == [False, False, True, True]
    assert set(evaluations[-1]["kappa"]) == set(KAPPA_KEYS)


def test_kappa_over_training_is_the_condition_stage_on_the_checkpoint_of_that_step(runs):
    observed, _, params = runs
    for arm, budget in (("gpt", 8192), ("ngpt", 2048)):
        spec = find_run(Params.of(params), run_name(arm, budget))
        doc = condition_run(spec, observed, Params.of(params).condition, progress=False)
        last = metrics(observed, spec.name)[-1]
        assert last["tokens"] == budget  # the checkpoint's step
        for key in KAPPA_KEYS:
            assert last["kappa"][key] == pytest.approx(doc["headline"]["effective"][key], rel=1e-5), key


def test_the_first_rate_is_from_the_initial_weights(runs):
    """ngpt at 2048 tokens evaluates once, at its 4th step: its rates are those from the seeded build to
    the checkpoint, computed here independently in numpy, per kind the mean over layers."""
    observed, _, params = runs
    spec = find_run(Params.of(params), run_name("ngpt", 2048))
    row = metrics(observed, spec.name)[-1]
    init, _ = build_seeded(spec.arm, "cpu-4l", 256, spec.context, spec.seed)
    final, _ = load_model(run_dir(observed, spec.name) / "model.safetensors", expected_arm=spec.arm)
    angles: dict[str, list[float]] = {}
    changes: dict[str, list[float]] = {}
    for before, after in zip(effective_matrices(init), effective_matrices(final), strict=True):
        a, b = before.weight.numpy(), after.weight.numpy()
        cos = np.sum(a * b) / (np.linalg.norm(a) * np.linalg.norm(b))
        angles.setdefault(before.kind, []).append(math.acos(min(1.0, cos)) / 4)
        changes.setdefault(before.kind, []).append(np.linalg.norm(b - a) / np.linalg.norm(a) / 4)
    assert row["angular_steps"] == 4
    # arccos of a cosine near 1 keeps ~8 digits of the angle; the module's chord formula all of them
    assert row["angular_rate"] == pytest.approx({k: np.mean(v) for k, v in angles.items()}, rel=1e-6)
    assert row["relative_change"] == pytest.approx({k: np.mean(v) for k, v in changes.items()}, rel=1e-9)


def test_the_tensorboard_scalars_of_a_row_include_its_observations(runs):
    observed, _, _ = runs
    row = metrics(observed, run_name("gpt", 8192))[-1]
    got = scalars(row)
    assert got["angular_rate/q"] == row["angular_rate"]["q"]
    assert got["kappa/embed_in_cov_condition"] == row["kappa"]["embed_in_cov_condition"]
    assert got["angular_steps"] == 4 and "angular_rate" not in got


def test_an_observer_without_condition_settings_measures_no_kappa():
    torch.manual_seed(0)
    model, _ = build("gpt", Scale(n_layer=4, d_model=16, n_head=2), 32, 8)
    observer = Observer(model, 0, None, every=1)
    row = observer.observe(model, 1, evaluation=1, last=True)
    assert "kappa" not in row and row["angular_rate"]["q"] == 0.0


def wsd_params(every: int = 3) -> dict:
    """Branch points at steps 8 and 16 (budgets of 10 and 20 steps), evaluations every `every` steps."""
    return make_params(arms=["gpt"], budgets=[10 * 512, 20 * 512], schedule="wsd", cooldown_fraction=0.2,
                       learning_rates={"cpu-4l": {"gpt": [3e-3]}}, warmup_steps=2,
                       eval_every_tokens=every * 512, checkpoint_every_tokens=4 * 512)


def train_grid(root, params: dict) -> None:
    """Every trunk segment, then every run, each job trained until it ends (a job may stop: rerun it)."""
    write_shards(root)
    for job in (*enumerate_segments(Params.of(params)), *enumerate_runs(Params.of(params))):
        while (code := train_run(job, Params.of(params).train, root=root, progress=False)) != 0:
            assert code == loop.EXIT_RESUMABLE


def test_a_wsd_branch_measures_the_intervals_of_its_budget_trained_alone(tmp_path):
    """Branch points at steps 8 and 16, evaluations every 3 steps: the interval of the first evaluation after
    a branch point starts at it, in the trunk's segments and branches as in a budget trained from step 0."""
    params = wsd_params()
    train = Params.of(params).train
    shared, alone = tmp_path / "shared", tmp_path / "alone"
    train_grid(shared, params)
    runs = enumerate_runs(Params.of(params))
    assert restart_points(train, runs[1]) == {8, 16}
    write_shards(alone)
    assert train_run(runs[1], train, root=alone, progress=False) == 0  # no trunk: from step 0
    rows = metrics(shared, runs[1].name)
    assert rows == metrics(alone, runs[1].name)
    intervals = {row["step"]: row["angular_steps"] for row in rows if "angular_steps" in row}
    assert intervals == {3: 3, 6: 3, 9: 1, 12: 3, 15: 3, 18: 2, 20: 2}


def test_wsd_jobs_stopped_between_evaluation_points_measure_what_jobs_that_ran_through_measure(tmp_path,
                                                                                              monkeypatch):
    """Evaluations every 5 steps, branch points at 8 and 16, every job stopped after 3 steps: the segments
    at steps 3, 6, 11 and 14, the 20-step branch at 19, whose interval starts at its branch point. Each job
    that resumes measures on from the interval start its checkpoint kept: every row is the same."""
    params = wsd_params(every=5)
    whole, split = tmp_path / "whole", tmp_path / "split"
    train_grid(whole, params)
    monkeypatch.setattr(loop, "JobLimit", StopsAfter3Steps)
    train_grid(split, params)
    short, long = enumerate_runs(Params.of(params))
    summaries = {run: json.loads((results_dir(split, run.name) / "summary.json").read_text())
                 for run in (short, long)}
    assert summaries[short]["resumed_from"] == [] and summaries[long]["resumed_from"] == [19]
    for run in (short, long):
        assert (results_dir(split, run.name) / "metrics.jsonl").read_bytes() == \
            (results_dir(whole, run.name) / "metrics.jsonl").read_bytes()
    rows = metrics(split, long.name)
    assert {row["step"]: row["angular_steps"] for row in rows if "angular_steps" in row} == \
        {5: 5, 10: 2, 15: 5, 20: 4}


def test_condition_every_evals_shapes_the_metrics_rows_and_so_the_runs_identity():
    """Which rows carry kappa is part of the train stage's results (its lineage key), and so of a run's
    identity (train/identity.py): outputs or a checkpoint of the other setting are not this run's."""
    params = make_params()
    edited = make_params(condition_every_evals=5)
    code = made_up_code()
    before, after = (lineage_keys(made_from(Params.of(p), code)) for p in (params, edited))
    assert before["train"] != after["train"] and before["prepare"] == after["prepare"]
    data = {"train_sha256": "t", "val_sha256": "v"}
    spec = find_run(Params.of(params), run_name())
    identities = [make_job(spec, Params.of(p).train, ".", Params.of(p)).identity(data)
                  for p in (params, edited)]
    assert "train.condition_every_evals" in mismatch(*identities)


def test_the_step_angle_of_a_one_step_interval_is_its_angular_rate_where_the_raw_matrix_is_the_map(tmp_path):
    """gpt-rownorm's attention and MLP matrices are the maps the forward pass applies (its norm gains frozen
    at 1), so where every step is an evaluation point the angle per optimizer step (observe/step_angle.py,
    float32 on the raw matrices) and the angular rate (observe/angular.py, float64 on the effective ones)
    measure the same turn."""
    params = make_params(arms=["gpt-rownorm"], budgets=[4 * 512], eval_every_tokens=512, step_angle_every=1,
                         learning_rates={"cpu-4l": {"gpt-rownorm": [3e-3]}})
    spec = find_run(Params.of(params), run_name("gpt-rownorm", 4 * 512))
    write_shards(tmp_path)
    assert train_run(spec, Params.of(params).train, root=tmp_path, progress=False) == 0
    rows = [row for row in metrics(tmp_path, spec.name) if "val_loss" in row]
    assert [row["step_angle_steps"] for row in rows] == [1, 1, 1, 1]
    for row in rows:
        assert set(row["step_angle"]) == set(row["angular_rate"])
        for kind in ("q", "k", "v", "o", "mlp_u", "mlp_v", "mlp_o"):
            assert row["step_angle"][kind] == pytest.approx(row["angular_rate"][kind], rel=1e-4), kind


def test_the_step_angle_is_measured_at_every_kth_step_and_kept_across_a_resume():
    """Measured steps are those whose 1-based number is a multiple of k; the sums a checkpoint keeps start a
    resumed measurement where the interrupted one was."""
    torch.manual_seed(0)
    model, _ = build("gpt", Scale(n_layer=2, d_model=16, n_head=2), 32, 8)
    observer = Observer(model, 0, None, every=1, step_angle_every=3)
    for step in range(7):
        with observer.stepping(step), torch.no_grad():
            for info in model.matrices():
                model.get_submodule(info.name).weight.mul_(1.01).add_(1e-3)
    assert observer.angles.steps == 2  # steps 3 and 6
    kept = observer.interval_start(7)
    resumed = Observer(model, 7, None, every=1, start=kept, step_angle_every=3)
    assert resumed.angles.steps == 2 and torch.equal(resumed.angles.sums, observer.angles.sums)
    row = resumed.observe(model, 7, evaluation=1, last=True)
    assert row["step_angle_steps"] == 2 and all(v > 0 for v in row["step_angle"].values())
    assert "step_angle" not in Observer(model, 0, None, every=1).observe(model, 1, evaluation=1, last=True)
