"""A run's identity is what the lineage hashes for it (train/identity.py): every key whose schema entry says
it shapes the train stage, read from the schema's roles, never from a list here. A changed one is never
"already done" nor resumes a kept state/: the job refuses in one line naming the key. An execution-only key
(micro_batch_tokens) changes neither, and neither does a run added to the grid around it.

One tiny run is trained once (stopped after 3 steps, its state/ copied, then finished); every check after
that only starts the job up to where it compares identities.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from support.train import StopsAfter3Steps, write_shards

from ngptlab.cli import main
from ngptlab.config.load import validate_params
from ngptlab.errors import CheckpointError, ParamsError
from ngptlab.grid.enumeration import find_run
from ngptlab.grid.runs import RunSpec
from ngptlab.schedule import COSINE
from ngptlab.settings import Params, filled, load_schema, resolved_node
from ngptlab.settings.roles import Role, roles, value_at
from ngptlab.train import loop
from ngptlab.train.identity import SETTINGS, mismatch
from ngptlab.train.jobs import make_job
from ngptlab.train.loop import EXIT_RESUMABLE, train_run

torch.set_num_threads(1)

SOURCE, SCALE, CONTEXT, LR, BUDGET = "synthetic", "tiny", 32, 3e-3, 8 * 512  # 8 steps of 16 x 32 tokens
SHAPING = [role for role in roles() if "train" in role.shapes]  # the keys this module changes, one by one
EXECUTION = [role for role in roles() if role.execution]
# The run is one every train-shaping key applies to: of the schedule a key is limited to (WSD, whose keys
# include its trunk's), of an arm a per-arm key names.
SCHEDULE = next((role.only_schedule for role in SHAPING if role.only_schedule), COSINE)
ARM = next((role.per_arm[0] for role in SHAPING if role.per_arm), "gpt")


def node_of(key: str) -> dict:
    node = load_schema()
    for part in key.split("."):
        node = resolved_node(node)["properties"][part]
    return resolved_node(node)


def kinds_of_angles() -> list[str]:
    """The matrix kinds a per-arm angle entry names (its schema's enum), so the test's entry is complete."""
    angles = next(role.key for role in SHAPING if role.per_arm)
    entry = resolved_node(resolved_node(node_of(angles)["additionalProperties"])["additionalProperties"])
    return list(resolved_node(entry["properties"]["kinds"])["propertyNames"]["enum"])


def base_params(**train: Any) -> dict:
    """A whole params file of this module's own: one tiny run of ARM, SCHEDULE, with every optional
    train-shaping key written out, so that each has a value to change."""
    cell = f"{SCALE}-ctx{CONTEXT}"
    arms = sorted({"gpt", ARM})
    params = {
        "prepare": {"source": {"kind": "local", "name": SOURCE, "files": ["none.txt"], "format": "text"},
                    "val_fraction": 0.05, "split_seed": 0, "batch_documents": 64, "workers": 1},
        "train": {
            "source": SOURCE, "shapes": {SCALE: {"n_layer": 1, "d_model": 32, "n_head": 2, "mlp_ratio": 2}},
            "scales": [SCALE], "contexts": [CONTEXT], "arms": arms, "budgets": [BUDGET], "seeds": [0],
            "learning_rates": {SCALE: dict.fromkeys(arms, [LR])}, "batch_sequences": 16,
            "micro_batch_tokens": 256, "warmup_steps": 2, "warmup_max_fraction": 0.5, "schedule": SCHEDULE,
            "cooldown_fraction": 0.2, "cooldown_shape": "1-sqrt",
            "angles": {cell: {ARM: {"lr": LR, "run": "measured", "kinds": dict.fromkeys(kinds_of_angles(),
                                                                                        0.01)}}},
            "grad_clip": 1.0, "eval_every_tokens": 2048, "log_every_tokens": 512, "tensorboard": False,
            "condition_every_evals": 1, "step_angle_every": 4, "eval_windows": 8, "eval_seed": 0,
            "final_eval_tokens": 1024, "diverge_loss": 20.0, "vocab_multiple": 1, "precision": "auto",
            "device": "cpu", "compile": False, "checkpoint_every_tokens": 1024,
            "resources": {SCALE: {"nodes": 1, "gpus": 0, "processes": 1, "mem_mb": 1000, "runtime_min": 10}},
        },
        "condition": {"sample_rows": 64, "seed": 0, "singular_tol": 1e-10, "device": "cpu"},
        "evaluate": {"budgets": "largest", "tasks": ["ngptlab_lastword"], "task_dirs": [], "limit": 10,
                     "seed": 0, "context_words": 10, "continuation_words": 5, "batch_size": 4,
                     "device": "cpu"},
        "speedup": {"baseline": "gpt", "bootstrap": 10, "seed": 0},
        "report": {"title": "identity", "min_budget_for_claims": 1},
    }
    params["train"].update(train)
    return params


def spec_of(params: Params) -> RunSpec:
    return find_run(params, RunSpec(SCALE, CONTEXT, ARM, BUDGET, LR, 0, SCHEDULE).name)


# ----------------------------------------------------------------------------------------------------------
# Another valid value of a key, from its schema node


class Unchangeable(Exception):
    """The schema node gives no other value to derive."""


def _fits(node: dict, value: Any) -> bool:
    node = resolved_node(node)
    if "const" in node:
        return value == node["const"]
    if "enum" in node:
        return value in node["enum"]
    types = {"integer": int, "number": (int, float), "string": str, "boolean": bool, "object": dict,
             "array": list}
    wanted = node.get("type")
    return wanted is None or (isinstance(value, types[wanted]) and (wanted == "boolean")
                              == isinstance(value, bool))


def _nudged(node: dict, value: float) -> float:
    """A number within the node's bounds, away from `value`: halfway to an upper bound, else doubled."""
    high = node.get("maximum", node.get("exclusiveMaximum"))
    if high is not None and high > value:
        moved = value + (high - value) / 4
        return round(moved) if node.get("type") == "integer" and round(moved) != value else moved
    return value * 2 if value > 0 else value + 1


def changed(node: dict, value: Any, key: str) -> Any:
    """Another value of `value` that `node` allows: another enum member, a flipped bool, a nudged number, a
    longer name, and inside an object its first entry changed so."""
    node = resolved_node(node)
    if "enum" in node:
        return next(member for member in node["enum"] if member != value)
    for alternatives in ("oneOf", "anyOf"):
        if alternatives in node:
            branch = next(b for b in node[alternatives] if _fits(b, value))
            return changed(branch, value, key)
    kind = node.get("type")
    if kind == "boolean":
        return not value
    if kind in ("integer", "number"):
        return _nudged(node, value)
    if kind == "string" and re.search(node.get("pattern", ""), value + "b"):
        return value + "b"
    if kind == "object" and isinstance(value, dict) and value:
        first = next(iter(value))
        child = node.get("properties", {}).get(first, node.get("additionalProperties"))
        if isinstance(child, dict):
            return {**value, first: changed(child, value[first], f"{key}.{first}")}
    raise Unchangeable(f"{key}: the schema ({node.get('type', 'no type')}) gives no other value to derive")


def changed_value(role: Role, params: dict) -> Any:
    """Another value of the role's key than `params` gives it (or than its schema default, if unset)."""
    value = value_at(filled(params), role.key)
    if value is None:
        raise Unchangeable(f"{role.key}: unset, and the schema gives it no default to change")
    return changed(node_of(role.key), value, role.key)


def with_value(params: dict, key: str, value: Any) -> dict:
    edited = copy.deepcopy(params)
    *parents, last = key.split(".")
    into = edited
    for part in parents:
        into = into.setdefault(part, {})
    into[last] = value
    return edited


def edited(params: dict, role: Role) -> dict:
    """`params` with the role's key changed, valid: where a check ties another key to it (train.source must
    name prepare.source.name), the error names that key, which had the same value, and it follows."""
    value = changed_value(role, params)
    raw = with_value(params, role.key, value)
    try:
        validate_params(raw, source="test")
        return raw
    except ParamsError as err:
        old = value_at(filled(params), role.key)
        tied = [other.key for other in roles() if other.key != role.key and other.key in str(err)
                and value_at(filled(params), other.key) == old]
        if not tied:
            raise
    for key in tied:
        raw = with_value(raw, key, value)
    return raw


# ----------------------------------------------------------------------------------------------------------
# One run, trained once


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(done root, root with the run's state/ after 3 steps): the same run, stopped, copied, then finished."""
    base = tmp_path_factory.mktemp("identity")
    done, stopped = base / "done", base / "stopped"
    write_shards(done)
    params = validate_params(base_params(), source="test")
    spec = spec_of(params)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(loop, "JobLimit", StopsAfter3Steps)
        assert train_run(spec, params.train, root=done, progress=False, params=params) == EXIT_RESUMABLE
    shutil.copytree(done, stopped, ignore=shutil.ignore_patterns(".lock*"))
    assert train_run(spec, params.train, root=done, progress=False, params=params) == 0
    return done, stopped


def attempt(root: Path, raw: dict) -> int:
    """Start the run under these params (validated as `ngptlab train` validates them) at `root`. Where the
    params move its token shards (another train.source), the same shards are placed there."""
    params = validate_params(raw, source="test")
    spec = spec_of(params)
    tokens = make_job(spec, params.train, root, params).paths.tokens_dir
    if not tokens.is_dir():
        shutil.copytree(make_job(spec, validate_params(base_params()).train, root).paths.tokens_dir, tokens)
    return train_run(spec, params.train, root=root, progress=False, params=params)


def files_of(root: Path) -> dict[Path, bytes]:
    """A run's files: its outputs, its state, its results (not the locks a start takes and gives back)."""
    return {p: p.read_bytes() for top in ("runs", "results") for p in sorted((root / top).rglob("*"))
            if p.is_file() and ".lock" not in p.name}


def test_the_run_is_one_that_every_train_shaping_key_applies_to():
    params = validate_params(base_params(), source="test")
    identity = make_job(spec_of(params), params.train, ".", params).identity({})
    assert {role.key for role in SHAPING} <= set(identity[SETTINGS])
    assert not {role.key for role in EXECUTION} & set(identity[SETTINGS])


def test_every_train_shaping_key_changed_is_refused_before_done_and_before_resuming(trained):
    done, stopped = trained
    before = files_of(done), files_of(stopped)
    refused, invalid = [], {}
    for role in SHAPING:
        try:
            raw = edited(base_params(), role)
            validate_params(raw, source="test")
        except ParamsError as err:  # the value the schema allows is not one the tiny grid can take
            invalid[role.key] = str(err).splitlines()[0]
            continue
        for root in (done, stopped):
            with pytest.raises(CheckpointError) as refusal:
                attempt(root, raw)
            message = str(refusal.value)
            assert role.key in message and "\n" not in message, (root.name, message)
            assert ("exist for other settings" if root == done else "different settings") in message
        refused.append(role.key)
    if invalid:  # said, not skipped silently: which key, and the error that makes the changed grid invalid
        warnings.warn(f"train-shaping keys not checked through the job: {invalid}", stacklevel=1)
    assert len(refused) + len(invalid) == len(SHAPING) and refused
    assert (files_of(done), files_of(stopped)) == before  # nothing overwritten, nothing resumed


def test_an_execution_key_changed_is_still_done_and_still_resumes(trained, tmp_path, capsys):
    done, stopped = trained
    micro = next(role for role in EXECUTION if role.key == "train.micro_batch_tokens")
    raw = with_value(base_params(), micro.key, value_at(base_params(), micro.key) // 2)
    capsys.readouterr()
    assert attempt(done, raw) == 0
    assert "is already done" in capsys.readouterr().err
    resumed = tmp_path / "resumed"
    shutil.copytree(stopped, resumed)
    assert attempt(resumed, raw) == 0
    assert "resumed from step 3" in capsys.readouterr().err
    # and no execution key at all moves the identity
    params = validate_params(base_params(), source="test")
    spec = spec_of(params)
    identity = make_job(spec, params.train, ".", params).identity({})
    for role in EXECUTION:
        try:
            value = changed_value(role, base_params())
        except Unchangeable:  # unset, without a default: nothing to change
            continue
        other = validate_params(with_value(base_params(), role.key, value), source="test")
        assert make_job(spec, other.train, ".", other).identity({}) == identity, role.key


@pytest.mark.parametrize("schedule", ["cosine", "wsd"])
def test_a_run_added_to_the_grid_leaves_the_identity_of_the_others(schedule):
    raw = base_params(schedule=schedule)
    params = validate_params(raw, source="test")
    spec = find_run(params, RunSpec(SCALE, CONTEXT, ARM, BUDGET, LR, 0, schedule).name)
    identity = make_job(spec, params.train, ".", params).identity({})
    grown = [{"seeds": [0, 1]}, {"budgets": [BUDGET, 2 * BUDGET]},
             {"learning_rates": {SCALE: {arm: [LR, 2 * LR] for arm in raw["train"]["arms"]}}},
             {"arms": [*raw["train"]["arms"], "ngpt"],
              "learning_rates": {SCALE: dict.fromkeys([*raw["train"]["arms"], "ngpt"], [LR])}}]
    for change in grown:
        other = validate_params(base_params(schedule=schedule, **change), source="test")
        assert make_job(spec, other.train, ".", other).identity({}) == identity, change
    # but a smaller budget sets a WSD trunk's warmup (ngptlab.schedule), as the trunk's lineage key holds
    smaller = validate_params(base_params(schedule=schedule, budgets=[BUDGET // 2, BUDGET]), source="test")
    differs = mismatch(make_job(spec, smaller.train, ".", smaller).identity({}), identity)
    assert differs is None if schedule == COSINE else "min(train.budgets)" in differs


def test_old_outputs_and_states_without_an_identity_are_refused(trained, tmp_path):
    done, stopped = trained
    raw = base_params()
    before = "before runs recorded their identity"
    for source, file, refusal in ((done, "summary.json", before),
                                  (stopped, "state.json", f"different settings.*{before}")):
        old = tmp_path / file
        shutil.copytree(source, old)
        record = next(old.rglob(file))
        written = json.loads(record.read_text())
        record.write_text(json.dumps({k: v for k, v in written.items() if k != "identity"}))
        with pytest.raises(CheckpointError, match=refusal):
            attempt(old, raw)
    assert mismatch(None, {SETTINGS: {}}) == mismatch({"arm": ARM}, {SETTINGS: {}})


def cli(root: Path, raw: dict, capsys) -> tuple[int, str]:
    params_file = root / "changed.yaml"
    params_file.write_text(yaml.safe_dump(raw))
    capsys.readouterr()
    code = main(["train", "--params", str(params_file), "--root", str(root), "--no-progress",
                 spec_of(validate_params(raw, source="test")).name])
    return code, capsys.readouterr().err


def test_ngptlab_train_refuses_a_changed_precision_in_one_line_and_never_resumes(trained, tmp_path, capsys):
    done, stopped = trained
    key = "train.precision"
    role = next(role for role in SHAPING if role.key == key)
    raw = with_value(base_params(), key, changed_value(role, base_params()))
    outputs = files_of(done)
    code, err = cli(done, raw, capsys)
    line = [line for line in err.splitlines() if line.startswith("ngptlab train: error:")]
    assert code == 2 and "already done" not in err
    assert len(line) == 1 and key in line[0] and "exist for other settings" in line[0]
    assert files_of(done) == outputs
    resumed = tmp_path / "stopped"
    shutil.copytree(stopped, resumed)
    state = files_of(resumed)
    code, err = cli(resumed, raw, capsys)
    line = [line for line in err.splitlines() if line.startswith("ngptlab train: error:")]
    assert code == 2 and len(line) == 1 and key in line[0] and "different settings" in line[0]
    assert "resumed from" not in err and files_of(resumed) == state
