"""Lineage keys (ngptlab/plan/lineage.py): a key changes exactly when what its job is made from changes, and
a change upstream reaches every key after it."""

from __future__ import annotations

import copy

from support.workflow import default_params

from ngptlab.plan.grid import cell_key, lineage_keys
from ngptlab.plan.lineage import STAGES, TRAIN_SETTINGS, made_from

CODE = {stage: f"{stage}-code" for stage in STAGES}


def keys(params: dict, code: dict | None = None) -> dict:
    return lineage_keys(made_from(params, code or CODE))


def changed(before: dict, after: dict) -> set[str]:
    return {stage for stage in before if before[stage] != after[stage]}


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


def test_each_stage_key_follows_its_own_settings_and_code():
    params = default_params()
    base = keys(params)
    for key in TRAIN_SETTINGS:
        edited = copy.deepcopy(params)
        edited["train"][key] = "changed"
        assert changed(base, keys(edited)) == {"trunk", "train", "condition", "speedup", "evaluate",
                                               "report"}, key
    edited = copy.deepcopy(params)
    edited["evaluate"]["limit"] = 7
    assert changed(base, keys(edited)) == {"evaluate", "report"}
    edited = copy.deepcopy(params)
    edited["condition"]["device"] = "cuda"
    assert changed(base, keys(edited)) == {"condition", "report"}
    assert changed(base, keys(params, {**CODE, "speedup": "edited"})) == {"speedup", "evaluate", "report"}


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
        assert after["train"]["cosine"] == base["train"]["cosine"], key  # the calibration runs stay
        assert after["condition"]["cosine"] == base["condition"]["cosine"], key
        assert after["train"]["wsd"] != base["train"]["wsd"], key
        assert after["condition"]["wsd"] != base["condition"]["wsd"], key
        assert (after["trunk"] != base["trunk"]) == (key == "cooldown_fraction")  # shape: branches only
        assert after["prepare"] == base["prepare"]


def test_a_cooldown_setting_in_a_cosine_grid_changes_no_key_that_a_job_uses():
    params = default_params()
    edited = copy.deepcopy(params)
    edited["train"]["cooldown_fraction"] = 0.3
    base, after = keys(params), keys(edited)
    assert after["train"]["cosine"] == base["train"]["cosine"]
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
    assert keys(smaller)["trunk"] != base["trunk"] and keys(smaller)["train"]["wsd"] != base["train"]["wsd"]
