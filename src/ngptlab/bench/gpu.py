"""`ngptlab bench gpu`: the GPU path proven in one call, and the same checks at tiny shapes on a CPU.

Five checks, one JSON file (--write, written after every check: a call cut short keeps what it measured;
--deadline-s: no check begins past it, those left are not proven), a printed table, and a verdict per
measurement against a stated threshold (bench/checks.py: the thresholds, and the exit status: 0 all passed,
1 a check failed, 2 it could not run, 3 none failed but some were not proven):

1. steps (bench/gpu_steps.py): every arm's training step (forward, backward, clipping, AdamW fused on CUDA,
   the arm's post-step hook) at one shape and several contexts, eager and torch.compile'd, under bf16
   autocast: median time, tokens/s, MFU against the device's peak (detected from the GPU's name, or
   --peak-tflops), peak memory beside plan/memory.py's estimate, the ratio to gpt.
2. train (bench/gpu_runs.py): short real runs through `ngptlab train`'s own code (train_run) on the token
   shards: gpt and ngpt in bf16, compiled, 2 micro-batches a step, and again in fp32 eager, same seed and
   batches; nGPT for 100 steps.
3. path (bench/gpu_path.py): the presets' path against the bf16 gpt run: DDP around the compiled model in
   a process group of one with no_sync on the accumulation micro-batches, a compiled run stopped by a
   planted SIGTERM and resumed, activation checkpointing.
4. ddp: with 2+ GPUs the fp32 run again under torchrun with 2 processes (nccl); not proven on fewer GPUs
   (on a CPU, --ddp-cpu runs it with gloo).
5. condition: the wall time of the condition stage on a checkpoint of the condition scale (1B on a GPU).

--device auto (the default) without a GPU stops with one line; --device cpu is the CPU rehearsal. Defaults
aim at one GPU within 10 minutes: the paper's 0.5B shape at contexts 1024 and 4096; every step eager first,
then gpt and ngpt compiled at every context, then the other arms compiled at the first context, within a
300 s budget for the step timings past which the remaining arms are skipped (not proven); the runs at
gpu-small, ctx 1024. On a CPU: a 2-layer d-64 shape at contexts 32 and 64, seconds per check once
torch.compile's cache is warm.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from ngptlab import layout, options
from ngptlab.bench import checks
from ngptlab.bench.gpu_steps import PeakMemory, time_steps
from ngptlab.config.load import read_mapping
from ngptlab.errors import ParamsError
from ngptlab.files import write_json_atomic
from ngptlab.models.scales import Scale
from ngptlab.settings import Params, of_section

__all__ = ["PeakMemory", "TINY", "run", "run_bench"]

TINY = Scale(n_layer=2, d_model=64, n_head=4)  # the CPU stand-in for every GPU shape below
# The CPU stand-ins: a small vocabulary for the step timings (at 50k the LM head is most of a CPU step and
# bf16 matmuls without AVX-512 BF16 are slower than fp32), and larger learning rates so that a few steps
# of the tiny shape visibly lower the loss. nGPT gets a larger one than gpt: its logits are cosines times
# s_z (init 1, Section 2.5), so at a 50k vocabulary the loss leaves log(50257) only as fast as s_z grows,
# about lr sqrt(d) per step.
GPU_DEFAULTS = {"scale": "0.5B", "contexts": [1024, 4096], "batch_tokens": 16384, "steps": 10, "warmup": 3,
                "vocab_size": 50257, "train_scale": "gpu-small", "train_context": 1024, "train_sequences": 16,
                "train_steps": 40, "train_lr": {"gpt": 1e-3, "ngpt": 4e-3}, "condition_scale": "1B",
                "condition_context": 1024, "steps_budget_s": 300}
CPU_DEFAULTS = {"scale": "bench-tiny", "contexts": [32, 64], "batch_tokens": 256, "steps": 3, "warmup": 1,
                "vocab_size": 512, "train_scale": "bench-tiny", "train_context": 32, "train_sequences": 4,
                "train_steps": 12, "train_lr": {"gpt": 1e-2, "ngpt": 4e-2}, "condition_scale": "bench-tiny",
                "condition_context": 32, "steps_budget_s": None}
TRAJECTORY_STEPS = 100  # nGPT's train check, bf16 against fp32 beyond the first steps
CHECKS = ("steps", "train", "path", "ddp", "condition")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="auto (default): the GPU, and without one exit 2; cpu: the CPU rehearsal")
    options.add_arms(parser)
    parser.add_argument("--scale", help="shape of the step timings (GPU: 0.5B; CPU: a 2-layer d-64 shape)")
    parser.add_argument("--contexts", nargs="+", type=int, help="GPU: 1024 4096; CPU: 32 64")
    parser.add_argument("--batch-tokens", type=int, help="tokens per timed step (GPU 16384, CPU 256)")
    parser.add_argument("--steps", type=int, help="timed steps per arm (GPU 10, CPU 3)")
    parser.add_argument("--vocab-size", type=int, help="vocabulary of the step timings (GPU 50257, CPU 512)")
    parser.add_argument("--warmup", type=int, help="untimed steps first, compilation included (GPU 3, CPU 1)")
    parser.add_argument("--compile-all", action="store_true", help="compile every arm at every context")
    parser.add_argument("--steps-budget-s", type=float, help="seconds for the step timings (GPU 300, CPU "
                        "none): past it the remaining arms other than gpt are skipped (not proven)")
    parser.add_argument("--before", action="store_true", help="also time ngpt@before: nGPT computed as "
                        "before the speed work (bench/before.py), beside ngpt")
    parser.add_argument("--no-compile", action="store_true",
                        help="eager only: no compiled step rows, and the bf16 runs train eager")
    parser.add_argument("--peak-tflops", type=float, help="the device's dense bf16 peak (default: detected)")
    parser.add_argument("--tokens", metavar="DIR", help="token shards (default data/tokens/<train.source>)")
    parser.add_argument("--train-steps", type=int, help="steps of gpt's runs (GPU 40, CPU 12)")
    parser.add_argument("--trajectory-steps", type=int, default=TRAJECTORY_STEPS,
                        help=f"steps of nGPT's runs (default {TRAJECTORY_STEPS})")
    parser.add_argument("--compare-steps", type=int, default=5, help="first steps compared bf16 vs fp32")
    parser.add_argument("--ddp-cpu", action="store_true", help="on a CPU, run the DDP check with gloo")
    parser.add_argument("--skip", nargs="+", default=[], choices=CHECKS, help="checks not run (not proven)")
    parser.add_argument("--deadline-s", type=float, help="seconds from the start after which no further "
                        "check begins: those left are skipped (not proven); the JSON is written after every "
                        "check, so a call cut short keeps what it measured")
    parser.add_argument("--write", default="results/bench/gpu.json", metavar="FILE",
                        help="the JSON file written (default: results/bench/gpu.json)")
    checks.configure(parser)


def _shape(name: str, params: dict) -> tuple[str, Scale | None]:
    from ngptlab.grid.resources import run_shape

    if name == "bench-tiny":
        return name, TINY
    run_shape(of_section("train", params["train"]), name)  # an unknown name fails here, naming the known ones
    return name, None


def no_gpu() -> str:
    build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
    return (f"no GPU found: torch {torch.__version__} ({build}) sees no CUDA device; `--device cpu` runs the "
            "CPU rehearsal at tiny shapes")


def run_bench(args: argparse.Namespace, params: dict, save=lambda doc: None) -> dict:
    """The bench document; `save(doc)` after each check, with what it holds so far."""
    from ngptlab.bench.gpu_path import path_checks
    from ngptlab.bench.gpu_runs import bench_params, condition_check, ddp_check, train_check
    from ngptlab.device import resolve_device
    from ngptlab.grid.resources import run_shape
    from ngptlab.train.throughput import detect_peak

    if args.device == "auto" and not torch.cuda.is_available():
        raise ParamsError(no_gpu())
    device = resolve_device(args.device, "--device")
    d = GPU_DEFAULTS if device.type == "cuda" else CPU_DEFAULTS
    pick = lambda value, key: d[key] if value is None else value  # noqa: E731
    peak = detect_peak(device, args.peak_tflops)
    tokens = Path(args.tokens or layout.tokens_dir(params["train"]["source"]))
    if {"train", "condition"} - set(args.skip) and not (tokens / "meta.json").is_file():
        raise ParamsError(f"{tokens}: no token shards (run `ngptlab prepare`, or pass --tokens DIR)")
    started = time.perf_counter()
    doc: dict = {"format": "ngptlab.bench-gpu/2", "device": device.type, "torch": torch.__version__,
                 "threads": torch.get_num_threads(), **peak.as_dict(), "skip": list(args.skip),
                 "cuda_devices": torch.cuda.device_count() if torch.cuda.is_available() else 0}
    doc["past_deadline"] = []

    def due(check: str) -> bool:
        """Whether `check` runs: not skipped, and begun before --deadline-s (else recorded as past it)."""
        if check in args.skip:
            return False
        if args.deadline_s is not None and time.perf_counter() - started > args.deadline_s:
            doc["past_deadline"].append(check)
            return False
        return True

    step_shape = None
    if due("steps"):
        name, shape = _shape(pick(args.scale, "scale"), params)
        scale = shape or run_shape(of_section("train", params["train"]), name)
        contexts, batch = pick(args.contexts, "contexts"), pick(args.batch_tokens, "batch_tokens")
        vocab, step_shape = pick(args.vocab_size, "vocab_size"), (name, batch)
        arms = [*(args.arms or params["train"]["arms"]), *(["ngpt@before"] if args.before else [])]
        doc["steps"] = {"scale": name, "shape": scale.as_dict(), "batch_tokens": batch, "vocab_size": vocab,
                        "precision": "bf16-autocast", "fused_adamw": device.type == "cuda",
                        "memory": PeakMemory(device).kind,
                        "budget_s": pick(args.steps_budget_s, "steps_budget_s")}
        doc["steps"]["rows"], doc["steps"]["skipped"] = time_steps(
            arms, scale, contexts, batch, vocab, device, pick(args.steps, "steps"),
            pick(args.warmup, "warmup"), peak.flops, args.compile_all,
            ("eager",) if args.no_compile else ("eager", "compiled"), doc["steps"]["budget_s"])
    doc["thresholds"] = checks.resolve(args, device.type, peak.device_name, step_shape).as_dict()
    save(doc)
    compiled = not args.no_compile
    with tempfile.TemporaryDirectory(prefix="ngptlab-bench-gpu-") as tmp:
        work = Path(tmp)
        if due("train"):
            name, shape = _shape(d["train_scale"], params)
            steps = {"gpt": pick(args.train_steps, "train_steps"), "ngpt": args.trajectory_steps}
            p = {arm: bench_params(params, name, shape, d["train_context"], d["train_sequences"], n,
                                   d["train_lr"], device.type, arms=(arm,)) for arm, n in steps.items()}
            doc["train"] = train_check(p, tokens, args.compare_steps, work, compiled)
            save(doc)
            reference = doc["train"]["arms"]["gpt"]
            if due("path"):
                doc["path"] = path_checks(p["gpt"], tokens, work, reference, compiled, device,
                                          args.compare_steps)
                save(doc)
            two_gpus = device.type == "cuda" and torch.cuda.device_count() >= 2
            backend = "nccl" if two_gpus else "gloo" if device.type == "cpu" and args.ddp_cpu else None
            if not due("ddp"):
                doc["ddp"] = {"skipped": "--skip ddp" if "ddp" in args.skip else "past --deadline-s"}
            elif backend is None:
                doc["ddp"] = {"skipped": f"needs 2+ GPUs, {doc['cuda_devices']} visible"
                              + (" (--ddp-cpu runs it with gloo)" if device.type == "cpu" else "")}
            else:
                doc["ddp"] = ddp_check(p["gpt"], work / "train-gpt-fp32", reference_run(p["gpt"]),
                                       work / "ddp", tokens, backend)
                save(doc)
        if due("condition"):
            name, shape = _shape(d["condition_scale"], params)
            p = bench_params(params, name, shape, d["condition_context"], 1, 1, d["train_lr"], device.type,
                             arms=("gpt",))
            doc["condition"] = condition_check(p, tokens, device, work)
            save(doc)
    doc["wall_s"] = time.perf_counter() - started
    return doc


def reference_run(params: dict):
    from ngptlab.grid.enumeration import enumerate_runs

    return next(r for r in enumerate_runs(Params.of(params)) if r.arm == "gpt")


def run(args: argparse.Namespace, params: Params) -> int:
    from ngptlab.bench.gpu_report import format_report

    # the benchmark's grids are variants of the params document, each typed where the stages' code reads it
    # written after every check (complete: false), so that a call cut short keeps what it measured
    doc = run_bench(args, read_mapping(args.params),
                    save=lambda partial: write_json_atomic(args.write, {**partial, "complete": False}))
    doc["complete"] = True
    thresholds = checks.Thresholds(**doc["thresholds"])
    doc["checks"] = checks.judge(doc, thresholds)
    doc["exit_code"] = checks.exit_code(doc["checks"])
    doc["failures"] = [f"{v['check']} {v['subject']}: {checks.shown(v['value'])} vs {v['threshold']} "
                       f"{v['note']}".rstrip() for v in doc["checks"] if v["status"] == checks.FAIL]
    write_json_atomic(args.write, doc)
    print(format_report(doc))
    for line in doc["failures"]:
        print(f"FAILED: {line}")
    print(f"-> {args.write}")
    return doc["exit_code"]
