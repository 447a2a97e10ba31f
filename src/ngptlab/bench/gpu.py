"""`ngptlab bench gpu`: the GPU path proven on one GPU within one call's 10 minutes, or in several calls that
add their parts to the same JSON; and the same parts at tiny shapes on a CPU (`--device cpu`, the rehearsal).

Its parts, in the order a call runs them, most important first (bench/gpu_parts.py):

1. steps (bench/gpu_steps.py): the step of gpt and ngpt at the paper's 0.5B shape, context 1024, eager and
   torch.compile'd under bf16 autocast with fused AdamW: median step, the compile's seconds apart from it,
   tokens/s, MFU, the ngpt/gpt ratio, printed beside the reference implementation's H200 anchor.
2. first-light (bench/gpu_runs.py): gpt and ngpt trained through `ngptlab train`'s own code (train_run) on
   the token shards, bf16 compiled with 2 micro-batches a step, and again in fp32 eager: the loss falls and
   the two agree.
3. memory (bench/gpu_memory.py): the peak memory of every arm the presets train at 0.5B 4k and 8k and 1B 8k,
   as the paper preset trains them, against plan/memory.py's estimate.
4. bf16 (bench/gpu_runs.py): bf16 weights and AdamW state against fp32 master weights.
5. angles (bench/gpu_angles.py): the angle arms' realised angle per step against their target.
6. path (bench/gpu_path.py): the presets' path against first-light's bf16 gpt run: DDP of one with no_sync,
   a run stopped by a planted SIGTERM and resumed, activation checkpointing.
7. ddp: with 2+ GPUs first-light's fp32 run again under torchrun with 2 processes (nccl); not proven on fewer
   GPUs (on a CPU, --ddp-cpu runs it with gloo).
8. condition: the wall time of the condition stage on a checkpoint of the condition scale (1B on a GPU).

A call runs the parts --parts names (default: the first five; path, ddp and condition by name) and merges
them into the JSON an earlier call wrote on the same device and torch (bench/gpu_doc.py). Before it starts
it prints its estimate of each part's seconds on one H100 (bench/gpu_parts.py: compiled graphs x an assumed
compile time + FLOPs at an assumed MFU; an estimate, stored with its constants in the JSON); with
--deadline-s a part whose estimate does not fit the time left is not begun, and is not proven. The JSON is
written after every part (complete: false until the end), so a call cut short keeps what it measured. Every
measurement is judged against a stated threshold (bench/checks.py; exit status 0 all passed, 1 a check
failed, 2 it could not run, 3 none failed but some were not proven).

--device auto (the default) without a GPU stops with one line; --device cpu is the CPU rehearsal: a 2-layer
d-64 shape, seconds per part once torch.compile's cache is warm.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from ngptlab import layout, options
from ngptlab.bench import checks, gpu_doc
from ngptlab.bench.gpu_parts import DEFAULT_PARTS, H100_BUDGET_S, NEEDS, PARTS, constants, parse_parts
from ngptlab.bench.gpu_sizes import TINY, TRAJECTORY_STEPS, Sizes, memory_jobs, resolve_shape
from ngptlab.bench.gpu_steps import PeakMemory, time_steps
from ngptlab.config.load import read_mapping
from ngptlab.errors import ParamsError
from ngptlab.files import write_json_atomic
from ngptlab.settings import Params
from ngptlab.vocabulary import VOCAB_SIZE

__all__ = ["PeakMemory", "TINY", "run", "run_bench", "sizes_of"]

# The CPU stand-ins: a small vocabulary for the step timings (at 50k the LM head is most of a CPU step and
# bf16 matmuls without AVX-512 BF16 are slower than fp32), and larger learning rates so that a few steps
# of the tiny shape visibly lower the loss. nGPT gets a larger one than gpt: its logits are cosines times
# s_z (init 1, Section 2.5), so at a 50k vocabulary the loss leaves log(50257) only as fast as s_z grows,
# about lr sqrt(d) per step.
GPU_DEFAULTS = {"scale": "0.5B", "contexts": [1024], "batch_tokens": 16384, "steps": 10, "warmup": 3,
                "vocab_size": VOCAB_SIZE, "train_scale": "gpu-small", "train_context": 1024,
                "train_sequences": 16, "train_steps": 40, "bf16_steps": 40, "angle_steps": 5,
                "train_lr": {"gpt": 1e-3, "ngpt": 4e-3},
                "condition_scale": "1B", "condition_context": 1024, "steps_budget_s": None}
CPU_DEFAULTS = {"scale": "bench-tiny", "contexts": [32], "batch_tokens": 256, "steps": 3, "warmup": 1,
                "vocab_size": 512, "train_scale": "bench-tiny", "train_context": 32, "train_sequences": 4,
                "train_steps": 12, "bf16_steps": 12, "angle_steps": 3,
                "train_lr": {"gpt": 1e-2, "ngpt": 4e-2},
                "condition_scale": "bench-tiny", "condition_context": 32, "steps_budget_s": None}
STEP_ARMS = ("gpt", "ngpt")  # the steps part's arms unless --arms names others (gpt always, the reference)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="auto (default): the GPU, and without one exit 2; cpu: the CPU rehearsal")
    parser.add_argument("--parts", type=_parts, metavar="A,B,...",
                        help=f"the parts run, in this order whatever the order named: {', '.join(PARTS)} "
                        f"(default {','.join(DEFAULT_PARTS)}); added to the JSON an earlier call wrote")
    options.add_arms(parser)
    parser.add_argument("--scale", help="shape of the step timings (GPU: 0.5B; CPU: a 2-layer d-64 shape)")
    parser.add_argument("--contexts", nargs="+", type=int, help="of the step timings (GPU: 1024; CPU: 32)")
    parser.add_argument("--batch-tokens", type=int, help="tokens per timed step (GPU 16384, CPU 256)")
    parser.add_argument("--steps", type=int, help="timed steps per arm (GPU 10, CPU 3)")
    parser.add_argument("--vocab-size", type=int, help="vocabulary of the step timings (GPU 50257, CPU 512)")
    parser.add_argument("--warmup", type=int, help="untimed steps first, compilation included (GPU 3, CPU 1)")
    parser.add_argument("--compile-all", action="store_true", help="compile every arm at every context")
    parser.add_argument("--steps-budget-s", type=float, help="seconds for the step timings (default none): "
                        "past it the remaining arms other than gpt are skipped (not proven)")
    parser.add_argument("--before", action="store_true", help="also time ngpt@before: nGPT computed as "
                        "before the speed work (bench/before.py), beside ngpt")
    parser.add_argument("--no-compile", action="store_true",
                        help="eager only: no compiled step rows, and the bf16 runs train eager")
    parser.add_argument("--peak-tflops", type=float, help="the device's dense bf16 peak (default: detected)")
    parser.add_argument("--tokens", metavar="DIR", help="token shards (default data/tokens/<train.source>)")
    parser.add_argument("--train-steps", type=int, help="steps of gpt's runs (GPU 40, CPU 12)")
    parser.add_argument("--trajectory-steps", type=int, default=TRAJECTORY_STEPS,
                        help=f"steps of nGPT's first-light runs (default {TRAJECTORY_STEPS})")
    parser.add_argument("--compare-steps", type=int, default=5, help="first steps compared bf16 vs fp32")
    parser.add_argument("--ddp-cpu", action="store_true", help="on a CPU, run the ddp part with gloo")
    parser.add_argument("--deadline-s", type=float, help="seconds from the start: a part whose estimate does "
                        "not fit the time left is not begun (not proven); the JSON is written after every "
                        "part, so a call cut short keeps what it measured")
    parser.add_argument("--write", default="results/bench/gpu.json", metavar="FILE",
                        help="the JSON file written, or added to (default: results/bench/gpu.json)")
    checks.configure(parser)


def _parts(text: str) -> tuple[str, ...]:
    try:
        return parse_parts(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def no_gpu() -> str:
    build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
    return (f"no GPU found: torch {torch.__version__} ({build}) sees no CUDA device; `--device cpu` runs the "
            "CPU rehearsal at tiny shapes")


def sizes_of(args: argparse.Namespace, params: dict, gpu: bool) -> Sizes:
    """Every part's shapes and steps: the options where given, else the device's defaults."""
    d = GPU_DEFAULTS if gpu else CPU_DEFAULTS
    pick = lambda value, key: d[key] if value is None else value  # noqa: E731
    step_scale = pick(args.scale, "scale")
    arms = args.arms or STEP_ARMS
    arms = ("gpt", *[a for a in arms if a != "gpt"], *(["ngpt@before"] if args.before else []))
    two_gpus = gpu and torch.cuda.device_count() >= 2
    shape = lambda name: resolve_shape(name, params["train"])  # noqa: E731
    return Sizes(gpu, step_scale, shape(step_scale), tuple(pick(args.contexts, "contexts")),
                 pick(args.batch_tokens, "batch_tokens"), pick(args.vocab_size, "vocab_size"),
                 pick(args.steps, "steps"), pick(args.warmup, "warmup"), arms,
                 ("eager",) if args.no_compile else ("eager", "compiled"), args.compile_all,
                 d["train_scale"], shape(d["train_scale"]), d["train_context"], d["train_sequences"],
                 {"gpt": pick(args.train_steps, "train_steps"), "ngpt": args.trajectory_steps},
                 d["bf16_steps"], d["angle_steps"], d["condition_scale"], shape(d["condition_scale"]),
                 2 if two_gpus or (not gpu and args.ddp_cpu) else 0, memory_jobs(gpu))


def estimate_lines(estimate: dict, parts: tuple[str, ...]) -> list[str]:
    c = estimate["constants"]
    lines = [f"estimate on {c['device']} (an estimate by count, not a measurement: {c['compile_cold_s']:g} s "
             f"per compiled graph, {c['compile_warm_s']:g} s again from the cache, steps at "
             f"{c['assumed_mfu']:.0%} MFU of {c['bf16_peak_tflops']:g} TFLOP/s bf16):"]
    for part in parts:
        e = estimate["parts"][part]
        lines.append(f"  {part}: {e['estimate_s']:.0f} s ({e['cold_graphs']} graphs compiled, "
                     f"{e['warm_graphs']} again, {e['bf16_tflop'] + e['fp32_tflop']:,.0f} TFLOP)")
    total = sum(estimate["parts"][p]["estimate_s"] for p in parts)
    lines.append(f"  total {total:.0f} s of the call's parts")
    return lines


def run_bench(args: argparse.Namespace, params: dict, save=lambda doc: None,
              earlier: dict | None = None) -> dict:
    """The bench document, `earlier`'s measurements with this call's parts added; `save(doc)` after each
    part, with what it holds so far."""
    from ngptlab.bench.gpu_angles import angles_check
    from ngptlab.bench.gpu_memory import memory_check
    from ngptlab.bench.gpu_path import path_checks
    from ngptlab.bench.gpu_runs import bench_params, bf16_check, condition_check, ddp_check, train_check
    from ngptlab.device import resolve_device
    from ngptlab.train.throughput import detect_peak

    if args.device == "auto" and not torch.cuda.is_available():
        raise ParamsError(no_gpu())
    device = resolve_device(args.device, "--device")
    gpu = device.type == "cuda"
    d = GPU_DEFAULTS if gpu else CPU_DEFAULTS
    sizes = sizes_of(args, params, gpu)
    parts = args.parts or DEFAULT_PARTS
    peak = detect_peak(device, args.peak_tflops)
    tokens = Path(args.tokens or layout.tokens_dir(params["train"]["source"]))
    trains = {"first-light", "bf16", "path", "ddp", "condition"}
    if set(parts) & trains and not (tokens / "meta.json").is_file():
        raise ParamsError(f"{tokens}: no token shards (run `ngptlab prepare`, or pass --tokens DIR)")
    started = time.perf_counter()
    estimate = {"constants": constants(), "parts": {p: sizes.work(p).as_dict() for p in PARTS},
                "default_parts": list(DEFAULT_PARTS), "budget_s": H100_BUDGET_S}
    print("\n".join(estimate_lines(estimate, parts)), flush=True)
    doc: dict = {**(earlier or {}), "format": gpu_doc.FORMAT, "device": device.type,
                 "torch": torch.__version__, "threads": torch.get_num_threads(), **peak.as_dict(),
                 "cuda_devices": torch.cuda.device_count() if torch.cuda.is_available() else 0,
                 "estimate": estimate, "called": list(parts)}
    status = doc.setdefault("parts", {})
    p = {arm: bench_params(params, sizes.train_scale, sizes.train_shape, sizes.train_context,
                           sizes.train_sequences, n, d["train_lr"], device.type, arms=(arm,))
         for arm, n in sizes.train_steps.items()}
    compiled = sizes.compiled

    def measure(part: str, work: Path) -> dict | None:
        if part == "steps":
            s = {"scale": sizes.step_scale, "shape": sizes.step_shape.as_dict(),
                 "batch_tokens": sizes.batch_tokens, "vocab_size": sizes.vocab, "precision": "bf16-autocast",
                 "fused_adamw": gpu, "memory": PeakMemory(device).kind, "budget_s": args.steps_budget_s,
                 "anchor": checks.ANCHOR}
            s["rows"], s["skipped"] = time_steps(
                list(sizes.step_arms), sizes.step_shape, list(sizes.contexts), sizes.batch_tokens,
                sizes.vocab, device, sizes.steps, sizes.warmup, peak.flops, sizes.compile_all, sizes.modes,
                args.steps_budget_s)
            return s
        if part == "first-light":
            return train_check(p, tokens, args.compare_steps, work, compiled)
        if part == "memory":
            return memory_check(sizes.memory, device)
        if part == "bf16":
            q = {arm: bench_params(params, sizes.train_scale, sizes.train_shape, sizes.train_context,
                                   sizes.train_sequences, sizes.bf16_steps, d["train_lr"], device.type,
                                   arms=(arm,))
                 for arm in ("gpt", "ngpt")}
            return bf16_check(q, tokens, args.compare_steps, work)
        if part == "angles":
            return angles_check(sizes, device)
        reference = doc["first-light"]["arms"]["gpt"] if "first-light" in doc else None
        if part == "path":
            return path_checks(p["gpt"], tokens, work, reference, compiled, device, args.compare_steps)
        if part == "ddp":
            if not sizes.ddp_processes:
                return {"skipped": f"needs 2+ GPUs, {doc['cuda_devices']} visible"
                        + (" (--ddp-cpu runs it with gloo)" if not gpu else "")}
            from ngptlab.bench.gpu_runs import reference_run

            return ddp_check(p["gpt"], reference["fp32_eager_losses"], reference_run(p["gpt"]), work / "ddp",
                             tokens, "nccl" if gpu else "gloo")
        name = sizes.condition_scale
        q = bench_params(params, name, sizes.condition_shape, d["condition_context"], 1, 1, d["train_lr"],
                         device.type, arms=("gpt",))
        return condition_check(q, tokens, device, work)

    with tempfile.TemporaryDirectory(prefix="ngptlab-bench-gpu-") as tmp:
        for part in parts:
            need = NEEDS.get(part)
            estimate_s = estimate["parts"][part]["estimate_s"]
            left = None if args.deadline_s is None else args.deadline_s - (time.perf_counter() - started)
            if left is not None and estimate_s > left:
                status[part] = {"status": "not run",
                                "why": f"its estimate, {estimate_s:.0f} s, does not fit the "
                                f"{max(left, 0):.0f} s left of --deadline-s {args.deadline_s:g}"}
            elif need and need not in doc:
                status[part] = {"status": "not run", "why": f"needs {need}'s runs: --parts {need},{part}"}
            else:
                begun = time.perf_counter()
                gpu_doc.record(doc, part, measure(part, Path(tmp) / part))
                status[part] = {"status": "measured", "seconds": time.perf_counter() - begun,
                                "estimate_s": estimate_s}
            save(doc)
    doc["wall_s"] = time.perf_counter() - started
    return doc


def run(args: argparse.Namespace, params: Params) -> int:
    from ngptlab.bench.gpu_report import format_report

    # the benchmark's grids are variants of the params document, each typed where the stages' code reads it
    out = Path(args.write)
    identity = {"device": "", "device_name": "", "torch": torch.__version__}
    if args.device != "auto" or torch.cuda.is_available():
        from ngptlab.device import resolve_device
        from ngptlab.train.throughput import detect_peak

        device = resolve_device("cuda" if args.device == "auto" else args.device, "--device")
        identity.update(device=device.type, device_name=detect_peak(device, args.peak_tflops).device_name)
    earlier = gpu_doc.earlier(out, identity) if identity["device"] else {}
    # written after every part (complete: false), so that a call cut short keeps what it measured
    doc = run_bench(args, read_mapping(args.params), earlier=earlier,
                    save=lambda partial: write_json_atomic(out, {**partial, "complete": False}))
    doc["complete"] = True
    step_shape = (doc["steps"]["scale"], doc["steps"]["batch_tokens"]) if "steps" in doc else None
    doc["thresholds"] = checks.resolve(args, doc["device"], doc["device_name"], step_shape).as_dict()
    thresholds = checks.Thresholds(**doc["thresholds"])
    doc["checks"] = checks.judge(doc, thresholds)
    doc["exit_code"] = checks.exit_code(doc["checks"])
    doc["failures"] = [f"{v['check']} {v['subject']}: {checks.shown(v['value'])} vs {v['threshold']} "
                       f"{v['note']}".rstrip() for v in doc["checks"] if v["status"] == checks.FAIL]
    write_json_atomic(out, doc)
    print(format_report(doc))
    for line in doc["failures"]:
        print(f"FAILED: {line}")
    print(f"-> {args.write}")
    return doc["exit_code"]
