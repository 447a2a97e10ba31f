"""Lineage keys (ngptlab/plan/lineage.py): a key changes exactly when what its job is made from changes, and
a change upstream reaches every key after it. What a params key shapes is its schema entry's class
(settings/roles.py): every key of the schema is walked here."""

from __future__ import annotations

import copy

import pytest
from support.code import made_up_code
from support.workflow import default_params

from ngptlab.grid.enumeration import enumerate_runs
from ngptlab.grid.trunks import enumerate_segments
from ngptlab.plan.checkpointing import run_checkpoints
from ngptlab.plan.grid import cell_key, lineage_keys
from ngptlab.plan.lineage import PER_SCHEDULE, made_from
from ngptlab.settings import Params, filled
from ngptlab.settings.roles import GRID, roles, value_at

CODE = made_up_code()
# What a stage's key reaches: the stages whose keys hold it. The trunk's only where the grid trains WSD runs.
AFTER = {"prepare": {"trunk", "train", "condition", "speedup", "evaluate", "report"},
         "trunk": {"train", "condition", "speedup", "evaluate", "report"},
         "train": {"condition", "speedup", "evaluate", "report"}, "condition": {"report"},
         "speedup": {"evaluate", "report"}, "evaluate": {"report"}, "report": set()}
# A grid key's change must keep a valid grid, so each gets a value here (the test of the walk asks for one).
GRID_EDITS = {
    "train.scales": lambda t: t["scales"].append("cpu-8l") or t["learning_rates"].update(
        {"cpu-8l": t["learning_rates"][t["scales"][0]]}),
    "train.contexts": lambda t: t["contexts"].append(256),
    "train.arms": lambda t: t["arms"].remove("gpt-nowd"),
    "train.budgets": lambda t: t["budgets"].append(16384),
    "train.seeds": lambda t: t["seeds"].append(1),
    "train.learning_rates": lambda t: t["learning_rates"][t["scales"][0]]["ngpt"].append(4.0e-2),
    "train.schedule": lambda t: t.update(schedule="wsd"),
    "train.weight_dtype": lambda t: t.update(weight_dtype=["fp32", "bf16"]),
    "train.calibrate": lambda t: t.update(schedule="wsd", calibrate={"budgets": [8192]}),
    "train.pruned_sweeps": lambda t: t.update(pruned_sweeps=[{
        "scale": t["scales"][0], "context": t["contexts"][0], "arm": "gpt", "after_budget": 2048, "keep": 2,
        "learning_rates": [5.0e-3, 1.0e-2]}]),
    "train.added_seeds": lambda t: t.update(added_seeds=[{
        "scale": t["scales"][0], "context": t["contexts"][0], "arm": "gpt", "budget": 8192, "lr": 1.0e-2,
        "seeds": [1]}]),
}
# Every other key is changed to a string that no setting holds, except a key whose value is an object or a
# mapping: typed settings build it from its entries, so each gets an edit of its entries here (the test of the
# walk asks for one).
OBJECT_EDITS = {
    "train.shapes": lambda p: p["train"]["shapes"][p["train"]["scales"][0]].update(d_model=128),
    "train.protocol": lambda p: p["train"].update(protocol={"add_seeds": 3}),
    "train.resources": lambda p: p["train"]["resources"][p["train"]["scales"][0]].update(mem_mb=4000),
    "design": lambda p: p.update(design={"worlds": 7}),
    "train.angles": lambda p: p["train"].update(angles={"cpu-4l-ctx128": {"gpt-angle": {
        "lr": 0.01, "run": "cpu-4l-ctx128-ngpt-t8192-lr0.01-s0", "kinds": {"q": 0.02}}}}),
}


def keys(params: dict, code: dict | None = None) -> dict:
    return lineage_keys(made_from(Params.of(params), code or CODE))


def run_names(params: dict) -> set[str]:
    return {run.name for run in enumerate_runs(Params.of(params))}


def changed(before: dict, after: dict, groups: set[str] | None = None) -> set[str]:
    """The stages whose keys differ; with `groups`, a per-group stage's keys of those lineage groups only
    (the groups a grid's runs and trunks use)."""
    def used(stage: str, value):
        if groups is None or stage not in PER_SCHEDULE:
            return value
        return {g: k for g, k in value.items() if g in groups}
    return {stage for stage in before if used(stage, before[stage]) != used(stage, after.get(stage, {}))}


def used_groups(params: dict) -> set[str]:
    """The lineage groups of a grid's runs and trunks."""
    grid = Params.of(params)
    return {*(run.lineage_group for run in enumerate_runs(grid)),
            *(segment.trunk.lineage_group for segment in enumerate_segments(grid))}


def set_key(params: dict, key: str, value) -> None:
    *path, last = key.split(".")
    section = params
    for part in path:
        section = section[part]
    section[last] = value


@pytest.mark.parametrize("role", [r for r in roles() if GRID not in r.shapes], ids=lambda r: r.key)
def test_every_key_changes_the_keys_of_exactly_the_stages_it_shapes_and_after(role):
    params = wsd_params() if role.only_schedule == "wsd" else default_params()
    groups = used_groups(params)
    edited = copy.deepcopy(params)
    if isinstance(value_at(filled(params), role.key), dict):
        OBJECT_EDITS[role.key](edited)
    else:
        set_key(edited, role.key, f"changed {role.key}")
    trains_trunks = bool(enumerate_segments(Params.of(params)))
    expected = set()
    for stage in role.shapes:  # a cosine grid has no trunk job, so no trunk key it uses
        expected |= {stage, *AFTER[stage]} if stage != "trunk" or trains_trunks else set()
    expected -= set() if trains_trunks else {"trunk"}
    assert changed(keys(params), keys(edited), groups) == expected, role


@pytest.mark.parametrize("key", sorted(GRID_EDITS))
def test_a_grid_key_reaches_the_report_and_the_cells_through_their_runs(key):
    params = default_params()
    edited = copy.deepcopy(params)
    GRID_EDITS[key](edited["train"])
    before, after = keys(params), keys(edited)
    assert before["report"] != after["report"], key
    assert before["prepare"] == after["prepare"], key
    assert run_names(edited) != run_names(params), key


def test_every_grid_key_of_the_schema_has_an_edit_here():
    assert sorted(GRID_EDITS) == sorted(r.key for r in roles() if GRID in r.shapes)


def test_every_object_key_of_the_schema_has_an_edit_here():
    full = filled(default_params())
    assert sorted(OBJECT_EDITS) == sorted(r.key for r in roles()
                                          if GRID not in r.shapes and isinstance(value_at(full, r.key), dict))


def test_the_schema_classifies_the_keys_the_results_turn_on():
    by_key = {r.key: r for r in roles()}
    for key in ("train.precision", "train.log_every_tokens", "train.condition_every_evals",
                "train.step_angle_every"):
        assert {"trunk", "train"} <= set(by_key[key].shapes), key
    for key, why in (("train.checkpoint_every_tokens", "cadence"), ("train.tensorboard", "view"),
                     ("prepare.workers", "speed"), ("train.micro_batch_tokens", "roundoff"),
                     ("train.device", "roundoff"), ("train.compile", "roundoff")):
        assert by_key[key].execution == why, key


def test_a_prepare_setting_changes_every_key_after_prepare():
    params = default_params()
    edited = copy.deepcopy(params)
    edited["prepare"]["val_fraction"] = 0.03
    assert changed(keys(params), keys(edited)) == {"prepare", "trunk", "train", "condition", "speedup",
                                                   "evaluate", "report"}


def test_speed_knobs_and_key_order_change_no_key():
    params = default_params()
    edited = copy.deepcopy(params)
    edited["prepare"]["workers"] = 7
    edited["train"]["micro_batch_tokens"] = 256
    edited["prepare"] = dict(reversed(list(edited["prepare"].items())))
    shapes = edited["train"]["shapes"]
    edited["train"]["shapes"] = {name: dict(reversed(list(shape.items()))) for name, shape in shapes.items()}
    assert keys(params) == keys(edited)


@pytest.mark.parametrize("grid", ["cosine", "wsd"])
def test_activation_checkpointing_true_false_or_auto_changes_no_key(grid):
    """auto decides per run from plan's memory estimate; whichever way, the run is the same up to rounding."""
    params = wsd_params() if grid == "wsd" else default_params()
    train = params["train"]
    train["resources"][train["scales"][0]]["mem_mb"] = 300  # under plan's estimate: auto checkpoints
    before = keys(params)
    for value in (True, False, "auto"):
        edited = copy.deepcopy(params)
        edited["train"]["activation_checkpointing"] = value
        assert keys(edited) == before, value
    train["activation_checkpointing"] = "auto"
    settings = Params.of(params)
    assert all(run_checkpoints(settings.train, run.arm, run.scale, run.context, run.weight_dtype)
               for run in enumerate_runs(settings))


def test_each_stage_key_follows_its_own_settings_and_code():
    params = default_params()
    base = keys(params)
    edited = copy.deepcopy(params)
    edited["evaluate"]["limit"] = 7
    assert changed(base, keys(edited)) == {"evaluate", "report"}
    edited = copy.deepcopy(params)
    edited["condition"]["sample_rows"] = 7
    assert changed(base, keys(edited)) == {"condition", "report"}
    assert changed(base, keys(params, made_up_code(speedup="edited"))) == {"speedup", "evaluate", "report"}


def test_a_run_added_to_one_cell_changes_that_cells_keys_only():
    params = default_params()
    params["train"]["contexts"] = [128, 256]
    scale = params["train"]["scales"][0]
    base = keys(params)
    edited = copy.deepcopy(params)
    edited["train"]["learning_rates"][scale]["ngpt"] = {"ctx128": [5.0e-3, 1.0e-2, 2.0e-2, 4.0e-2],
                                                       "ctx256": [5.0e-3, 1.0e-2, 2.0e-2]}
    after = keys(edited)
    assert changed(base, after) == {"speedup", "evaluate", "report"}
    for stage in ("speedup", "evaluate"):
        assert base[stage][cell_key(f"{scale}-ctx128")] != after[stage][cell_key(f"{scale}-ctx128")]
        assert base[stage][cell_key(f"{scale}-ctx256")] == after[stage][cell_key(f"{scale}-ctx256")]


def of(stage_keys: dict, schedule: str) -> dict:
    """A run stage's keys of one schedule's lineage groups ("cosine-gpt", "wsd-ngpt", ...)."""
    return {group: key for group, key in stage_keys.items() if group.startswith(f"{schedule}-")}


def wsd_params(**train) -> dict:
    params = default_params()
    params["train"].update(schedule="wsd", cooldown_fraction=0.2, **train)
    return params


def test_a_cooldown_setting_changes_the_keys_of_wsd_jobs_only():
    params = wsd_params(budgets=[2048, 8192], calibrate={"budgets": [8192]})
    base = keys(params)
    for key, value in (("cooldown_fraction", 0.25), ("cooldown_shape", "linear")):
        edited = copy.deepcopy(params)
        edited["train"][key] = value
        after = keys(edited)
        for stage in ("train", "condition"):
            assert of(after[stage], "cosine") == of(base[stage], "cosine"), key  # the calibration runs stay
            assert all(after[stage][g] != base[stage][g] for g in of(base[stage], "wsd")), key
        assert (after["trunk"] != base["trunk"]) == (key == "cooldown_fraction")  # shape: branches only
        assert after["prepare"] == base["prepare"]


def test_a_cooldown_setting_in_a_cosine_grid_changes_no_key_that_a_job_uses():
    params = default_params()
    edited = copy.deepcopy(params)
    edited["train"]["cooldown_fraction"] = 0.3
    base, after = keys(params), keys(edited)
    assert of(after["train"], "cosine") == of(base["train"], "cosine")
    assert {stage: after[stage] for stage in ("speedup", "evaluate", "report")} == \
        {stage: base[stage] for stage in ("speedup", "evaluate", "report")}


def test_a_larger_budget_keeps_the_trunk_and_wsd_keys_a_smaller_one_changes_them():
    params = wsd_params(budgets=[2048, 4096])
    base = keys(params)
    larger = copy.deepcopy(params)
    larger["train"]["budgets"] = [2048, 4096, 8192]
    assert keys(larger)["trunk"] == base["trunk"] and keys(larger)["train"] == base["train"]
    smaller = copy.deepcopy(params)
    smaller["train"]["budgets"] = [1024, 2048, 4096]  # the trunks' shared warmup is the smallest budget's
    assert keys(smaller)["trunk"] != base["trunk"]
    assert of(keys(smaller)["train"], "wsd") != of(base["train"], "wsd")


def test_an_angle_arms_target_reruns_that_arms_trunks_runs_and_conditioning_only():
    params = wsd_params()
    params["train"]["arms"] = ["gpt", "ngpt", "gpt-angle", "ngpt-angle"]
    groups = used_groups(params)
    assert {"wsd-gpt", "wsd-gpt-angle", "wsd-ngpt-angle"} <= groups  # trunks and runs alike
    edited = copy.deepcopy(params)
    OBJECT_EDITS["train.angles"](edited)  # gpt-angle's target in the first cell
    before, after = keys(params), keys(edited)
    for stage in ("trunk", "train", "condition"):
        moved = {group for group in before[stage] if before[stage][group] != after[stage][group]}
        assert moved == {g for g in before[stage] if g.endswith("-gpt-angle")}, stage
    assert before["speedup"] != after["speedup"]  # its cell holds the arm's runs
    runs = enumerate_runs(Params.of(params))
    assert {run.lineage_group for run in runs if run.arm == "gpt-angle"} == {"wsd-gpt-angle"}
    assert {run.lineage_group for run in runs if run.arm == "gpt"} == {"wsd-gpt"}
