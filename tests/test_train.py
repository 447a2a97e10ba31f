"""The train stage in-process: schedule, batches, eval windows, outputs, divergence, bad input."""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from support.train import (
    CONTEXT,
    make_params,
    metrics,
    results_dir,
    run_dir,
    run_name,
    summary,
    timing_file,
    write_shards,
)

from ngptlab.checkpoint import load_model, sha256_file
from ngptlab.errors import CheckpointError, DataError, ParamsError
from ngptlab.grid.enumeration import find_run
from ngptlab.schedule import make_schedule, warmup_steps
from ngptlab.settings import Params, of_section
from ngptlab.train.batches import plan_batches
from ngptlab.train.data import batch_offsets, eval_offsets, gather
from ngptlab.train.loop import train_run

torch.set_num_threads(1)


def train(root, params, arm="gpt", budget=8192, lr=3e-3, **kwargs) -> int:
    spec = find_run(Params.of(params), run_name(arm, budget, lr))
    return train_run(spec, Params.of(params).train, root=root, progress=False, **kwargs)


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    """One completed gpt run and one ngpt run of another budget, shared by the output tests."""
    root = tmp_path_factory.mktemp("train")
    write_shards(root)
    params = make_params(budgets=[8192, 4096])
    assert train(root, params, "gpt", 8192) == 0
    assert train(root, params, "ngpt", 4096) == 0
    return root, params


# ----------------------------------------------------------------------------------------------------------
# Pure pieces


def test_schedule_warms_up_then_decays_by_cosine_to_zero_at_the_budget():
    s = make_schedule(100, 10)
    assert s.warmup_steps == 10
    assert [s.factor(i) for i in (0, 4, 9)] == pytest.approx([0.1, 0.5, 1.0])
    assert s.factor(10) == 1.0
    assert s.factor(55) == pytest.approx(0.5)  # halfway through the cosine
    assert s.factor(100) == pytest.approx(0.0, abs=1e-12)
    decay = [s.factor(i) for i in range(10, 101)]
    assert all(a > b for a, b in zip(decay, decay[1:], strict=False))
    nowarm = make_schedule(100, 0)  # nGPT: no warmup, starts at the full lr
    assert nowarm.warmup_steps == 0 and nowarm.factor(0) == 1.0
    with pytest.raises(ValueError, match="no cosine step"):
        make_schedule(3, 3)


def test_warmup_is_a_number_of_steps_capped_for_small_budgets():
    train = of_section("train", {**make_params()["train"], "warmup_steps": 2000, "warmup_max_fraction": 0.5})
    assert warmup_steps(train, 19_073, warms_up=True) == 2000  # the paper's 10B tokens at 1k: 2000 steps
    assert warmup_steps(train, 2_384, warms_up=True) == 1192  # 10B at 8k: capped at half the run
    assert warmup_steps(train, 2_384, warms_up=False) == 0  # nGPT's recipe does not warm up
    assert warmup_steps(replace(train, warmup_steps=5, warmup_max_fraction=1.0), 5, warms_up=True) == 4
    assert warmup_steps(replace(train, warmup_max_fraction=0.1), 8, warms_up=True) == 0


def test_a_context_specific_learning_rate_and_the_warmup_steps_reach_the_run(tmp_path):
    write_shards(tmp_path)
    lrs = {"gpt": {f"ctx{CONTEXT}": [4e-3]}, "ngpt": [3e-3]}  # gpt's sweep given per context
    params = make_params(warmup_steps=4, warmup_max_fraction=0.5, learning_rates={"cpu-4l": lrs})
    assert train(tmp_path, params, "gpt", 8192, lr=4e-3) == 0  # 16 steps: 4 of warmup
    rows = metrics(tmp_path, run_name("gpt", 8192, 4e-3))
    assert [r["lr"] for r in rows[:5]] == pytest.approx([4e-3 * f for f in (0.25, 0.5, 0.75, 1.0, 1.0)])
    s = summary(tmp_path, run_name("gpt", 8192, 4e-3))
    assert s["spec"]["lr"] == 4e-3 and s["params"]["warmup_steps"] == 4


def test_batches_are_a_pure_function_of_seed_and_step():
    a = batch_offsets(10_000, CONTEXT, 16, seed=0, step=7)
    assert np.array_equal(a, batch_offsets(10_000, CONTEXT, 16, seed=0, step=7))
    assert not np.array_equal(a, batch_offsets(10_000, CONTEXT, 16, seed=0, step=8))
    assert not np.array_equal(a, batch_offsets(10_000, CONTEXT, 16, seed=1, step=7))
    assert a.min() >= 0 and a.max() <= 10_000 - CONTEXT - 1
    tokens = np.arange(10_000, dtype=np.uint16)
    x, y = gather(tokens, a[:2], CONTEXT)
    assert x.shape == (2, CONTEXT) and x.dtype == torch.int64
    assert torch.equal(y[:, :-1], x[:, 1:]) and int(x[0, 0]) == a[0]


def test_eval_windows_depend_only_on_eval_seed_and_context():
    w = eval_offsets(8000, CONTEXT, 8, seed=0)
    assert np.array_equal(w, eval_offsets(8000, CONTEXT, 8, seed=0))
    assert not np.array_equal(w, eval_offsets(8000, CONTEXT, 8, seed=1))
    assert not np.array_equal(w, eval_offsets(8000, 2 * CONTEXT, 8, seed=0))
    assert np.all(np.diff(w) >= CONTEXT + 1) and w[-1] + CONTEXT + 1 <= 8000  # distinct, non-overlapping
    with pytest.raises(DataError, match="eval_windows asks for 500"):
        eval_offsets(8000, CONTEXT, 500, seed=0)


def test_global_batch_is_the_same_whatever_the_number_of_processes():
    params = make_params(batch_sequences=32, micro_batch_tokens=256)
    spec = find_run(Params.of(params), run_name())
    one, two = plan_batches(Params.of(params).train, spec, 1), plan_batches(Params.of(params).train, spec, 2)
    assert (one.seqs_global, one.accum_steps, one.steps) == (32, 4, 8)
    assert (two.seqs_global, two.seqs_per_rank, two.accum_steps) == (32, 16, 2)
    assert one.batch_tokens == two.batch_tokens == 1024
    with pytest.raises(ParamsError, match="cannot be split evenly over 3 processes"):
        plan_batches(Params.of(params).train, spec, 3)


# ----------------------------------------------------------------------------------------------------------
# A completed run


def test_completed_run_writes_the_contract(done):
    root, params = done
    name = run_name("gpt", 8192)
    s = summary(root, name)
    assert s["status"] == "completed" and s["run"] == name and s["diagnostics"] is None
    assert s["spec"] == {"scale": "cpu-4l", "context": CONTEXT, "arm": "gpt", "budget": 8192, "lr": 3e-3,
                         "seed": 0}
    assert (s["tokens"], s["steps"]) == (8192, 16)
    assert s["train_flops"] == pytest.approx(s["flops_per_token"] * 8192)
    meta = json.loads((root / "data/tokens/synthetic/meta.json").read_text())
    assert s["data"] == {"source": "synthetic", "train_sha256": meta["splits"]["train"]["sha256"],
                         "val_sha256": meta["splits"]["val"]["sha256"]}
    assert s["params"]["warmup_steps"] == 2 and s["params"]["grad_accum_steps"] == 2
    assert s["checkpoint_sha256"] == sha256_file(run_dir(root, name) / "model.safetensors")
    assert not (run_dir(root, name) / "state").exists()  # resumable state removed once done

    rows = metrics(root, name)
    assert [r["step"] for r in rows] == list(range(1, 17))
    assert all({"step", "tokens", "train_loss", "lr", "grad_norm"} <= set(r) for r in rows)
    # Timings differ between identical runs: they live in results/timing/, which only the report reads.
    assert not any("tokens_per_s" in r or "mfu" in r for r in rows) and "wall_s" not in s
    timing = json.loads(timing_file(root, name).read_text())
    assert timing["wall_s"] > 0 and [r["step"] for r in timing["rows"]] == list(range(1, 17))
    assert all(r["tokens_per_s"] > 0 for r in timing["rows"])
    # the run's mean throughput over its step time; no MFU on a CPU without a declared peak
    assert timing["tokens_per_s"] == pytest.approx(8192 / timing["train_s"], rel=1e-4)
    assert 0 < timing["train_s"] <= timing["wall_s"] and timing["flops_per_token"] == s["flops_per_token"]
    assert timing["mfu"] is None and timing["peak_tflops"] is None
    assert timing["peak_source"].startswith("unknown (cpu)") and timing["device_name"] == "cpu"
    assert [r["tokens"] for r in rows if "val_loss" in r] == [2048, 4096, 6144, 8192]
    # the curve's last point is the cheap eval windows' loss; final_val_loss, the final evaluation's
    # (tests/test_final_eval.py): close, not equal
    assert abs(rows[-1]["val_loss"] - s["final_val_loss"]) < 0.5
    assert rows[-1]["train_loss"] < rows[0]["train_loss"] - 0.5  # it learned
    assert s["final_val_loss"] < math.log(256) - 0.5

    model, config = load_model(run_dir(root, name) / "model.safetensors", expected_arm="gpt")
    assert config["spec"] == s["spec"] and config["data"] == s["data"] and config["train"] == s["params"]
    assert json.loads((run_dir(root, name) / "config.json").read_text()) == config


def test_eval_windows_are_identical_across_arms_and_budgets(done):
    root, _ = done
    gpt, ngpt = summary(root, run_name("gpt", 8192)), summary(root, run_name("ngpt", 4096))
    val = np.memmap(root / "data/tokens/synthetic/val.bin", dtype=np.uint16, mode="r")
    expected = hashlib.sha256(eval_offsets(len(val), CONTEXT, 8, seed=0).tobytes()).hexdigest()
    assert gpt["eval_windows_sha256"] == ngpt["eval_windows_sha256"] == expected
    assert ngpt["params"]["warmup_steps"] == 0  # the nGPT recipe does not warm up


def test_rerun_of_a_finished_run_is_a_no_op(done):
    root, params = done
    files = [p for p in (root / "runs").rglob("*") if p.is_file()] + list((root / "results").rglob("*.json*"))
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in files}
    assert train(root, params, "gpt", 8192) == 0
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in files} == before


def test_a_run_finished_before_timing_files_existed_gets_an_unmeasured_one(done):
    root, params = done
    name = run_name("ngpt", 4096)
    timing = timing_file(root, name)
    timing.unlink()  # as an older run left it: every other output, no timing file
    # (an nGPT run: its own warmup is 0, not train.warmup_steps, and it still counts as this run, done)
    summary_before = (results_dir(root, name) / "summary.json").read_bytes()
    assert train(root, params, "ngpt", 4096) == 0
    assert json.loads(timing.read_text()) == {"run": name, "tokens_per_s": None, "mfu": None,
                                              "note": "not measured: the run finished before timing files "
                                                      "existed"}
    assert (results_dir(root, name) / "summary.json").read_bytes() == summary_before


def test_the_settings_of_how_a_run_runs_change_none_of_its_bytes_and_its_timing_records_them(done, tmp_path):
    """A checkpoint every step, no TensorBoard events, a job clock, other Slurm resources, a declared peak:
    the weights (header included), config, summary and metrics are those of the run trained without them."""
    root, _ = done
    name = run_name("gpt", 8192)
    execution = {"checkpoint_every_tokens": 512, "tensorboard": False, "max_job_minutes": 600.0,
                 "checkpoint_write_gbps": 2.0, "signal_lead_s": 300, "max_restarts": 2, "peak_tflops": 1.0}
    resources = {"nodes": 1, "gpus": 0, "processes": 1, "mem_mb": 4000, "runtime_min": 30}
    write_shards(tmp_path)
    other = make_params(budgets=[8192, 4096], **execution, resources={"cpu-4l": resources})
    assert train(tmp_path, other, "gpt", 8192) == 0
    for path in (run_dir(Path(), name) / "model.safetensors", run_dir(Path(), name) / "config.json",
                 results_dir(Path(), name) / "summary.json", results_dir(Path(), name) / "metrics.jsonl"):
        assert (tmp_path / path).read_bytes() == (root / path).read_bytes(), path
    assert not (run_dir(tmp_path, name) / "tensorboard").exists()
    assert json.loads(timing_file(tmp_path, name).read_text())["execution"] == {**execution,
                                                                                "resources": resources}
    assert json.loads(timing_file(root, name).read_text())["execution"] == {
        "checkpoint_every_tokens": 4096, "tensorboard": True, "max_job_minutes": None,
        "checkpoint_write_gbps": 0.5, "signal_lead_s": None, "max_restarts": 0, "peak_tflops": None,
        "resources": {"nodes": 1, "gpus": 0, "processes": 1, "mem_mb": 2000, "runtime_min": 10}}


def test_finished_outputs_of_other_settings_are_not_overwritten(done):
    root, params = done
    other = make_params(budgets=[8192, 4096], grad_clip=0.5)
    before = (results_dir(root, run_name("gpt", 8192)) / "summary.json").read_bytes()
    with pytest.raises(CheckpointError, match=r"outputs of .* exist for other settings "
                                              r"\(train\.grad_clip differs"):
        train(root, other, "gpt", 8192)
    assert (results_dir(root, run_name("gpt", 8192)) / "summary.json").read_bytes() == before


# ----------------------------------------------------------------------------------------------------------
# Faults


def test_a_huge_learning_rate_ends_as_diverged_with_diagnostics(tmp_path):
    write_shards(tmp_path)
    params = make_params(learning_rates={"cpu-4l": {"gpt": [10.0], "ngpt": [3e-3]}})
    assert train(tmp_path, params, "gpt", 8192, lr=10.0) == 0  # the DAG goes on
    name = run_name("gpt", 8192, 10.0)
    s = summary(tmp_path, name)
    assert s["status"] == "diverged" and s["final_val_loss"] is None
    d = s["diagnostics"]
    assert d["step"] < 16 and s["steps"] == d["step"] and s["tokens"] == d["step"] * 512
    assert "diverge_loss" in d["reason"] or "nan" in d["reason"] or "inf" in d["reason"]
    assert not isinstance(d["loss"], float) or d["loss"] > 20.0
    # which matrix kinds blew up: every kind's gradient norm at the failed step, the blown-up ones named
    kinds = d["grad_norm_by_kind"]
    assert set(kinds) == {"embed_in", "embed_out", "q", "k", "v", "o", "mlp_u", "mlp_v", "mlp_o"}
    assert d["blew_up"] and set(d["blew_up"]) <= set(kinds)
    finite = {k: n for k, n in kinds.items() if isinstance(n, float)}
    if len(finite) == len(kinds):  # all finite: the largest and those within x2 of it
        assert max(finite, key=finite.get) in d["blew_up"]
        assert all(finite[k] >= max(finite.values()) / 2 for k in d["blew_up"])
    else:
        assert set(d["blew_up"]) == set(kinds) - set(finite)
    model, _ = load_model(run_dir(tmp_path, name) / "model.safetensors")  # last finite weights
    assert all(torch.isfinite(p).all() for p in model.parameters())
    rows = metrics(tmp_path, name)
    assert rows[-1]["diverged"] is True and rows[-1]["step"] == d["step"] + 1  # the failed step, logged
    assert all("diverged" not in r for r in rows[:-1])


def test_a_shape_defined_in_params_trains_end_to_end_and_reloads(tmp_path):
    write_shards(tmp_path)
    shape = {"n_layer": 2, "d_model": 48, "n_head": 6, "mlp_ratio": 2.5}  # no named scale has this shape
    params = make_params(shapes={"w48-2l": shape}, scales=["w48-2l"],
                         learning_rates={"w48-2l": {"gpt": [3e-3], "ngpt": [3e-3]}},
                         resources={"w48-2l": {"gpus": 0, "processes": 1, "mem_mb": 1000, "runtime_min": 10}})
    spec = find_run(Params.of(params), f"w48-2l-ctx{CONTEXT}-gpt-t8192-lr0.003-s0")
    assert train_run(spec, Params.of(params).train, root=tmp_path, progress=False) == 0
    s = summary(tmp_path, spec.name)
    assert s["status"] == "completed" and s["spec"]["scale"] == "w48-2l"
    model, config = load_model(run_dir(tmp_path, spec.name) / "model.safetensors", expected_arm="gpt")
    assert config["shape"] == shape
    assert len(model.layers) == 2 and model.layers[0].mlp.u.weight.shape == (120, 48)


def test_a_corrupt_shard_is_refused_before_anything_is_written(tmp_path):
    shards = write_shards(tmp_path)
    data = bytearray((shards / "val.bin").read_bytes())
    data[100] ^= 0xFF
    (shards / "val.bin").write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"val\.bin: sha256 .* does not match meta\.json"):
        train(tmp_path, make_params())
    assert not (tmp_path / "results").exists()
    assert not list((tmp_path / "runs").rglob("*.safetensors"))


def test_a_val_shard_too_small_for_the_eval_windows_is_a_clear_error(tmp_path):
    write_shards(tmp_path)
    with pytest.raises(DataError, match="val shard has 8000 tokens"):
        train(tmp_path, make_params(eval_windows=1000))


def test_token_ids_beyond_the_vocabulary_are_a_data_error(tmp_path):
    write_shards(tmp_path, vocab=256)
    meta_path = tmp_path / "data/tokens/synthetic/meta.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "vocab_size": 200}))  # the shards hold ids up to 255
    with pytest.raises(DataError, match=r"token id 2\d\d .* vocab_size 200"):
        train(tmp_path, make_params())


def test_a_run_already_in_progress_is_not_trained_twice(tmp_path):
    write_shards(tmp_path)
    state = run_dir(tmp_path, run_name()) / "state"
    state.mkdir(parents=True)
    with open(state / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ParamsError, match="already being trained by another process"):
            train(tmp_path, make_params())


def test_bench_step_times_every_arm_against_gpt():
    from ngptlab.bench.step import format_table, run_step_bench

    rows = run_step_bench(["ngpt", "gpt-orth"], "cpu-4l", 16, 64, torch.device("cpu"), steps=2, warmup=1,
                          vocab_size=64)
    assert [r["arm"] for r in rows] == ["gpt", "ngpt", "gpt-orth"]  # gpt first, the reference
    assert rows[0]["ratio_vs_gpt"] == 1.0
    for r in rows:
        assert r["median_ms"] > 0 and r["tokens_per_s"] == pytest.approx(64 / (r["median_ms"] / 1e3))
        assert r["ratio_vs_gpt"] == pytest.approx(r["median_ms"] / rows[0]["median_ms"]) and r["mfu"] is None
    assert format_table(rows).count("\n") == 4


def test_mfu_divides_by_a_declared_peak_and_detects_none_on_cpu():
    from ngptlab.train.throughput import detect_peak, mfu

    cpu = torch.device("cpu")
    assert detect_peak(cpu).flops is None and mfu(6e9, 1e4, cpu) is None
    declared = detect_peak(cpu, declared_tflops=2.0)
    assert (declared.flops, declared.source) == (2e12, "declared")
    # 6 GFLOP/token x 100 tokens/s = 0.6 TFLOP/s of a 2 TFLOP/s peak, over 2 devices: 15%
    assert mfu(6e9, 100.0, cpu, world_size=2, declared_tflops=2.0) == pytest.approx(0.15)
