"""`bench gpu`, parts first-light, bf16, ddp and condition: short real runs through the train and condition
stages' own code.

first-light: gpt and ngpt trained through train_run on the token shards in bf16 (compiled, with gradient
accumulation over 2 micro-batches, as the presets train) and again in fp32 eager, same seed and batches;
nGPT for 100 steps, so that its bf16 trajectory is compared with fp32's beyond the first steps.
bf16: gpt and ngpt with bf16 weights and AdamW state against fp32 master weights (train.weight_dtype).
ddp: first-light's fp32 gpt run again under torchrun, 2 processes (nccl on GPUs, gloo on CPUs).
condition: condition_run on a checkpoint of the condition scale trained one step.
"""
from __future__ import annotations

import contextlib
import copy
import gc
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from ngptlab import layout
from ngptlab.grid.enumeration import enumerate_runs
from ngptlab.grid.runs import RunSpec
from ngptlab.models.scales import Scale
from ngptlab.results import train_dir
from ngptlab.settings import Params, of_section

TRAIN_ARMS = ("gpt", "ngpt")
TRAJECTORY_ARMS = ("ngpt",)  # trained `trajectory_steps` (100) in the train check, compared window by window
WINDOW = 10  # steps per window of the trajectory comparison


def bench_params(params: dict, shape_name: str, shape: Scale | None, context: int, sequences: int,
                 steps: int, lr: dict[str, float], device: str, arms: tuple[str, ...] = TRAIN_ARMS) -> dict:
    """A params document for a grid of one run per arm, `steps` steps of `sequences` x `context` tokens in
    micro-batches of half of them (gradient accumulation, DDP's no_sync), one when sequences is 1."""
    p = copy.deepcopy(params)
    t = p["train"]
    budget = steps * sequences * context
    shapes = dict(t["shapes"])
    if shape is not None:
        shapes[shape_name] = shape.as_dict()
    t.update(shapes=shapes, scales=[shape_name], contexts=[context], arms=list(arms), budgets=[budget],
             seeds=[0], learning_rates={shape_name: {arm: [lr[arm]] for arm in arms}},
             batch_sequences=sequences, micro_batch_tokens=max(1, sequences // 2) * context,
             warmup_steps=2000, warmup_max_fraction=0.1, eval_every_tokens=budget, eval_windows=4,
             device=device, checkpoint_every_tokens=budget, log_every_tokens=1,
             activation_checkpointing=False,
             resources={shape_name: {"gpus": int(device == "cuda"), "processes": 1, "mem_mb": 16000,
                                     "runtime_min": 10}})
    p["speedup"]["baseline"] = "gpt"
    return p


def link_tokens(root: Path, source: str, tokens: Path) -> None:
    target = root / layout.tokens_dir(source)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(tokens.resolve(), target_is_directory=True)


def losses(root: Path, spec: RunSpec) -> list[float]:
    lines = (train_dir(root, spec) / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["train_loss"] for line in lines]


def summary(root: Path, spec: RunSpec) -> dict:
    return json.loads((train_dir(root, spec) / "summary.json").read_text())


def weights_sha256(root: Path) -> str:
    """The hash of the run's final weights (the tensors only: the file's header order is not fixed)."""
    from safetensors import safe_open

    with safe_open(str(next((root / "runs").rglob("model.safetensors"))), framework="pt") as f:
        return f.metadata()["tensors_sha256"]


def max_diff(a: list[float], b: list[float]) -> float | None:
    """max |a - b| step by step; None when the lengths differ (a lost or a repeated step): a failure."""
    if len(a) != len(b) or not a:
        return None
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


@contextlib.contextmanager
def step_clock(times: list[float]):
    """Append the time of every optimizer step's end to `times` (any optimizer), while open."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    handle = register_optimizer_step_post_hook(lambda opt, args, kwargs: times.append(time.perf_counter()))
    try:
        yield
    finally:
        handle.remove()


def first_step_above_steady(started: float, times: list[float]) -> float | None:
    """The first optimizer step's seconds from the run's start above the median step's: with a compiled
    model, the compile (torch.compile is lazy: the first forward and backward build the graphs), plus the
    run's start-up."""
    if len(times) < 3:
        return None
    return times[0] - started - statistics.median(b - a for a, b in itertools.pairwise(times))


def train(params: dict, root: Path, arm: str, expect: int = 0, **settings) -> dict:
    """Train the grid's run of `arm` in-process with train settings overridden: the run, its exit code,
    seconds and (on a GPU) peak allocated MiB. An exit code other than `expect` is an error."""
    from ngptlab.train.loop import train_run

    spec = next(r for r in enumerate_runs(Params.of(params)) if r.arm == arm)
    train_settings = {**params["train"], **settings}
    cuda = train_settings["device"] == "cuda"
    torch._dynamo.reset()
    if cuda:  # the run's own peak: above what is allocated before it starts
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    times: list[float] = []
    started = time.perf_counter()
    with step_clock(times):
        code = train_run(spec, of_section("train", train_settings), root=root, progress=False)
    if code != expect:
        raise RuntimeError(f"bench gpu: training {spec.name} exited {code}, expected {expect}")
    return {"run": spec, "code": code, "seconds": time.perf_counter() - started,
            "first_step_above_steady_s": first_step_above_steady(started, times),
            "peak_mb": (torch.cuda.max_memory_allocated() - base) / 2**20 if cuda else None}


def windows(values: list[float], size: int = WINDOW) -> list[float]:
    """Means of consecutive `size`-step windows (the last one may be shorter)."""
    return [sum(values[i:i + size]) / len(values[i:i + size]) for i in range(0, len(values), size)]


def train_check(params: dict[str, dict], tokens: Path, compare_steps: int, work: Path,
                compiled: bool = True) -> dict:
    """bf16 (+ compiled, 2 micro-batches) against fp32 + eager, same seed; `params` holds each arm's grid."""
    gpt = params["gpt"]["train"]
    out: dict = {"scale": gpt["scales"][0], "context": gpt["contexts"][0], "bf16_compiled": compiled,
                 "compare_steps": compare_steps, "window": WINDOW, "arms": {}}
    for arm in TRAIN_ARMS:
        roots = {name: work / f"train-{arm}-{name}" for name in ("bf16", "fp32")}
        for root in roots.values():
            link_tokens(root, params[arm]["train"]["source"], tokens)
        bf16_run = train(params[arm], roots["bf16"], arm, precision="bf16", compile=compiled)
        fp32_run = train(params[arm], roots["fp32"], arm, precision="fp32", compile=False)
        run = bf16_run["run"]
        bf16, fp32 = losses(roots["bf16"], run), losses(roots["fp32"], run)
        n = min(compare_steps, len(bf16))
        out["arms"][arm] = {"run": run.name, "root": str(roots["bf16"]), "steps": len(bf16),
                            "grad_accum_steps": summary(roots["bf16"], run)["params"]["grad_accum_steps"],
                            "bf16_losses": bf16, "fp32_eager_losses": fp32,
                            "max_abs_diff_first_steps": max_diff(bf16[:n], fp32[:n]),
                            "loss_drop": bf16[0] - bf16[-1],
                            "bf16_s": bf16_run["seconds"], "fp32_eager_s": fp32_run["seconds"],
                            "compile_s": bf16_run["first_step_above_steady_s"] if compiled else None,
                            "bf16_peak_mb": bf16_run["peak_mb"],
                            "weights_sha256": weights_sha256(roots["bf16"])}
        if arm in TRAJECTORY_ARMS:
            out["arms"][arm]["max_abs_diff_windows"] = max_diff(windows(bf16), windows(fp32))
    return out


def ddp_check(params: dict, single: list[float], run: RunSpec, root: Path, tokens: Path,
              backend: str) -> dict:
    """The fp32 run again under torchrun, 2 processes (nccl on GPUs, gloo on CPUs): the same losses as
    the single process's, `single` (first-light's fp32 eager gpt run)."""
    import yaml

    link_tokens(root, params["train"]["source"], tokens)
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
    return {"backend": backend, "processes": 2, "seconds": time.perf_counter() - started,
            "max_abs_loss_diff": max_diff(single, losses(root, run))}


def condition_check(params: dict, tokens: Path, device: torch.device, work: Path) -> dict:
    """Seconds of condition_run on a checkpoint trained one step at the condition scale."""
    import math

    from ngptlab.condition.run import condition_run

    root = work / "condition"
    link_tokens(root, params["train"]["source"], tokens)
    one = train(params, root, "gpt", compile=False)
    spec = one["run"]
    settings = {**params["condition"], "device": device.type}
    started = time.perf_counter()
    doc = condition_run(spec, root, of_section("condition", settings), progress=False)
    median = doc["headline"]["effective"]["attn_condition_median"]
    return {"scale": spec.scale, "context": spec.context, "run": spec.name, "device": device.type,
            "seconds": time.perf_counter() - started, "train_one_step_s": one["seconds"],
            "matrices": len(doc["matrices"]), "attn_condition_median": median,
            "finite": median is not None and math.isfinite(median)}


def bf16_check(params: dict[str, dict], tokens: Path, compare_steps: int, work: Path) -> dict:
    """gpt and ngpt with their weights and AdamW state stored in bf16 (train.weight_dtype: bf16, as the
    paper's reference code trains) against fp32 master weights, both under bf16 autocast, eager, same seed
    and batches: the first steps agree, and each run's loss falls; the gap at the end is recorded."""
    gpt = params["gpt"]["train"]
    out: dict = {"scale": gpt["scales"][0], "context": gpt["contexts"][0], "compare_steps": compare_steps,
                 "window": WINDOW, "arms": {}}
    for arm in TRAIN_ARMS:
        got = {}
        for dtype in ("bf16", "fp32"):
            p = copy.deepcopy(params[arm])
            p["train"]["weight_dtype"] = dtype
            root = work / f"bf16-{arm}-{dtype}"
            link_tokens(root, p["train"]["source"], tokens)
            run = train(p, root, arm, precision="bf16", compile=False)["run"]
            got[dtype] = losses(root, run)
        n = min(compare_steps, len(got["fp32"]))
        out["arms"][arm] = {"steps": len(got["fp32"]), "bf16_weights_losses": got["bf16"],
                            "fp32_master_losses": got["fp32"],
                            "max_abs_diff_first_steps": max_diff(got["bf16"][:n], got["fp32"][:n]),
                            "loss_drop": got["bf16"][0] - got["bf16"][-1],
                            "last_window_gap": windows(got["bf16"])[-1] - windows(got["fp32"])[-1]}
    return out


def reference_run(params: dict) -> RunSpec:
    """The grid's gpt run: what the ddp part trains again under torchrun."""
    return next(r for r in enumerate_runs(Params.of(params)) if r.arm == "gpt")
