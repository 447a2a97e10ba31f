"""train.weight_dtype: a bf16 run stores its weights and AdamW state in bf16, trains and resumes on a CPU,
refuses a checkpoint of the other dtype, and lives in a cell of its own; fp32 runs keep every name and key."""

from __future__ import annotations

import json
import shutil
import signal

import pytest
import torch
from safetensors.torch import load_file
from support import fixture_params, synthetic
from support.code import made_up_code
from support.train import make_params, metrics, results_dir, run_dir, summary, write_params, write_shards

from ngptlab import weight_dtype as weight_dtypes
from ngptlab.checkpoint import load_model
from ngptlab.checkpoint_cost import state_bytes
from ngptlab.config.load import load_params
from ngptlab.errors import CheckpointError, ParamsError
from ngptlab.grid.enumeration import compared_runs, enumerate_cells, enumerate_runs, find_run
from ngptlab.grid.runs import RunSpec, parse_run_name
from ngptlab.models.arms import table as arm_table
from ngptlab.models.registry import build_seeded
from ngptlab.models.scales import SCALES, Scale
from ngptlab.plan.grid import lineage_keys
from ngptlab.plan.lineage import made_from
from ngptlab.plan.memory import training_memory
from ngptlab.plan.storage import final_checkpoint_bytes
from ngptlab.settings import Params
from ngptlab.speedup.cell import speedup_cell
from ngptlab.train import loop
from ngptlab.train.identity import mismatch
from ngptlab.train.jobs import RunJob
from ngptlab.train.loop import EXIT_RESUMABLE, train_run
from ngptlab.train.stop import StopRequest

BUDGET = 12 * 512  # 12 steps of 512 tokens
CODE = made_up_code()


# ----------------------------------------------------------------------------------------------------------
# Names, cells, lineage: fp32's as before, bf16's their own


def default_params(weight_dtype=None, **train) -> Params:
    params = fixture_params()
    if weight_dtype is not None:
        params["train"]["weight_dtype"] = weight_dtype
    params["train"].update(train)
    return Params.of(params)


def test_fp32_runs_keep_their_names_fingerprints_and_lineage_keys():
    # From the tests' params, the same for every fp32 setting of train.weight_dtype (the analysis stages'
    # keys also hash the speedup section, so they are compared across the dtype settings).
    names, runs, analysis, identities = [], [], [], []
    for weight_dtype in (None, "fp32", ["fp32", "bf16"]):
        params = default_params(weight_dtype)
        first = enumerate_runs(params)[0]
        names.append(first.name)
        identities.append(RunJob(first, params.train, ".", params).identity({}))
        keys = lineage_keys(made_from(params, CODE))
        runs.append((keys["train"]["cosine-gpt"], keys["train"]["wsd-gpt"], keys["condition"]["cosine-gpt"]))
        analysis.append((keys["speedup"]["cpu-4l-ctx128"], keys["evaluate"]["cpu-4l-ctx128"], keys["report"]))
    assert names[0] == names[1] == names[2] == "cpu-4l-ctx128-gpt-t2048-lr0.005-s0"  # no dtype in the name
    assert runs[0] == runs[1] == runs[2]  # the run stages' lineage keys
    # An fp32 grid's plan is the one of the default, down to the report's key; a bf16 axis adds its own cell.
    assert analysis[0] == analysis[1] and analysis[2][:2] == analysis[0][:2]
    assert identities[0] == identities[1] == identities[2]  # nor does an fp32 run's identity say fp32


def test_bf16_runs_form_their_own_cell_name_and_lineage_key():
    params = default_params(["fp32", "bf16"])
    runs = enumerate_runs(params)
    fp32 = [r for r in runs if r.weight_dtype == "fp32"]
    bf16 = [r for r in runs if r.weight_dtype == "bf16"]
    assert fp32 == enumerate_runs(default_params()) and len(bf16) == len(fp32)  # the axis doubles the grid
    assert enumerate_cells(params) == ["cpu-4l-ctx128", "cpu-4l-ctx128-bf16"]
    run = bf16[0]
    assert run.name == "cpu-4l-ctx128-bf16-gpt-t2048-lr0.005-s0" and run.cell == "cpu-4l-ctx128-bf16"
    assert parse_run_name(run.name) == run and find_run(params, run.name) == run
    assert run.as_dict()["weight_dtype"] == "bf16" and "weight_dtype" not in fp32[0].as_dict()
    fp32_identity = RunJob(fp32[0], params.train, ".", params).identity({})
    assert "weight_dtype" in mismatch(RunJob(run, params.train, ".", params).identity({}), fp32_identity)
    keys = lineage_keys(made_from(params, CODE))
    assert run.lineage_group == "cosine-bf16-gpt"
    assert keys["train"]["cosine-bf16-gpt"] not in (keys["train"]["cosine-gpt"], keys["train"]["wsd-gpt"])
    assert keys["condition"]["cosine-bf16-gpt"] != keys["condition"]["cosine-gpt"]
    assert keys["speedup"]["cpu-4l-ctx128-bf16"] != keys["speedup"]["cpu-4l-ctx128"]
    # The speed-up compares each dtype's arms among themselves: a cell holds one dtype's runs only.
    compared = compared_runs(params)
    for cell in enumerate_cells(params):
        assert len({r.weight_dtype for r in compared if r.cell == cell}) == 1


def test_a_wsd_grid_gives_bf16_trunks_of_their_own():
    from ngptlab.grid.trunks import enumerate_segments

    params = default_params(["fp32", "bf16"], schedule="wsd")
    segments = enumerate_segments(params)
    bf16 = [s for s in segments if s.trunk.weight_dtype == "bf16"]
    assert bf16 and len(bf16) * 2 == len(segments)
    assert all(s.trunk.cell == "cpu-4l-ctx128-bf16" and s.name.startswith("cpu-4l-ctx128-bf16-")
               for s in bf16)
    run = next(r for r in enumerate_runs(params) if r.weight_dtype == "bf16")
    assert run.name.endswith("-wsd") and run.lineage_group == f"wsd-bf16-{run.arm}"


def test_a_malformed_weight_dtype_names_the_key(tmp_path):
    for bad in ("fp16", ["fp32", "fp32"], []):
        path = write_params(tmp_path, make_params(weight_dtype=bad))
        with pytest.raises(ParamsError, match="weight_dtype"):
            load_params(path)


# ----------------------------------------------------------------------------------------------------------
# Training in bf16 on a CPU


def test_every_arm_steps_with_weights_and_adam_state_in_bf16():
    """Two updates of every arm in bf16 under CPU autocast, each arm's constraint after each (nGPT's
    renormalisation, gpt-orth's projection, whose tolerance follows bf16's round-off)."""
    x = torch.randint(0, 64, (2, 16))
    for arm in arm_table():
        model, recipe = build_seeded(arm, Scale(n_layer=1, d_model=32, n_head=2), 64, 16, 0, 1)
        weight_dtypes.store(model, "bf16")
        optimizer = torch.optim.AdamW(recipe.param_groups(model, 1e-3), lr=1e-3)
        for _ in range(2):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                _, loss = model(x, x)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            recipe.post_step(model)
        assert torch.isfinite(loss), arm
        assert {p.dtype for p in model.parameters()} == {torch.bfloat16}, arm
        moments = [v for state in optimizer.state.values() for k, v in state.items() if k != "step"]
        assert moments and {v.dtype for v in moments} == {torch.bfloat16}, arm
        assert getattr(model, "orth_error", 0.0) < 0.1, arm  # bf16's floor at this width: ~0.014


class StopAfter(StopRequest):
    """A SIGTERM as the loop sees it, once it has asked `asks` times (twice per step): a stop mid-run at a
    known step, without a real signal's timing."""

    asks = 0

    def install(self) -> None:
        pass

    @property
    def signal(self):
        StopAfter.asks += 1
        return signal.SIGTERM if StopAfter.asks > 2 * 5 else None

    @signal.setter
    def signal(self, value) -> None:
        pass


def bf16_root(base, name: str, arm: str = "ngpt"):
    root = base / name
    write_shards(root)
    params = Params.of(make_params(arms=[arm], budgets=[BUDGET], weight_dtype="bf16",
                                   checkpoint_every_tokens=BUDGET, eval_every_tokens=4096))
    return root, params, find_run(params, RunSpec("cpu-4l", 32, arm, BUDGET, 3e-3, 0, "cosine", "bf16").name)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    root, params, spec = bf16_root(tmp_path_factory.mktemp("bf16"), "whole")
    assert train_run(spec, params.train, root=root, progress=False) == 0
    return root, spec


def test_a_bf16_run_stores_weights_and_adam_state_in_bf16(uninterrupted):
    root, spec = uninterrupted
    s = summary(root, spec.name)
    assert s["status"] == "completed" and s["spec"]["weight_dtype"] == "bf16"
    assert s["params"]["precision"] == "bf16-autocast"  # a CPU computes a bf16 run under autocast
    rows = [r for r in metrics(root, spec.name) if r.get("train_loss") is not None]
    assert rows[-1]["train_loss"] < rows[0]["train_loss"]  # it learns
    weights = load_file(run_dir(root, spec.name) / "model.safetensors")
    assert {t.dtype for t in weights.values()} == {torch.bfloat16}
    # nGPT's renormalisation after each step holds in bf16: unit rows to bf16's rounding
    norms = weights["embed_in.weight"].float().norm(dim=1)
    assert torch.allclose(norms, torch.ones_like(norms), atol=1e-2)
    model, _ = load_model(run_dir(root, spec.name) / "model.safetensors", expected_arm="ngpt")
    assert {p.dtype for p in model.parameters()} == {torch.float32}  # analysed in fp32, widened exactly
    assert torch.equal(model.embed_in.weight, weights["embed_in.weight"].float())


def test_a_bf16_run_resumes_to_the_uninterrupted_result_and_refuses_fp32_state(uninterrupted, tmp_path,
                                                                               monkeypatch):
    whole, spec = uninterrupted
    root, params, spec = bf16_root(tmp_path, "split")
    monkeypatch.setattr(loop, "StopRequest", StopAfter)
    StopAfter.asks = 0
    assert train_run(spec, params.train, root=root, progress=False) == EXIT_RESUMABLE
    state_dir = run_dir(root, spec.name) / "state"
    latest = json.loads((state_dir / "latest.json").read_text())
    assert 0 < latest["step"] < 12
    moments = load_file(state_dir / latest["checkpoint"] / "optimizer.safetensors")
    assert {moments[k].dtype for k in moments if k.endswith(("exp_avg", "exp_avg_sq"))} == {torch.bfloat16}

    # The same run in fp32 would start from this bf16 state: refused, naming the file and both dtypes.
    fp32 = Params.of(make_params(arms=["ngpt"], budgets=[BUDGET], checkpoint_every_tokens=BUDGET,
                                 eval_every_tokens=4096))
    fp32_spec = RunSpec("cpu-4l", 32, "ngpt", BUDGET, 3e-3, 0)
    shutil.copytree(state_dir, run_dir(root, fp32_spec.name) / "state",
                    ignore=shutil.ignore_patterns(".lock"))
    with pytest.raises(CheckpointError, match=r"model\.safetensors: checkpoint stores its weights and "
                                              r"optimizer state in bf16, this run trains in fp32 "
                                              r"\(train\.weight_dtype\)"):
        train_run(fp32_spec, fp32.train, root=root, progress=False)

    monkeypatch.setattr(loop, "StopRequest", StopRequest)
    assert train_run(spec, params.train, root=root, progress=False) == 0
    s, reference = summary(root, spec.name), summary(whole, spec.name)
    assert s["resumed_from"] == [latest["step"]]
    assert s["final_val_loss"] == reference["final_val_loss"]
    resumed = load_file(run_dir(root, spec.name) / "model.safetensors")
    straight = load_file(run_dir(whole, spec.name) / "model.safetensors")
    assert resumed.keys() == straight.keys() and all(torch.equal(resumed[k], straight[k]) for k in resumed)
    assert (results_dir(root, spec.name) / "metrics.jsonl").read_bytes() == \
        (results_dir(whole, spec.name) / "metrics.jsonl").read_bytes()


# ----------------------------------------------------------------------------------------------------------
# The speed-up compares a dtype's arms with its own baseline; the plan sizes bf16 storage


def test_the_speedup_of_a_bf16_cell_is_against_the_bf16_baseline(tmp_path, monkeypatch):
    params = synthetic.synthetic_params(seeds=(0, 1), budgets=(16384, 65536, 262144))
    params["train"].update(contexts=[64], arms=["gpt", "ngpt"], weight_dtype=["fp32", "bf16"])
    params["speedup"]["reference_budget"] = "largest"  # room above the fp32 speed-up for the bf16 one
    params["train"]["learning_rates"] = {"cpu-4l": {"gpt": [synthetic.BEST_LR], "ngpt": [synthetic.BEST_LR]}}
    planted = synthetic._loss

    def bf16_hurts_gpt(spec, tokens):  # the reference code's warning, planted: bf16 storage hurts GPT more
        return planted(spec, tokens) + (0.3 if (spec.weight_dtype, spec.arm) == ("bf16", "gpt") else 0.0)

    monkeypatch.setattr(synthetic, "_loss", bf16_hurts_gpt)
    params = Params.of(params)
    for spec in enumerate_runs(params):
        synthetic.write_run(tmp_path, spec, params)
    fp32, bf16 = (speedup_cell(params, cell, tmp_path) for cell in ("cpu-4l-ctx64", "cpu-4l-ctx64-bf16"))
    runs = enumerate_runs(params)
    for doc in (fp32, bf16):  # each cell's runs, and only those: one dtype each
        assert sorted(r["run"] for r in doc["runs"]) == sorted(r.name for r in runs if r.cell == doc["cell"])
    assert all("-bf16-" in r["run"] for r in bf16["runs"])
    assert all("-bf16-" not in r["run"] for r in fp32["runs"])
    assert all(r["run"].startswith("cpu-4l-ctx64-bf16-gpt-") for t in bf16["targets"] for r in t["runs"])
    speedup = {doc["cell"]: doc["arms"]["ngpt"]["speedup"]["value"] for doc in (fp32, bf16)}
    assert speedup["cpu-4l-ctx64-bf16"] > 1.5 * speedup["cpu-4l-ctx64"]  # the weaker bf16 baseline


def test_the_plan_sizes_bf16_storage_at_two_bytes_a_value():
    shape, n = SCALES["cpu-4l"], 1_000_000
    fp32 = training_memory("gpt", shape, n, 256, 512, bf16=True)
    bf16 = training_memory("gpt", shape, n, 256, 512, bf16=True, weight_bytes=weight_dtypes.BYTES["bf16"])
    assert (fp32.weights_optimizer, bf16.weights_optimizer) == (16 * n, 8 * n)
    assert bf16.activations == fp32.activations and bf16.head == fp32.head
    assert (state_bytes(n), state_bytes(n, "bf16")) == (12 * n, 6 * n)
    assert (final_checkpoint_bytes(n), final_checkpoint_bytes(n, "bf16")) == (4 * n, 2 * n)
