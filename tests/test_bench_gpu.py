"""`ngptlab bench gpu` on a CPU at tiny shapes: every check runs, every verdict follows its threshold, and
each check fails where it should (a planted threshold or measurement), with the exit status that follows.

One full run (module fixture) trains every check's runs once; the planted failures re-judge its document
(bench/checks.py's judge is a pure function of the measurements and the thresholds), so they cost nothing.
"""

from __future__ import annotations

import copy
import json
import math

import pytest
import yaml
from support import TEST_PARAMS
from support.train import REPO, SOURCE, make_params, write_params, write_shards

from ngptlab.bench import checks
from ngptlab.bench.checks import EXIT_FAILED, EXIT_NOT_PROVEN, EXIT_PASSED, FAIL, NOT_PROVEN, PASS
from ngptlab.bench.gpu_parts import DEFAULT_PARTS, H100_BUDGET_S, PARTS
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


def bench(root, capsys, *extra: str) -> tuple[int, dict, str]:
    write_shards(root)
    params = write_params(root, make_params())
    out = root / "gpu.json"
    code = main(["bench", "gpu", "--params", str(params), "--device", "cpu", "--arms", "gpt", "ngpt",
                 "--contexts", "32", "--batch-tokens", "64", "--vocab-size", "256", "--steps", "2",
                 "--peak-tflops", "1",
                 "--tokens", str(root / "data" / "tokens" / SOURCE), "--write", str(out), *extra])
    printed = capsys.readouterr().out
    return code, json.loads(out.read_text()), printed


@pytest.fixture(scope="module")
def full(tmp_path_factory, one_torch_thread):
    """Every check, compiled, with the 2-process gloo DDP run: what a CPU rehearsal writes (one torch
    thread: at these shapes a second one only waits, and on a loaded 2-core machine it stalls every op)."""
    root = tmp_path_factory.mktemp("bench-gpu")
    write_shards(root)
    params = write_params(root, make_params())
    out = root / "gpu.json"
    code = main(["bench", "gpu", "--params", str(params), "--device", "cpu", "--arms", "gpt", "ngpt",
                 "--contexts", "32", "--batch-tokens", "64", "--vocab-size", "256", "--steps", "2",
                 "--peak-tflops", "1", "--parts", ",".join(PARTS),
                 "--ddp-cpu", "--tokens", str(root / "data" / "tokens" / SOURCE), "--write", str(out)])
    return code, json.loads(out.read_text())


def thresholds(doc: dict, **changes) -> checks.Thresholds:
    return checks.Thresholds(**{**doc["thresholds"], **changes})


def verdicts(doc: dict, check: str, **changes) -> list[dict]:
    return [v for v in checks.judge(doc, thresholds(doc, **changes)) if v["check"] == check]


def statuses(doc: dict, check: str, **changes) -> set[str]:
    return {v["status"] for v in verdicts(doc, check, **changes)}


def test_a_cpu_rehearsal_runs_every_check_and_exits_3_for_what_a_cpu_cannot_prove(full):
    code, doc = full
    assert code == doc["exit_code"] == EXIT_NOT_PROVEN and doc["failures"] == []
    assert all(math.isfinite(x) for x in _numbers(doc))
    by_check: dict[str, set[str]] = {}
    for v in doc["checks"]:
        by_check.setdefault(v["check"], set()).add(v["status"])
    passing = ("finite", "agreement", "falls", "trajectory", "bf16", "angles", "path ddp", "path resume",
               "ddp", "condition")
    for check in passing:
        assert by_check[check] == {PASS}, (check, doc["checks"])
    assert by_check["compile"] == by_check["mfu"] == by_check["memory"] == {NOT_PROVEN}
    assert by_check["path checkpointing"] == {PASS, NOT_PROVEN}  # its memory needs a GPU's allocator
    rows = doc["steps"]["rows"]
    assert [(r["mode"], r["arm"]) for r in rows] == [("eager", "gpt"), ("eager", "ngpt"),
                                                     ("compiled", "gpt"), ("compiled", "ngpt")]
    assert all(r["memory_estimate_mb"] > 0 and r["reserved_memory_mb"] is None for r in rows)
    assert all((r["compile_s"] is None) == (r["mode"] == "eager") for r in rows)  # compiled rows: seconds
    assert all(r["first_step_s"] > r["compile_s"] for r in rows if r["mode"] == "compiled")
    assert [p for p, v in doc["parts"].items() if v["status"] == "measured"] == list(PARTS)
    assert set(doc["estimate"]["parts"]) == set(PARTS) and doc["estimate"]["constants"]["compile_cold_s"] > 0
    memory = doc["memory"]["rows"]  # every preset arm at 3 cells, gpt-lrm checkpointed where paper's does
    assert {r["arm"] for r in memory} >= {"gpt", "ngpt", "gpt-lrm", "gpt-angle", "ngpt-angle"}
    assert len(memory) == 3 * len({r["arm"] for r in memory}) and not any(r["out_of_memory"] for r in memory)
    # auto checkpoints where the plan puts a run over the card: gpt-lrm's multipliers, gpt-pc4's PC iterates
    assert {(r["arm"], r["cell"]) for r in memory if r["checkpointing"]} == {("gpt-lrm", "1B-ctx8192"),
                                                                             ("gpt-pc4", "1B-ctx8192")}
    assert set(doc["bf16"]["arms"]) == {"gpt", "ngpt"}
    for arm, a in doc["angles"]["arms"].items():  # every turned kind near the target (gpt-angle: 8, ngpt: 9)
        assert len(a["realised_rad"]) == {"gpt-angle": 8, "ngpt-angle": 9}[arm]
        assert a["max_relative_error"] < 0.05
    t = doc["first-light"]
    assert t["bf16_compiled"] and t["arms"]["gpt"]["steps"] == 12 and t["arms"]["ngpt"]["steps"] == 100
    assert {a["grad_accum_steps"] for a in t["arms"].values()} == {2}
    assert all(a["compile_s"] is not None for a in t["arms"].values())
    p = doc["path"]
    assert p["ddp"]["backend"] == "gloo" and p["ddp"]["world_size"] == 1 and p["ddp"]["grad_accum_steps"] == 2
    assert p["resume"]["first_exit"] == 75 and p["resume"]["resumed_from"] == [6]
    assert p["resume"]["max_abs_diff"] == 0 and p["resume"]["weights_equal"]  # exact on a CPU
    assert p["checkpointing"]["applied"] and p["checkpointing"]["max_abs_diff_first_steps"] < 0.01
    assert doc["ddp"]["backend"] == "gloo" and doc["ddp"]["processes"] == 2
    assert doc["condition"]["matrices"] == 2 * 7 + 2 and doc["condition"]["finite"]


def test_compiled_slower_than_eager_fails_once_a_threshold_is_stated(full):
    _, doc = full
    assert statuses(doc, "compile", compile_max_ratio=1e9) == {PASS}
    assert statuses(doc, "compile", compile_max_ratio=1e-9) == {FAIL}  # "compiled must be 1e9x faster"
    assert checks.exit_code(checks.judge(doc, thresholds(doc, compile_max_ratio=1e-9))) == EXIT_FAILED


def test_an_mfu_under_its_floor_fails_and_floors_are_stated_per_gpu_model(full):
    _, doc = full
    assert statuses(doc, "mfu", mfu_floor=1e9) == {FAIL}
    assert statuses(doc, "mfu", mfu_floor=0.0) == {PASS}
    assert checks.mfu_floor("NVIDIA H100 80GB HBM3", checks.MFU_SHAPE) == (0.35, "MFU_FLOORS[H100]")
    assert checks.mfu_floor("NVIDIA GH200 480GB", checks.MFU_SHAPE)[1] == "MFU_FLOORS[GH200]"
    assert checks.mfu_floor("NVIDIA H200", ("gpu-small", 16384))[0] is None  # no floor at another shape
    assert checks.mfu_floor("Tesla T4", checks.MFU_SHAPE)[0] is None


def test_thresholds_by_device_gpu_defaults_and_cpu_not_proven():
    import argparse

    parser = argparse.ArgumentParser()
    checks.configure(parser)
    gpu = checks.resolve(parser.parse_args([]), "cuda", "NVIDIA H200", checks.MFU_SHAPE)
    assert (gpu.compile_max_ratio, gpu.mfu_floor, gpu.memory_headroom) == (1.0, 0.35, 0.25)
    assert (gpu.same_run_tolerance, gpu.ddp_tolerance, gpu.condition_max_s) == (0.02, 1e-3, 600.0)
    cpu = checks.resolve(parser.parse_args([]), "cpu", "cpu", ("bench-tiny", 256))
    assert cpu.compile_max_ratio is cpu.mfu_floor is cpu.memory_headroom is None
    stated = checks.resolve(parser.parse_args(["--mfu-floor", "0.2", "--memory-headroom", "0"]), "cpu", "cpu",
                            None)
    assert (stated.mfu_floor, stated.memory_headroom) == (0.2, 0.0)


def test_peak_memory_over_the_estimate_and_its_headroom_fails(full):
    _, doc = full
    row = {**doc["steps"]["rows"][0], "memory_estimate_mb": 10.0, "peak_memory_mb": 11.0}
    t = thresholds(doc, memory_headroom=0.0)
    assert checks.judge_memory(row, t)["status"] == FAIL  # a headroom of 0 against a planted estimate
    assert checks.judge_memory(row, thresholds(doc, memory_headroom=0.2))["status"] == PASS
    gpu_row = {**row, "reserved_memory_mb": 13.0}  # the reserved peak is judged too
    assert checks.judge_memory(gpu_row, thresholds(doc, memory_headroom=0.2))["status"] == FAIL
    assert checks.judge_memory(row, thresholds(doc, memory_headroom=None))["status"] == NOT_PROVEN


def test_bf16_losses_off_fp32_fail_at_a_tolerance_of_zero(full):
    _, doc = full
    assert statuses(doc, "agreement", loss_tolerance=0.0) == {FAIL}
    assert statuses(doc, "trajectory", trajectory_tolerance=0.0) == {FAIL}
    assert statuses(doc, "falls", loss_drop=100.0) == {FAIL}


def test_the_presets_path_fails_on_a_planted_fault(full):
    _, doc = full
    assert statuses(doc, "path checkpointing", checkpointing_tolerance=0.0) == {FAIL, NOT_PROVEN}
    planted = copy.deepcopy(doc)
    planted["path"]["ddp"]["grad_accum_steps"] = 1  # no micro-batch under no_sync
    planted["path"]["resume"]["first_exit"] = 0  # the SIGTERM did not stop it
    planted["path"]["checkpointing"]["applied"] = False
    assert statuses(planted, "path ddp") == statuses(planted, "path resume") == {FAIL}
    assert FAIL in statuses(planted, "path checkpointing")
    lost = copy.deepcopy(doc)
    lost["path"]["resume"]["max_abs_diff"] = 0.01  # a resumed loss off the uninterrupted one
    lost["path"]["ddp"]["max_abs_diff"] = None  # a step lost or repeated
    assert statuses(lost, "path resume") == statuses(lost, "path ddp") == {FAIL}


def test_ddp_and_condition_fail_past_their_thresholds_and_skips_are_not_proven(full):
    _, doc = full
    planted = copy.deepcopy(doc)
    planted["ddp"]["max_abs_loss_diff"] = 1.0
    assert statuses(planted, "ddp") == {FAIL}
    assert statuses(doc, "condition", condition_max_s=0.0) == {FAIL}
    skipped = copy.deepcopy(doc)
    skipped["ddp"] = {"skipped": "needs 2+ GPUs, 1 visible"}
    del skipped["condition"]
    assert statuses(skipped, "ddp") == statuses(skipped, "condition") == {NOT_PROVEN}


def test_the_exit_status_is_0_only_when_every_check_passed(full):
    _, doc = full
    proven = copy.deepcopy(doc)
    proven["path"]["checkpointing"].update(peak_mb=1.0, reference_peak_mb=2.0)  # as a GPU measures it
    generous = thresholds(doc, compile_max_ratio=1e9, mfu_floor=0.0, memory_headroom=1e9)
    assert checks.exit_code(checks.judge(proven, generous)) == EXIT_PASSED
    assert checks.exit_code(checks.judge(doc, generous)) == EXIT_NOT_PROVEN
    verdict = {"check": "x", "subject": "y", "value": None, "threshold": "", "note": ""}
    assert checks.exit_code([verdict | {"status": FAIL}, verdict | {"status": NOT_PROVEN}]) == EXIT_FAILED


def test_device_auto_without_a_gpu_exits_2_with_one_line(capsys):
    assert main(["bench", "gpu", "--params", str(TEST_PARAMS)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "no GPU found" in lines[0] and "--device cpu" in lines[0]


def test_a_failed_threshold_exits_1_naming_it(tmp_path, capsys):
    code, doc, printed = bench(tmp_path, capsys, "--no-compile", "--before", "--parts", "steps",
                               "--mfu-floor", "1e9")
    assert code == EXIT_FAILED and doc["exit_code"] == EXIT_FAILED
    assert [r["arm"] for r in doc["steps"]["rows"]] == ["gpt", "ngpt", "ngpt@before"]
    assert "FAILED: mfu gpt ctx 32 eager" in printed and "-> exit 1" in printed
    assert {v["check"]: v["status"] for v in doc["checks"]}["first-light"] == NOT_PROVEN  # not asked for
    assert "ngpt/gpt eager" in printed and "reference on H200: 1.95x" in printed


def test_bench_gpu_orders_compilations_so_a_budget_cuts_the_least_needed():
    from ngptlab.bench.gpu_sizes import step_jobs

    jobs = step_jobs(["gpt", "ngpt", "gpt-orth"], [1024, 4096], ("eager", "compiled"), compile_all=False)
    assert jobs == [(1024, "eager", "gpt"), (1024, "eager", "ngpt"), (1024, "eager", "gpt-orth"),
                    (4096, "eager", "gpt"), (4096, "eager", "ngpt"), (4096, "eager", "gpt-orth"),
                    (1024, "compiled", "gpt"), (1024, "compiled", "ngpt"),
                    (4096, "compiled", "gpt"), (4096, "compiled", "ngpt"),
                    (1024, "compiled", "gpt-orth")]
    every = step_jobs(["gpt", "gpt-orth"], [1024, 4096], ("eager", "compiled"), compile_all=True)
    assert (4096, "compiled", "gpt-orth") in every and len(every) == 8


def test_arms_past_the_step_budget_are_skipped_and_not_proven(full):
    import torch

    from ngptlab.bench.gpu import TINY
    from ngptlab.bench.gpu_steps import time_steps

    rows, skipped = time_steps(["gpt", "ngpt"], TINY, [16, 32], 64, 64, torch.device("cpu"), steps=1,
                               warmup=0, peak_flops=None, compile_all=False, modes=("eager",), budget_s=0.0)
    assert [(r["context"], r["arm"]) for r in rows] == [(16, "gpt"), (32, "gpt")]
    assert skipped == ["ctx 16 eager ngpt", "ctx 32 eager ngpt"]
    s = {"rows": rows, "skipped": skipped, "budget_s": 0.0}
    judged = checks.judge_steps(s, thresholds(full[1]))
    assert [v["status"] for v in judged if v["check"] == "skipped"] == [NOT_PROVEN, NOT_PROVEN]


def test_the_first_light_preset_fits_10_gpu_minutes_and_its_header_states_its_plan(capsys):
    # the preset a short GPU allowance runs after `bench gpu`: its plan total, as its header quotes it
    preset = REPO / "workflow" / "presets" / "first-light.yaml"
    assert main(["plan", "--params", str(preset), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["total_gpu_hours"] * 60 <= 10 and plan["mfu"] == 0.4 and plan["peak_tflops"] == 989.0
    assert {r["arm"] for r in plan["runs"]} == {"gpt", "ngpt", "gpt-orth"}
    assert main(["plan", "--params", str(preset)]) == 0
    total = capsys.readouterr().out.strip().splitlines()[-1]
    assert total.endswith("GPU-hours at 40% MFU of 989 TFLOP/s")
    lines = [n for n, line in enumerate(preset.read_text().splitlines(), 1) if "GPU-hours" in line]
    assert total in preset.read_text(), (f"workflow/presets/first-light.yaml, lines {lines}: quote the "
                                         f"plan's total as `ngptlab plan` prints it: '{total}'")
    params = yaml.safe_load(preset.read_text())
    assert params["prepare"]["source"]["kind"] == "embedded"  # prepares with no internet (data/cache/pip)


def test_the_default_parts_fit_8_minutes_of_one_h100_by_the_estimate():
    import argparse

    from ngptlab.bench import gpu
    from ngptlab.config.load import read_mapping

    parser = argparse.ArgumentParser()
    gpu.configure(parser)
    sizes = gpu.sizes_of(parser.parse_args([]), read_mapping(REPO / "params.yaml"), gpu=True)
    seconds = {part: sizes.work(part).seconds() for part in PARTS}
    assert sum(seconds[p] for p in DEFAULT_PARTS) < H100_BUDGET_S == 480
    assert DEFAULT_PARTS == PARTS[:5] and all(s > 0 for p, s in seconds.items() if p != "ddp")  # ddp: 1 GPU
    assert sizes.work("steps").cold_graphs == 2  # gpt and ngpt compiled at 0.5B, context 1k
    docs = (REPO / "docs" / "gpus.md").read_text()  # the totals docs/gpus.md quotes
    assert f"come to about {sum(seconds[p] for p in DEFAULT_PARTS):.0f} s" in docs
    assert f"path and condition add about {seconds['path'] + seconds['condition']:.0f} s" in docs


def test_a_part_whose_estimate_does_not_fit_the_deadline_is_not_begun(tmp_path, capsys):
    code, doc, printed = bench(tmp_path, capsys, "--parts", "steps,angles", "--deadline-s", "60")
    assert "estimate on one H100 SXM" in printed.splitlines()[0]  # printed before it starts
    steps = doc["parts"]["steps"]  # two graphs compiled: 80 s by the estimate
    assert steps["status"] == "not run" and "does not fit the" in steps["why"] and "steps" not in doc
    assert doc["parts"]["angles"]["status"] == "measured" and code == EXIT_NOT_PROVEN and doc["complete"]
    notes = {v["check"]: v["note"] for v in doc["checks"] if v["status"] == NOT_PROVEN}
    assert "--deadline-s 60" in notes["steps"] and "--parts path" in notes["path"]


def test_later_calls_add_their_parts_to_the_json_and_refuse_one_from_elsewhere(tmp_path, capsys):
    bench(tmp_path, capsys, "--parts", "angles")
    code, doc, _ = bench(tmp_path, capsys, "--parts", "steps,path", "--no-compile")
    assert "angles" in doc and "steps" in doc and doc["parts"]["angles"]["status"] == "measured"
    assert "needs first-light" in doc["parts"]["path"]["why"]  # path compares with first-light's run
    first = doc["angles"]
    _, again, _ = bench(tmp_path, capsys, "--parts", "angles")
    assert again["replaced"][0] == {"part": "angles", "measured": first, "status": doc["parts"]["angles"]}
    elsewhere = {**again, "torch": "0.0"}
    (tmp_path / "gpu.json").write_text(json.dumps(elsewhere))
    assert main(["bench", "gpu", "--params", str(TEST_PARAMS), "--device", "cpu", "--parts", "angles",
                 "--write", str(tmp_path / "gpu.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "torch 0.0" in err[0] and "cannot be merged" in err[0]


def test_the_json_is_written_after_each_part_so_a_call_cut_short_keeps_it(tmp_path, capsys, monkeypatch):
    from ngptlab.bench import gpu_runs

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # the call cut short during first-light

    monkeypatch.setattr(gpu_runs, "train_check", killed)
    with pytest.raises(KeyboardInterrupt):
        bench(tmp_path, capsys, "--no-compile", "--parts", "steps,first-light")
    kept = json.loads((tmp_path / "gpu.json").read_text())
    assert kept["complete"] is False and "first-light" not in kept
    assert [r["arm"] for r in kept["steps"]["rows"]] == ["gpt", "ngpt"]
