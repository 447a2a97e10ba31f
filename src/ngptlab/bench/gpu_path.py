"""`bench gpu`, check 5: the path the GPU presets train on, each against the train check's bf16 gpt run
(compiled, bf16 autocast, 2 micro-batches per step), the uninterrupted reference:

- ddp: the same run wrapped in DistributedDataParallel around the compiled model, in a real process group
  of one (nccl on a GPU, gloo on a CPU), with the first micro-batch of every step under no_sync; the whole
  training loop (train/loop.py) runs as one rank of a distributed run would.
- resume: the same run stopped by a SIGTERM planted after an optimizer step (exit 75, a checkpoint), then
  rerun to the end (a fresh compile of the resumed model).
- checkpointing: the same run with train.activation_checkpointing; on a GPU also its peak memory, which
  must be lower than the reference's.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as torch_dist

from ngptlab.bench.gpu_runs import link_tokens, losses, max_diff, summary, train, weights_sha256
from ngptlab.grid.enumeration import enumerate_runs
from ngptlab.settings import Params, of_section
from ngptlab.train.state import LATEST


@contextlib.contextmanager
def sigterm_after(steps: int):
    """Send this process SIGTERM right after its `steps`-th optimizer step (any optimizer), once: the
    train loop's handler then checkpoints at that step's end and exits 75, as under Slurm's time limit."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    count = 0

    def hook(optimizer, args, kwargs) -> None:
        nonlocal count
        count += 1
        if count == steps:
            os.kill(os.getpid(), signal.SIGTERM)

    handle = register_optimizer_step_post_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def resume_check(params: dict, tokens: Path, work: Path, reference: dict, compiled: bool) -> dict:
    """Stop the reference run at half its steps with a planted SIGTERM, resume it: the same losses."""
    root = work / "path-resume"
    link_tokens(root, params["train"]["source"], tokens)
    stop_at = max(1, reference["steps"] // 2)
    with sigterm_after(stop_at):
        first = train(params, root, "gpt", expect=75, precision="bf16", compile=compiled)
    latest = next(root.rglob(LATEST), None)  # the interrupted run's checkpoint pointer
    stopped_at = json.loads(latest.read_text())["step"] if latest else None
    second = train(params, root, "gpt", precision="bf16", compile=compiled)
    run = second["run"]
    got = losses(root, run)
    done = summary(root, run)
    return {"stop_after_step": stop_at, "first_exit": first["code"], "checkpoint_step": stopped_at,
            "second_exit": second["code"], "resumed_from": done["resumed_from"], "steps": len(got),
            "losses": got, "max_abs_diff": max_diff(got, reference["bf16_losses"]),
            "weights_equal": weights_sha256(root) == reference["weights_sha256"],
            "seconds": first["seconds"] + second["seconds"]}


def checkpointing_check(params: dict, tokens: Path, work: Path, reference: dict, compiled: bool,
                        compare_steps: int) -> dict:
    """The reference run with activation checkpointing: the same losses over the first `compare_steps`
    (compiled, the recomputed forward is fused and rounded to bf16 elsewhere, so the runs then drift apart
    as bf16 and fp32 do), and on a GPU less memory."""
    root = work / "path-checkpointing"
    link_tokens(root, params["train"]["source"], tokens)
    run = train(params, root, "gpt", precision="bf16", compile=compiled, activation_checkpointing=True)
    got = losses(root, run["run"])
    applied = summary(root, run["run"])["params"]["activation_checkpointing"]
    n = min(compare_steps, len(got))
    return {"applied": applied, "losses": got, "compare_steps": compare_steps,
            "max_abs_diff_first_steps": max_diff(got[:n], reference["bf16_losses"][:n]),
            "max_abs_diff": max_diff(got, reference["bf16_losses"]),
            "peak_mb": run["peak_mb"], "reference_peak_mb": reference["bf16_peak_mb"],
            "seconds": run["seconds"]}


def ddp_of_one_check(params: dict, tokens: Path, work: Path, reference: dict, compiled: bool,
                     device: torch.device) -> dict:
    """The reference run as rank 0 of a DDP process group of one: same losses, no_sync exercised."""
    from ngptlab.train import dist
    from ngptlab.train.jobs import make_job
    from ngptlab.train.loop import _train_run

    class OneRank(dist.Topology):  # a real DDP group of one: the loop's distributed path at world size 1
        @property
        def distributed(self) -> bool:
            return True

    root = work / "path-ddp"
    link_tokens(root, params["train"]["source"], tokens)
    backend = "nccl" if device.type == "cuda" else "gloo"
    settings = of_section("train", {**params["train"], "precision": "bf16", "compile": compiled})
    spec = next(r for r in enumerate_runs(Params.of(params)) if r.arm == "gpt")
    if torch_dist.is_initialized():
        raise RuntimeError("bench gpu: a process group is already initialised; run bench gpu on its own")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    torch._dynamo.reset()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ngptlab-pg-") as rendezvous:
        torch_dist.init_process_group(backend, init_method=f"file://{rendezvous}/store", rank=0,
                                      world_size=1)
        try:
            code = _train_run(make_job(spec, settings, root), settings, OneRank(0, 1, 0, device),
                              fresh=False, progress=False)
        finally:
            torch_dist.destroy_process_group()
    if code != 0:
        raise RuntimeError(f"bench gpu: the DDP run of {spec.name} exited {code}")
    got = losses(root, spec)
    resolved = summary(root, spec)["params"]
    return {"backend": backend, "world_size": resolved["world_size"],
            "grad_accum_steps": resolved["grad_accum_steps"], "losses": got,
            "max_abs_diff": max_diff(got, reference["bf16_losses"]), "seconds": time.perf_counter() - started}


def path_checks(params: dict, tokens: Path, work: Path, reference: dict, compiled: bool,
                device: torch.device, compare_steps: int) -> dict:
    return {"arm": "gpt", "compiled": compiled, "precision": "bf16",
            "ddp": ddp_of_one_check(params, tokens, work, reference, compiled, device),
            "resume": resume_check(params, tokens, work, reference, compiled),
            "checkpointing": checkpointing_check(params, tokens, work, reference, compiled, compare_steps)}
