"""`ngptlab bench gpu` on a CPU at tiny shapes: every check runs and every number it writes is finite."""

from __future__ import annotations

import json
import math

import pytest
from test_train_support import SOURCE, make_params, write_params, write_shards

from ngptlab.cli import main


def _numbers(obj):
    if isinstance(obj, dict):
        for value in obj.values():
            yield from _numbers(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _numbers(value)
    elif isinstance(obj, float | int) and not isinstance(obj, bool):
        yield obj


def bench(tmp_path, capsys, *extra: str) -> tuple[dict, str]:
    write_shards(tmp_path)
    params = write_params(tmp_path, make_params())
    out = tmp_path / "gpu.json"
    code = main(["bench", "gpu", "--params", str(params), "--device", "cpu", "--arms", "gpt", "ngpt",
                 "--contexts", "16", "--batch-tokens", "64", "--steps", "2", "--peak-tflops", "1",
                 "--tokens", str(tmp_path / "data" / "tokens" / SOURCE), "--out", str(out), *extra])
    printed = capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert code == 0 and doc["failures"] == [], printed
    assert all(math.isfinite(x) for x in _numbers(doc))
    return doc, printed


def test_bench_gpu_eager_on_cpu_writes_every_field_finite(tmp_path, capsys):
    doc, printed = bench(tmp_path, capsys, "--no-compile", "--before")
    assert doc["peak_source"] == "declared" and doc["peak_tflops"] == 1.0
    rows = doc["steps"]["rows"]
    assert [(r["mode"], r["arm"]) for r in rows] == [("eager", "gpt"), ("eager", "ngpt"),
                                                     ("eager", "ngpt@before")]
    for r in rows:
        assert set(r) == {"context", "mode", "arm", "median_ms", "ratio_vs_gpt", "tokens_per_s", "mfu",
                          "peak_memory_mb", "loss"}
        assert all(r[k] is not None and math.isfinite(r[k]) for k in r if k not in ("mode", "arm"))
        assert r["median_ms"] > 0 and 0 < r["mfu"] and r["peak_memory_mb"] >= 0
    assert [r["ratio_vs_gpt"] for r in rows if r["arm"] == "gpt"] == [1.0]
    assert not doc["train"]["bf16_compiled"]
    for arm in ("gpt", "ngpt"):
        a = doc["train"]["arms"][arm]
        assert len(a["bf16_losses"]) == len(a["fp32_eager_losses"]) == doc["train"]["steps"] == 12
        assert a["within_tolerance"] and a["loss_fell"]
    assert "needs 2+ GPUs" in doc["train"]["ddp"]["skipped"]
    assert doc["condition"]["seconds"] > 0 and doc["condition"]["matrices"] == 2 * 7 + 2
    assert "| 16 | eager | ngpt |" in printed


@pytest.mark.slow  # four torch.compile's of a model on 2 CPU cores and a torchrun: minutes
def test_bench_gpu_compiled_and_ddp_on_cpu(tmp_path, capsys):
    doc, printed = bench(tmp_path, capsys, "--ddp-cpu")
    rows = doc["steps"]["rows"]
    assert [(r["mode"], r["arm"]) for r in rows] == [("eager", "gpt"), ("eager", "ngpt"),
                                                     ("compiled", "gpt"), ("compiled", "ngpt")]
    assert [r["ratio_vs_gpt"] for r in rows if r["arm"] == "gpt"] == [1.0, 1.0]  # each mode its own gpt
    assert doc["train"]["bf16_compiled"]
    assert all(a["within_tolerance"] and a["loss_fell"] for a in doc["train"]["arms"].values())
    assert doc["train"]["ddp"]["backend"] == "gloo" and doc["train"]["ddp"]["equal"]
    assert "| 16 | compiled | ngpt |" in printed


def test_bench_gpu_orders_compilations_so_a_budget_cuts_the_least_needed():
    from ngptlab.bench.gpu import step_jobs

    jobs = step_jobs(["gpt", "ngpt", "gpt-orth"], [1024, 4096], ("eager", "compiled"), compile_all=False)
    assert jobs == [(1024, "eager", "gpt"), (1024, "eager", "ngpt"), (1024, "eager", "gpt-orth"),
                    (4096, "eager", "gpt"), (4096, "eager", "ngpt"), (4096, "eager", "gpt-orth"),
                    (1024, "compiled", "gpt"), (1024, "compiled", "ngpt"),
                    (4096, "compiled", "gpt"), (4096, "compiled", "ngpt"),
                    (1024, "compiled", "gpt-orth")]
    every = step_jobs(["gpt", "gpt-orth"], [1024, 4096], ("eager", "compiled"), compile_all=True)
    assert (4096, "compiled", "gpt-orth") in every and len(every) == 8


def test_bench_gpu_skips_past_its_budget_but_keeps_gpt(capsys):
    import torch

    from ngptlab.bench.gpu import TINY, time_steps

    rows, skipped = time_steps(["gpt", "ngpt"], TINY, [16, 32], 64, 64, torch.device("cpu"), steps=1,
                               warmup=0, peak_flops=None, compile_all=False, modes=("eager",), budget_s=0.0)
    assert [(r["context"], r["arm"]) for r in rows] == [(16, "gpt"), (32, "gpt")]
    assert skipped == ["ctx 16 eager ngpt", "ctx 32 eager ngpt"]
