"""`ngptlab bench gpu`: the GPU path proven in one call, and the same checks at tiny shapes on a CPU.

Four checks, one JSON file (--out) and a printed table:

1. steps: every arm's training step (forward, backward, clipping, AdamW fused on CUDA, the arm's post-step
   hook) at one shape and several contexts, eager and torch.compile'd, under bf16 autocast: median time,
   tokens/s, MFU against the device's peak (detected from the GPU's name, or --peak-tflops; null without
   either), peak memory and the ratio to gpt at the same context and mode. Peak memory is
   torch.cuda.max_memory_allocated on a GPU, and on a CPU the process's peak resident set (VmHWM, reset
   through /proc/self/clear_refs before each arm) above its size before the arm was built, so weights,
   optimizer state and the step's activations alike.
2. train: short real runs through `ngptlab train`'s own code (train_run) on the token shards: gpt and ngpt
   in bf16, compiled, and again in fp32, eager, same seed and batches. The bf16 loss must fall, and its first
   steps must agree with fp32's within --loss-tolerance (max absolute difference of the train loss, nats).
3. condition: the wall time of the condition stage (condition_run) on a checkpoint of the --condition-scale
   (1B on a GPU), trained for one step so that it is a real run's checkpoint.
4. ddp: with 2+ GPUs, the fp32 run of check 2 again under torchrun with 2 processes (nccl) must give the
   single process's losses; skipped, with the reason, on fewer GPUs (on a CPU, --ddp-cpu runs it with gloo).

Defaults aim at a one-GPU run within 8 minutes: the paper's 0.5B shape at contexts 1024 and 4096; every
step eager first, then gpt and ngpt compiled at every context, then the other arms compiled at the first
context (each compile of a 0.5B model is tens of seconds), within a 300 s budget for the step timings past
which the remaining arms are skipped and listed; train checks at gpu-small, ctx 1024. On a CPU: a 2-layer
d-64 shape at contexts 32 and 64, seconds per check once torch.compile's cache is warm.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from ngptlab.errors import ParamsError
from ngptlab.files import write_json_atomic
from ngptlab.models.scales import Scale
from ngptlab.params import RunSpec, enumerate_runs
from ngptlab.results import train_dir

TINY = Scale(n_layer=2, d_model=64, n_head=4)  # the CPU stand-in for every GPU shape below
# The CPU stand-ins: a small vocabulary for the step timings (at 50k the LM head is most of a CPU step and
# bf16 matmuls without AVX-512 BF16 are slower than fp32), and larger learning rates so that a few steps
# of the tiny shape visibly lower the loss. nGPT gets a larger one than gpt: its logits are cosines times
# s_z (init 1, Section 2.5), so at a 50k vocabulary the loss leaves log(50257) only as fast as s_z grows,
# about lr sqrt(d) per step.
GPU_DEFAULTS = {"scale": "0.5B", "contexts": [1024, 4096], "batch_tokens": 16384, "steps": 10, "warmup": 3,
                "vocab_size": 50257, "train_scale": "gpu-small", "train_context": 1024, "train_sequences": 16,
                "train_steps": 40, "train_lr": {"gpt": 1e-3, "ngpt": 4e-3}, "condition_scale": "1B",
                "condition_context": 1024,
                "steps_budget_s": 300}
CPU_DEFAULTS = {"scale": "bench-tiny", "contexts": [32, 64], "batch_tokens": 256, "steps": 3, "warmup": 1,
                "vocab_size": 512, "train_scale": "bench-tiny", "train_context": 32, "train_sequences": 4,
                "train_steps": 12, "train_lr": {"gpt": 1e-2, "ngpt": 4e-2}, "condition_scale": "bench-tiny",
                "condition_context": 32,
                "steps_budget_s": None}
ALWAYS_COMPILED = ("gpt", "ngpt", "ngpt@before")  # compiled at every context; other arms at the first only
TRAIN_ARMS = ("gpt", "ngpt")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--arms", nargs="+", metavar="ARM", help="arms to time (default: train.arms)")
    parser.add_argument("--scale", help="shape of the step timings (GPU: 0.5B; CPU: a 2-layer d-64 shape)")
    parser.add_argument("--contexts", nargs="+", type=int, help="GPU: 1024 4096; CPU: 32 64")
    parser.add_argument("--batch-tokens", type=int, help="tokens per timed step (GPU 16384, CPU 256)")
    parser.add_argument("--steps", type=int, help="timed steps per arm (GPU 10, CPU 3)")
    parser.add_argument("--vocab-size", type=int, help="vocabulary of the step timings (GPU 50257, CPU 512)")
    parser.add_argument("--warmup", type=int, help="untimed steps first, compilation included (GPU 3, CPU 1)")
    parser.add_argument("--compile-all", action="store_true", help="compile every arm at every context")
    parser.add_argument("--steps-budget-s", type=float, help="seconds for the step timings (GPU 300, CPU "
                        "none): past it the remaining arms other than gpt are skipped, and listed")
    parser.add_argument("--before", action="store_true", help="also time ngpt@before: nGPT computed as "
                        "before the speed work (bench/before.py), beside ngpt")
    parser.add_argument("--no-compile", action="store_true",
                        help="eager only: no compiled step rows, and the bf16 train check runs eager")
    parser.add_argument("--peak-tflops", type=float, help="the device's dense bf16 peak (default: detected)")
    parser.add_argument("--tokens", metavar="DIR", help="token shards (default data/tokens/<train.source>)")
    parser.add_argument("--train-steps", type=int, help="steps of each train check (GPU 40, CPU 12)")
    parser.add_argument("--compare-steps", type=int, default=5, help="first steps compared bf16 vs fp32")
    parser.add_argument("--loss-tolerance", type=float, default=0.05,
                        help="max |bf16 - fp32| train loss over the compared steps, nats (default 0.05)")
    parser.add_argument("--ddp-cpu", action="store_true", help="on a CPU, run the DDP check with gloo")
    parser.add_argument("--skip", nargs="+", default=[], choices=["steps", "train", "condition", "ddp"])
    parser.add_argument("--out", default="results/bench/gpu.json", help="the JSON file written")


# ----------------------------------------------------------------------------------------------------------
# Peak memory


def _proc_kb(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


class PeakMemory:
    """Peak bytes above the level at start(): CUDA allocator peak, or the CPU process's peak RSS."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.kind = ("torch.cuda.max_memory_allocated" if device.type == "cuda" else
                     "peak RSS (VmHWM, reset via /proc/self/clear_refs) above RSS at start")

    def start(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base = torch.cuda.memory_allocated(self.device)
            return
        try:
            Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
        except OSError:
            self.base = None
            return
        self.base = _proc_kb("VmRSS")

    def peak_mb(self) -> float | None:
        if self.device.type == "cuda":
            return (torch.cuda.max_memory_allocated(self.device) - self.base) / 2**20
        peak = _proc_kb("VmHWM")
        return None if self.base is None or peak is None else (peak - self.base) / 1024


# ----------------------------------------------------------------------------------------------------------
# 1. Step timings


def step_jobs(arms: list[str], contexts: list[int], modes: tuple[str, ...], compile_all: bool) -> list[tuple]:
    """(context, mode, arm) in the order they run: every eager step first, then the compiled gpt and nGPT at
    every context, then the other arms compiled at the first context (every context with compile_all), so
    that a time budget cuts the least needed compilations."""
    jobs = [(c, "eager", a) for c in contexts for a in arms] if "eager" in modes else []
    if "compiled" in modes:
        jobs += [(c, "compiled", a) for c in contexts for a in arms if a in ALWAYS_COMPILED]
        jobs += [(c, "compiled", a) for c in (contexts if compile_all else contexts[:1]) for a in arms
                 if a not in ALWAYS_COMPILED]
    return jobs


def time_steps(arms: list[str], scale: Scale | str, contexts: list[int], batch_tokens: int, vocab_size: int,
               device: torch.device, steps: int, warmup: int, peak_flops: float | None,
               compile_all: bool, modes: tuple[str, ...] = ("eager", "compiled"),
               budget_s: float | None = None) -> tuple[list[dict], list[str]]:
    """One row per (context, mode, arm): median step time, tokens/s, MFU, peak memory, ratio to gpt at the
    same context and mode; and the jobs skipped because the time budget ran out."""
    from ngptlab.bench.step import _Arm
    from ngptlab.train.throughput import mfu_of

    arms = ["gpt", *[a for a in arms if a != "gpt"]]
    for context in contexts:
        if batch_tokens % context:
            raise ParamsError(f"--batch-tokens {batch_tokens} is not a multiple of context {context}")
    memory = PeakMemory(device)
    started, rows, skipped = time.perf_counter(), [], []
    for context, mode, arm in step_jobs(arms, contexts, modes, compile_all):
        if budget_s is not None and time.perf_counter() - started > budget_s and arm != "gpt":
            skipped.append(f"ctx {context} {mode} {arm}")
            continue
        torch._dynamo.reset()  # a fresh compile per model: no cache-size-limit fallback to eager
        memory.start()
        runner = _Arm(arm, scale, vocab_size, context, batch_tokens // context, device, mode == "compiled",
                      bf16=True)
        for _ in range(warmup):
            runner.step()
        median = statistics.median(runner.step() for _ in range(steps))
        tokens_per_s = batch_tokens / median
        rows.append({"context": context, "mode": mode, "arm": arm, "median_ms": median * 1e3,
                     "tokens_per_s": tokens_per_s,
                     "mfu": mfu_of(runner.flops_per_token, tokens_per_s, peak_flops),
                     "peak_memory_mb": memory.peak_mb(), "loss": runner.last_loss.item()})
        del runner
    base = {(r["context"], r["mode"]): r["median_ms"] for r in rows if r["arm"] == "gpt"}
    for r in rows:
        r["ratio_vs_gpt"] = r["median_ms"] / base[(r["context"], r["mode"])]
    order = {job: i for i, job in enumerate((c, m, a) for c in contexts for m in modes for a in arms)}
    return sorted(rows, key=lambda r: order[(r["context"], r["mode"], r["arm"])]), skipped


# ----------------------------------------------------------------------------------------------------------
# 2-4. Real runs through the train and condition stages' own code


def bench_params(params: dict, shape_name: str, shape: Scale | None, context: int, sequences: int,
                 steps: int, lr: dict[str, float], device: str, arms: tuple[str, ...] = TRAIN_ARMS) -> dict:
    """A params document for a grid of one run per arm, `steps` steps of `sequences` x `context` tokens."""
    p = copy.deepcopy(params)
    t = p["train"]
    budget = steps * sequences * context
    shapes = dict(t["shapes"])
    if shape is not None:
        shapes[shape_name] = shape.as_dict()
    t.update(shapes=shapes, scales=[shape_name], contexts=[context], arms=list(arms), budgets=[budget],
             seeds=[0], learning_rates={shape_name: {arm: [lr[arm]] for arm in arms}},
             batch_sequences=sequences, micro_batch_tokens=sequences * context, warmup_steps=2000,
             warmup_max_fraction=0.1, eval_every_tokens=budget, eval_windows=4, device=device,
             checkpoint_every_tokens=budget, log_every_tokens=1,
             resources={shape_name: {"gpus": int(device == "cuda"), "processes": 1, "mem_mb": 16000,
                                     "runtime_min": 10}})
    p["speedup"]["baseline"] = "gpt"
    return p


def _link_tokens(root: Path, source: str, tokens: Path) -> None:
    target = root / "data" / "tokens" / source
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(tokens.resolve(), target_is_directory=True)


def _losses(root: Path, spec: RunSpec) -> list[float]:
    lines = (train_dir(root, spec) / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["train_loss"] for line in lines]


def _train(params: dict, root: Path, arm: str, **train) -> tuple[RunSpec, float]:
    """Train the grid's run of `arm` in-process, with train settings overridden; (run, seconds)."""
    from ngptlab.train.loop import train_run

    spec = next(r for r in enumerate_runs(params) if r.arm == arm)
    torch._dynamo.reset()
    started = time.perf_counter()
    code = train_run(spec, {**params["train"], **train}, root=root, progress=False)
    if code != 0:
        raise RuntimeError(f"bench gpu: training {spec.name} exited {code}")
    return spec, time.perf_counter() - started


def train_check(params: dict, tokens: Path, device: torch.device, compare_steps: int,
                tolerance: float, work: Path, ddp: str | None, compiled: bool = True) -> dict:
    """bf16 + compiled against fp32 + eager, same seed; optionally the fp32 run again under 2-process DDP."""
    out: dict = {"scale": params["train"]["scales"][0], "context": params["train"]["contexts"][0],
                 "steps": None, "bf16_compiled": compiled, "compare_steps": compare_steps,
                 "loss_tolerance": tolerance, "arms": {}}
    for arm in TRAIN_ARMS:
        roots = {name: work / f"train-{arm}-{name}" for name in ("bf16", "fp32")}
        for root in roots.values():
            _link_tokens(root, params["train"]["source"], tokens)
        run, bf16_s = _train(params, roots["bf16"], arm, precision="bf16", compile=compiled)
        _, fp32_s = _train(params, roots["fp32"], arm, precision="fp32", compile=False)
        bf16, fp32 = _losses(roots["bf16"], run), _losses(roots["fp32"], run)
        n = min(compare_steps, len(bf16))
        diff = max(abs(a - b) for a, b in zip(bf16[:n], fp32[:n], strict=True))
        out["steps"] = len(bf16)
        out["arms"][arm] = {"run": run.name, "bf16_losses": bf16, "fp32_eager_losses": fp32,
                            "max_abs_diff_first_steps": diff, "within_tolerance": diff <= tolerance,
                            "loss_fell": bf16[-1] < bf16[0] - 0.1,  # 0.1 nats: more than noise
                            "bf16_s": bf16_s, "fp32_eager_s": fp32_s}
        if ddp and arm == "gpt":
            out["ddp"] = ddp_check(params, roots["fp32"], run, work / "ddp", tokens, ddp)
    return out


def ddp_check(params: dict, single_root: Path, run: RunSpec, root: Path, tokens: Path, backend: str) -> dict:
    """The fp32 run again under torchrun, 2 processes (nccl on GPUs, gloo on CPUs): the same losses."""
    import yaml

    _link_tokens(root, params["train"]["source"], tokens)
    ddp_params = copy.deepcopy(params)
    ddp_params["train"].update(precision="fp32", compile=False)
    (root / "params.yaml").write_text(yaml.safe_dump(ddp_params))
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               "-m", "ngptlab.cli", "train", "--params", str(root / "params.yaml"), "--root", str(root),
               "--no-progress", run.name]
    started = time.perf_counter()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"bench gpu: torchrun exited {result.returncode}: {result.stderr[-2000:]}")
    single, multi = _losses(single_root, run), _losses(root, run)
    diff = max(abs(a - b) for a, b in zip(single, multi, strict=True))
    return {"backend": backend, "processes": 2, "seconds": time.perf_counter() - started,
            "max_abs_loss_diff": diff, "equal": diff <= 1e-4, "tolerance": 1e-4}


def condition_check(params: dict, tokens: Path, device: torch.device, work: Path) -> dict:
    """Seconds of condition_run on a checkpoint trained one step at the condition scale."""
    from ngptlab.condition.command import condition_run

    root = work / "condition"
    _link_tokens(root, params["train"]["source"], tokens)
    spec, train_s = _train(params, root, "gpt", compile=False)
    settings = {**params["condition"], "device": device.type}
    started = time.perf_counter()
    doc = condition_run(spec, root, settings, progress=False)
    return {"scale": spec.scale, "context": spec.context, "run": spec.name, "device": device.type,
            "seconds": time.perf_counter() - started, "train_one_step_s": train_s,
            "matrices": len(doc["matrices"]),
            "attn_condition_median": doc["headline"]["effective"]["attn_condition_median"]}


# ----------------------------------------------------------------------------------------------------------
# The command


def _shape(name: str, params: dict) -> tuple[str, Scale | None]:
    from ngptlab.params import run_shape

    if name == "bench-tiny":
        return name, TINY
    run_shape(params["train"], name)  # an unknown name fails here, naming the known ones
    return name, None


def run_bench(args: argparse.Namespace, params: dict) -> dict:
    from ngptlab.device import resolve_device
    from ngptlab.params import run_shape
    from ngptlab.train.throughput import detect_peak

    device = resolve_device(args.device)
    d = GPU_DEFAULTS if device.type == "cuda" else CPU_DEFAULTS
    pick = lambda value, key: d[key] if value is None else value  # noqa: E731
    peak = detect_peak(device, args.peak_tflops)
    tokens = Path(args.tokens or Path("data") / "tokens" / params["train"]["source"])
    if "train" not in args.skip or "condition" not in args.skip:
        if not (tokens / "meta.json").is_file():
            raise ParamsError(f"{tokens}: no token shards (run `ngptlab prepare`, or pass --tokens DIR)")
    started = time.perf_counter()
    doc: dict = {"format": "ngptlab.bench-gpu/1", "device": device.type, "torch": torch.__version__,
                 "threads": torch.get_num_threads(), **peak.as_dict(),
                 "cuda_devices": torch.cuda.device_count() if torch.cuda.is_available() else 0}
    if "steps" not in args.skip:
        name, shape = _shape(pick(args.scale, "scale"), params)
        scale = shape or run_shape(params["train"], name)
        contexts, batch = pick(args.contexts, "contexts"), pick(args.batch_tokens, "batch_tokens")
        vocab = pick(args.vocab_size, "vocab_size")
        arms = [*(args.arms or params["train"]["arms"]), *(["ngpt@before"] if args.before else [])]
        doc["steps"] = {"scale": name, "shape": scale.as_dict(), "batch_tokens": batch, "vocab_size": vocab,
                        "precision": "bf16-autocast", "fused_adamw": device.type == "cuda",
                        "memory": PeakMemory(device).kind,
                        "budget_s": pick(args.steps_budget_s, "steps_budget_s")}
        doc["steps"]["rows"], doc["steps"]["skipped"] = time_steps(
            arms, scale, contexts, batch, vocab, device, pick(args.steps, "steps"),
            pick(args.warmup, "warmup"), peak.flops, args.compile_all,
            ("eager",) if args.no_compile else ("eager", "compiled"), doc["steps"]["budget_s"])
    with tempfile.TemporaryDirectory(prefix="ngptlab-bench-gpu-") as tmp:
        work = Path(tmp)
        if "train" not in args.skip:
            name, shape = _shape(d["train_scale"], params)
            p = bench_params(params, name, shape, d["train_context"], d["train_sequences"],
                             pick(args.train_steps, "train_steps"), d["train_lr"], device.type)
            two_gpus = device.type == "cuda" and torch.cuda.device_count() >= 2
            backend = "nccl" if two_gpus else "gloo" if device.type == "cpu" and args.ddp_cpu else None
            if "ddp" in args.skip:
                backend = None
            doc["train"] = train_check(p, tokens, device, args.compare_steps, args.loss_tolerance, work,
                                       backend, compiled=not args.no_compile)
            if backend is None:
                doc["train"]["ddp"] = {"skipped": "skipped by --skip ddp" if "ddp" in args.skip else
                                       f"needs 2+ GPUs, {doc['cuda_devices']} visible"
                                       + (" (--ddp-cpu runs it with gloo)" if device.type == "cpu" else "")}
        if "condition" not in args.skip:
            name, shape = _shape(d["condition_scale"], params)
            p = bench_params(params, name, shape, d["condition_context"], 1, 1, d["train_lr"], device.type,
                             arms=("gpt",))
            doc["condition"] = condition_check(p, tokens, device, work)
    doc["wall_s"] = time.perf_counter() - started
    return doc


def format_report(doc: dict) -> str:
    peak = "n/a" if doc["peak_tflops"] is None else f"{doc['peak_tflops']:g} TFLOP/s"
    lines = [f"bench gpu: {doc['device']} ({doc['device_name']}), peak {peak} [{doc['peak_source']}], "
             f"torch {doc['torch']}, {doc['wall_s']:.0f} s"]
    if "steps" in doc:
        s = doc["steps"]
        lines += [f"steps: {s['scale']} {s['shape']}, {s['batch_tokens']} tokens/step, "
                  f"vocab {s['vocab_size']}, {s['precision']}, fused AdamW {s['fused_adamw']}; "
                  f"memory = {s['memory']}",
                  "| ctx | mode | arm | median step (ms) | x gpt | tokens/s | MFU | peak MB |",
                  "|---:|---|---|---:|---:|---:|---:|---:|"]
        for r in s["rows"]:
            util = "n/a" if r["mfu"] is None else f"{r['mfu']:.1%}"
            mem = "n/a" if r["peak_memory_mb"] is None else f"{r['peak_memory_mb']:,.0f}"
            lines.append(f"| {r['context']} | {r['mode']} | {r['arm']} | {r['median_ms']:.2f} | "
                         f"{r['ratio_vs_gpt']:.2f} | {r['tokens_per_s']:,.0f} | {util} | {mem} |")
        if s["skipped"]:
            lines.append(f"skipped past the {s['budget_s']:g} s budget: {', '.join(s['skipped'])}")
    if "train" in doc:
        t = doc["train"]
        mode = "compiled" if t["bf16_compiled"] else "eager"
        lines.append(f"train: {t['scale']} ctx {t['context']}, {t['steps']} steps, bf16 {mode} vs fp32 "
                     f"eager over the first {t['compare_steps']} steps "
                     f"(tolerance {t['loss_tolerance']} nats):")
        for arm, a in t["arms"].items():
            losses = a["bf16_losses"]
            lines.append(f"  {arm}: max |diff| {a['max_abs_diff_first_steps']:.4f} "
                         f"({'ok' if a['within_tolerance'] else 'OVER'}), loss {losses[0]:.3f} -> "
                         f"{losses[-1]:.3f} ({'fell' if a['loss_fell'] else 'DID NOT FALL'})")
        ddp = t["ddp"]
        lines.append(f"  ddp: skipped ({ddp['skipped']})" if "skipped" in ddp else
                     f"  ddp ({ddp['backend']}, 2 processes): max |loss diff| {ddp['max_abs_loss_diff']:.2e} "
                     f"({'equal' if ddp['equal'] else 'DIFFERENT'})")
    if "condition" in doc:
        c = doc["condition"]
        lines.append(f"condition: {c['scale']} checkpoint, {c['matrices']} matrices, {c['seconds']:.1f} s "
                     f"on {c['device']}")
    return "\n".join(lines)


def failures(doc: dict) -> list[str]:
    """What failed: a non-finite timing, a loss over tolerance or not falling, an unequal DDP step."""
    bad = []
    for r in doc.get("steps", {}).get("rows", []):
        if not (math.isfinite(r["median_ms"]) and math.isfinite(r["loss"])):
            bad.append(f"{r['arm']} ctx {r['context']} {r['mode']}: non-finite step")
    for arm, a in doc.get("train", {}).get("arms", {}).items():
        if not a["within_tolerance"]:
            bad.append(f"{arm}: bf16 losses differ from fp32 by {a['max_abs_diff_first_steps']:.4f}")
        if not a["loss_fell"]:
            bad.append(f"{arm}: the bf16 loss did not fall")
    ddp = doc.get("train", {}).get("ddp", {})
    if ddp.get("equal") is False:
        bad.append(f"ddp: losses differ from one process by {ddp['max_abs_loss_diff']:.2e}")
    return bad


def run(args: argparse.Namespace, params: dict) -> int:
    doc = run_bench(args, params)
    doc["failures"] = failures(doc)
    write_json_atomic(args.out, doc)
    print(format_report(doc))
    for line in doc["failures"]:
        print(f"FAILED: {line}")
    print(f"-> {args.out}")
    return 1 if doc["failures"] else 0
