"""Train one job (a run, or a WSD trunk segment: train/jobs.py): AdamW with the arm's recipe, its schedule,
fixed eval windows, checkpoints, and a run's final evaluation on windows of its own.

Read top to bottom: batch arithmetic, the Trainer (one step, evaluation), then train_run, which resumes,
loops, handles SIGTERM/SIGINT and divergence, and writes the outputs.

Exit codes: 0 = done (completed or diverged, outputs written; also a rerun of a finished run),
EXIT_RESUMABLE (75, EX_TEMPFAIL) = stopped after a checkpoint, by SIGTERM/SIGINT or by the job's own clock
(train.max_job_minutes: train/job_limit.py); rerun to resume.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from ngptlab import runlock
from ngptlab.batch import split_batch, steps_per_run
from ngptlab.errors import DataError, ParamsError
from ngptlab.files import write_text_atomic
from ngptlab.grid.resources import run_shape
from ngptlab.grid.runs import RunSpec
from ngptlab.grid.trunks import Segment, TrunkSpec
from ngptlab.jobclock import EXIT_RESUMABLE
from ngptlab.models import build_seeded, train_flops_per_token
from ngptlab.prepare.shards import load_meta
from ngptlab.revision import code_revision
from ngptlab.schedule import Schedule, WarmupStable, WarmupStableDecay
from ngptlab.train import dist, final_eval, nonfinite, restore, state
from ngptlab.train.attention import Attention
from ngptlab.train.batches import Batches
from ngptlab.train.data import Shards, data_record, eval_offsets, gather, open_shards
from ngptlab.train.job_limit import JobLimit
from ngptlab.train.jobs import RunJob, SegmentJob, make_job
from ngptlab.train.outputs import finite_or_none
from ngptlab.train.progress import clock, eval_line, say
from ngptlab.train.stop import StopRequest, divergence
from ngptlab.train.stop import diagnostics as stop_diagnostics
from ngptlab.train.throughput import detect_peak, mfu_of
from ngptlab.train.timing import StepTimer, memory_record

Job = RunJob | SegmentJob


# ----------------------------------------------------------------------------------------------------------
# Batch arithmetic: the global batch in sequences is fixed by params (the paper: 512 at every context),
# whatever the number of processes.


@dataclass(frozen=True)
class BatchPlan:
    context: int
    seqs_global: int  # sequences per optimizer step, all ranks together
    seqs_per_rank: int
    micro_seqs: int  # sequences per forward pass
    accum_steps: int  # forward passes per rank per optimizer step
    steps: int  # optimizer steps in the budget

    @property
    def batch_tokens(self) -> int:
        return self.seqs_global * self.context


def plan_batches(train: dict, spec: RunSpec | TrunkSpec, world_size: int,
                 steps: int | None = None) -> BatchPlan:
    """world_size counts every process of the run, on all its nodes (torchrun's WORLD_SIZE); `steps`: where
    the job ends (default: the run's budget)."""
    context, seqs_global = spec.context, train["batch_sequences"]
    split = split_batch(seqs_global, train["micro_batch_tokens"], context, world_size)
    steps = steps_per_run(train, context, spec.budget) if steps is None else steps
    if steps < 1:
        raise ParamsError(f"budget {spec.budget} tokens is less than one batch "
                          f"(train.batch_sequences {seqs_global} x context {context})")
    return BatchPlan(context, seqs_global, split.seqs_per_rank, split.micro_seqs, split.accum_steps, steps)


def vocab_multiple(train: dict) -> int:
    """train.vocab_multiple: pad the embedding and LM-head rows to a multiple of it (absent: 1, none)."""
    return int(train.get("vocab_multiple", 1))


def resolve_precision(setting: str, device: torch.device) -> str:
    """train.precision: auto (bf16 autocast on a GPU, fp32 on a CPU), bf16 (autocast on either) or fp32."""
    if setting not in ("auto", "bf16", "fp32"):
        raise ParamsError(f"train.precision must be auto, bf16 or fp32, got {setting!r}")
    if setting == "auto":
        return "bf16" if device.type == "cuda" else "fp32"
    return setting


def crossed(tokens: int, batch_tokens: int, every: int) -> bool:
    """Did the last step carry `tokens` across a multiple of `every`?"""
    return tokens // every > (tokens - batch_tokens) // every


# ----------------------------------------------------------------------------------------------------------
# The trainer: model, optimizer, one step, evaluation.


class Trainer:
    def __init__(self, spec: RunSpec | TrunkSpec, train: dict, shards: Shards, plan: BatchPlan,
                 topo: dist.Topology, schedule: Schedule | WarmupStableDecay | WarmupStable):
        self.spec, self.train, self.shards, self.plan, self.topo = spec, train, shards, plan, topo
        self.device = topo.device
        self.shape = run_shape(train, spec.scale)
        # seeded: the same initial weights on every rank (DDP also broadcasts rank 0's) and in `condition`
        self.model, self.recipe = build_seeded(spec.arm, self.shape, shards.vocab_size, spec.context,
                                               spec.seed, vocab_multiple(train))
        self.model.to(self.device)
        self.model.activation_checkpointing = bool(train.get("activation_checkpointing", False))
        groups = self.recipe.param_groups(self.model, spec.lr)
        for group in groups:
            group["base_lr"] = group["lr"]  # the schedule scales every group's own lr (multipliers kept)
        fused = {"fused": True} if self.device.type == "cuda" else {}
        self.optimizer = torch.optim.AdamW(groups, lr=spec.lr, betas=tuple(self.recipe.betas),
                                           eps=self.recipe.eps, **fused)
        self.schedule = schedule  # the job's (train/jobs.py)
        self.eval_offsets = eval_offsets(len(shards.val), spec.context, train["eval_windows"],
                                         train["eval_seed"])
        # every job computes them, so a val shard too small for them fails before any training
        self.final_offsets = final_eval.windows(train, len(shards.val), spec.context)
        self.flops_per_token = train_flops_per_token(spec.arm, self.shape, shards.vocab_size, spec.context)
        self.peak = detect_peak(self.device, train.get("peak_tflops"))  # for MFU; None on an unknown device
        self.precision = resolve_precision(train.get("precision", "auto"), self.device)
        self.autocast = (torch.autocast(self.device.type, dtype=torch.bfloat16) if self.precision == "bf16"
                         else contextlib.nullcontext())
        self.compiled = bool(train["compile"])
        self.forward = torch.compile(self.model) if self.compiled else self.model
        self.n_params = sum(p.numel() for p in self.model.parameters())
        self.wrapped = dist.ddp(self.forward, topo, self.n_params) if topo.distributed else self.forward
        self.batches = Batches(shards, plan, spec.seed, topo.rank, self.device)
        self.attention = Attention(self.device, (plan.micro_seqs, self.shape.n_head, spec.context,
                                                 self.shape.d_model // self.shape.n_head),
                                   torch.bfloat16 if self.precision == "bf16" else torch.float32)

    def forward_backward(self, step: int, stop_requested: bool = False) -> tuple[float, float, bool]:
        """Gradients of the global batch of `step`; returns (mean train loss, grad norm before clipping, a
        stop asked on some rank). The loss, the norm and the stop flag come to the host together, once: the
        step's one synchronisation, before any update, after the next step's batch is staged. The stop flag
        rides on the loss's all-reduce: no collective of its own (train/stop.py)."""
        plan = self.plan
        loss_sum = torch.zeros((), device=self.device)
        for micro, (x, y) in enumerate(self.batches.get(step)):
            last = micro == plan.accum_steps - 1
            # DDP all-reduces gradients only on the last micro-batch of the step.
            sync = self.wrapped.no_sync() if self.topo.distributed and not last else contextlib.nullcontext()
            with sync:
                with self.autocast:
                    _, loss = self.wrapped(x, y)
                (loss / plan.accum_steps).backward()
            loss_sum += loss.detach().float()
        self.batches.prefetch(step + 1)
        flag = torch.full((), float(stop_requested), device=self.device)
        summed = dist.all_sum(torch.stack([loss_sum / plan.accum_steps, flag]), self.topo)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.recipe.clip_parameters(self.model),
                                                   self.train["grad_clip"])
        norm = grad_norm.float().to(summed.device)  # already there, unless no parameter had a gradient
        host = torch.stack([summed[0] / self.topo.world_size, norm, summed[1]]).tolist()
        loss, norm, stop = host
        return loss, norm, stop > 0

    def update(self, step: int) -> float:
        """Apply the step's learning rate, step AdamW, then the arm's constraint (renorm, polar...)."""
        factor = self.schedule.factor(step)
        for group in self.optimizer.param_groups:
            group["lr"] = group["base_lr"] * factor
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        with torch.no_grad():
            self.recipe.post_step(self.model)
        return self.spec.lr * factor

    @torch.no_grad()
    def evaluate(self, offsets: np.ndarray) -> tuple[float, float]:
        """Mean over `offsets`' windows of each one's mean loss, and its standard error; split over ranks."""
        n, context = len(offsets), self.plan.context
        losses = torch.zeros(n, dtype=torch.float64, device=self.device)
        mine = np.arange(self.topo.rank, n, self.topo.world_size)
        for start in range(0, len(mine), self.plan.micro_seqs):
            chunk = mine[start:start + self.plan.micro_seqs]
            x, y = gather(self.shards.val, offsets[chunk], context, self.shards.vocab_size)
            x, y = self.batches.to_device(x), self.batches.to_device(y)
            with self.autocast:
                logits, _ = self.forward(x)
            per_token = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1),
                                        reduction="none")
            per_window = per_token.view(len(chunk), context).mean(1)
            losses[torch.as_tensor(chunk, device=self.device)] = per_window.double()
        return final_eval.mean_and_se(dist.all_sum(losses, self.topo))


# ----------------------------------------------------------------------------------------------------------
# One run, start to finish.


def resolved_params(train: dict, plan: BatchPlan, trainer: Trainer, topo: dist.Topology) -> dict[str, Any]:
    """The train settings this run actually used, with everything derived from them."""
    keys = ("source", "batch_sequences", "micro_batch_tokens", "warmup_max_fraction", "grad_clip",
            "eval_every_tokens", "eval_windows", "eval_seed", "diverge_loss", "compile",
            "checkpoint_every_tokens")
    return {**{k: train[k] for k in keys}, "log_every_tokens": log_every_tokens(train),
            "final_eval_tokens": final_eval.setting(train),
            "vocab_multiple": vocab_multiple(train),
            "activation_checkpointing": trainer.model.activation_checkpointing,
            "device": topo.device.type,
            "precision": "bf16-autocast" if trainer.precision == "bf16" else "fp32",
            "world_size": topo.world_size, "micro_batch_seqs": plan.micro_seqs,
            "grad_accum_steps": plan.accum_steps, "steps": plan.steps,
            "batch_tokens": plan.batch_tokens,
            "warmup_steps": trainer.schedule.warmup_steps,  # this run's, after the small-budget rule
            "weight_decay": trainer.recipe.weight_decay, "betas": list(trainer.recipe.betas),
            "eps": trainer.recipe.eps, **trainer.schedule.record()}  # cosine: no keys, as before WSD


def log_every_tokens(train: dict) -> int:
    """Metrics row interval (optional key train.log_every_tokens; default: every step)."""
    return int(train.get("log_every_tokens") or 1)  # 1: a row after every step


def train_run(spec: RunSpec | Segment, train: dict, root: str | Path = ".", fresh: bool = False,
              progress: bool = True) -> int:
    """Train a run or a trunk segment with the `train` section of params; artifacts under `root`. Returns the
    exit code."""
    topo = dist.setup(train["device"])
    say(dist.visibility(topo))  # every rank: which GPUs each node's processes see, in the run's log
    try:
        return _train_run(make_job(spec, train, root), train, topo, fresh, progress)
    finally:
        dist.teardown(topo)


def _lock(lock_dir: Path, name: str) -> runlock.RunLock:
    """An exclusive lock so that two processes never train the same run (or trunk) at once, also where
    flock does not work across nodes (ngptlab/runlock.py)."""
    try:
        return runlock.acquire(lock_dir / ".lock")
    except runlock.LockHeld as held:
        raise ParamsError(f"{name} is already being trained by another process "
                          f"(lock {held.path}, held by {held.holder})") from None


def _train_run(job: Job, train: dict, topo: dist.Topology, fresh: bool, progress: bool) -> int:
    plan = plan_batches(train, job.spec, topo.world_size, job.steps)
    data = data_record(load_meta(job.paths.tokens_dir), train["source"])
    expected = job.fingerprint(data)
    if job.done(expected, topo.is_main):
        return 0
    lock = _lock(job.lock_dir, job.name) if topo.is_main else None
    try:
        return _train_locked(job, train, topo, fresh, progress, plan, data, expected)
    finally:
        if lock:
            lock.release()


def _train_locked(job: Job, train: dict, topo: dist.Topology, fresh: bool, progress: bool, plan: BatchPlan,
                  data: dict, expected: dict) -> int:
    main, paths, spec = topo.is_main, job.paths, job.spec
    if main and fresh and paths.state_dir.is_dir():  # --fresh: forget any checkpoint (keeping the lock)
        for item in paths.state_dir.iterdir():
            if item.is_dir():
                state.discard_state(item)
            elif not item.name.startswith(".lock"):  # .lock and its owner record
                item.unlink()
    # Rank 0 recomputes the shard hashes against meta.json; the others wait for its verdict.
    failure = None
    if main:
        try:
            open_shards(paths.tokens_dir, verify=True)
        except DataError as err:
            failure = err
    if dist.any_rank(failure is not None, topo):
        raise failure or DataError(f"{paths.tokens_dir}: rank 0 found the token shards inconsistent")
    shards = open_shards(paths.tokens_dir, verify=False)

    trainer = Trainer(spec, train, shards, plan, topo, job.schedule)
    params = resolved_params(train, plan, trainer, topo)
    config = {"format": "ngptlab.run/1", "run": job.name, "arm": spec.arm, "scale": spec.scale,
              "shape": trainer.shape.as_dict(),
              "vocab_size": shards.vocab_size, "vocab_multiple": trainer.model.vocab_multiple,
              "context": spec.context, "spec": spec.as_dict(),
              "train": params, "data": data, "code_revision": code_revision()}
    # its own checkpoint, a trunk's kept state or step 0; over several processes rank 0 alone reads it
    start = restore.restore(topo, trainer.model, trainer.optimizer,
                            lambda: restore.read_start(job, trainer.model, trainer.optimizer, expected, data))
    info, rows_from = start.info, start.rows_from
    info["fingerprint"] = expected
    metrics_path = paths.state_dir / state.METRICS
    if main:  # the rows up to the checkpoint we start from; rows logged after it will be logged again
        saved = rows_from / state.METRICS
        rows = saved.read_text().splitlines(keepends=True)[: info["metrics_rows"]] if saved.exists() else []
        write_text_atomic(metrics_path, "".join(rows))
    metrics = open(metrics_path, "a") if main else None  # noqa: SIM115
    stop = StopRequest()
    stop.install()
    try:
        return _loop(job, train, topo, plan, trainer, params, config, info, metrics, stop, progress, expected)
    finally:
        stop.restore()
        trainer.attention.close()  # torch's attention settings as they were before this job
        if metrics:
            metrics.close()


def _loop(job: Job, train: dict, topo: dist.Topology, plan: BatchPlan, trainer: Trainer, params: dict,
          config: dict, info: dict, metrics, stop: StopRequest, progress: bool, expected: dict) -> int:
    main, batch_tokens, spec, paths = topo.is_main, plan.batch_tokens, job.spec, job.paths
    started, wall_before = time.perf_counter(), info["wall_s"]
    step = info["step"]
    first_step = step
    timer = StepTimer(trainer.device, trainer.compiled, info)  # which steps count: train/timing.py
    limit = JobLimit(train, trainer.n_params)  # the job's own clock
    retries = info.setdefault("nonfinite_retries", [])  # steps computed again: train/attention.py
    for name in info.get("attention_disabled", []):  # kernels an earlier start of this job disabled
        trainer.attention.disable(name)
    diagnostics, loss, grad_norm = None, math.nan, math.nan  # nan: no step here (resumed at the end)
    bar = tqdm(total=plan.steps * batch_tokens, initial=step * batch_tokens, unit="tok", unit_scale=True,
               desc=job.name, disable=not (main and progress), dynamic_ncols=True, file=sys.stderr)
    if main:
        resumed = f"resumed from step {step}" if step else "from step 0"
        say(f"start {job.name}: {resumed} of {plan.steps} ({plan.steps * batch_tokens:,} tokens, "
            f"{plan.batch_tokens:,} per step), arm {spec.arm}, lr {spec.lr:g}, on {topo.device.type} "
            f"x{topo.world_size}, attention {trainer.attention.chosen()}")

    def checkpoint() -> None:
        began = time.perf_counter()
        timer.read(wait=True)
        info.update(step=step, wall_s=wall_before + time.perf_counter() - started,
                    attention_disabled=list(trainer.attention.disabled))
        memory_record(trainer.device, info)
        if main:
            metrics.flush()
            state.save_state(paths.state_dir, trainer.model, trainer.optimizer, config, info)
        dist.barrier(topo)
        limit.checkpoint_done(time.perf_counter() - began)

    def must_stop() -> bool:
        return stop.signal is not None or limit.must_stop()

    while step < plan.steps:
        timer.begin()
        loss, grad_norm, stopping, retried = nonfinite.forward_backward(trainer, step, retries, must_stop())
        problem = divergence(loss, grad_norm, train["diverge_loss"])
        if problem:  # no update: the weights stay the last finite state
            diagnostics = stop_diagnostics(problem, step, batch_tokens, loss, grad_norm, info)
            if main:  # the failed step's row, so that curves show where the run stopped
                row = {"step": step + 1, "tokens": (step + 1) * batch_tokens,
                       "train_loss": finite_or_none(loss), "lr": spec.lr * trainer.schedule.factor(step),
                       "grad_norm": finite_or_none(grad_norm), "diverged": True}
                metrics.write(json.dumps(row, allow_nan=False) + "\n")
                metrics.flush()
            break
        lr = trainer.update(step)
        timer.end(retried)
        step += 1
        tokens = step * batch_tokens
        timer.read()  # the steps whose CUDA events have completed: no synchronisation
        bar.update(batch_tokens)
        overall = info["timed_steps"] * batch_tokens / info["train_s"] if info["train_s"] > 0 else 0.0
        bar.set_postfix_str(f"loss {loss:.3f} tok/s {overall:,.0f}", refresh=False)

        # a run evaluates at its budget too; a trunk segment's end is no budget (its branches evaluate there)
        evaluate = crossed(tokens, batch_tokens, train["eval_every_tokens"]) or (step == plan.steps
                                                                                  and job.ends_run)
        if evaluate or crossed(tokens, batch_tokens, log_every_tokens(train)):
            tokens_per_s = timer.take_window().rate(batch_tokens)  # the timed steps read since the last row
            row = {"step": step, "tokens": tokens, "train_loss": loss, "lr": lr, "grad_norm": grad_norm,
                   "tokens_per_s": tokens_per_s}
            utilisation = mfu_of(trainer.flops_per_token, tokens_per_s, trainer.peak.flops, topo.world_size)
            if utilisation is not None:
                row["mfu"] = utilisation
            if evaluate:
                val, _ = trainer.evaluate(trainer.eval_offsets)  # the curve: the cheap windows, at every eval
                row["val_loss"] = finite_or_none(val)
                if not math.isfinite(val):
                    diagnostics = stop_diagnostics(f"val loss is {val}", step, batch_tokens, loss, grad_norm,
                                                   info)
                    row["diverged"] = True
                else:
                    info.update(last_val_loss=val, last_val_step=step)
            if main:
                metrics.write(json.dumps(row, allow_nan=False) + "\n")
                metrics.flush()
                if evaluate:
                    elapsed = time.perf_counter() - started
                    rate = (step - first_step) * batch_tokens / elapsed if elapsed > 0 else 0.0
                    say(eval_line(job.name, step, plan, row, rate))
            info["metrics_rows"] += 1
            if diagnostics:
                break
        limit.step_done()
        if crossed(tokens, batch_tokens, train["checkpoint_every_tokens"]) or step == plan.steps:
            checkpoint()
            checkpointed = True
        else:
            checkpointed = False
        # every rank saw the same flag, on the step's own all-reduce; one process reads its own at once
        if stopping if topo.distributed else must_stop():
            if not checkpointed:
                checkpoint()
            bar.close()
            by_clock = stop.signal is None and limit.must_stop()
            if by_clock:
                dist.end_without_restart(topo)
            if main:
                why = (f"signal {stop.signal}" if stop.signal is not None else limit.reason() if by_clock
                       else "a stop asked on another rank")
                print(f"\nngptlab train: {job.name} interrupted at step {step}/{plan.steps} ({why}); "
                      f"checkpoint saved, rerun the same command to resume (exit {EXIT_RESUMABLE})",
                      file=sys.stderr)
            return EXIT_RESUMABLE
    bar.close()

    timer.read(wait=True)
    info.update(attention_backend=trainer.attention.record(), timing_method=timer.method)
    memory_record(trainer.device, info)
    wall_s = wall_before + time.perf_counter() - started
    if job.ends_run and not diagnostics:  # the run's final loss (after wall_s: not training time)
        info["final_eval"] = final = final_eval.evaluate(trainer)
        if not math.isfinite(final["loss"]):  # a completed run always has a finite final loss
            diagnostics = stop_diagnostics(f"final val loss is {final['loss']}", step, batch_tokens, loss,
                                           grad_norm, info)
    if main:
        written = job.finish(trainer, params, config, info, step, wall_s, diagnostics, expected)
        final = info.get("final_eval")
        outcome = (f"diverged at step {step} ({diagnostics['reason']})" if diagnostics else
                   f"completed {step} steps, final val loss {final['loss']:.4f} ± {final['se']:.4f}" if final
                   else f"completed {step} steps")
        say(f"end {job.name}: {outcome}; {clock(wall_s)} of training in all; outputs {written}")
    dist.barrier(topo)
    return 0
