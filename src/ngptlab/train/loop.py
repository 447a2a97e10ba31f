"""Train one job (a run, or a WSD trunk segment: train/jobs.py) with its trainer (train/trainer.py): its
schedule, fixed eval windows, checkpoints, and a run's final evaluation on windows of its own.

Read top to bottom: the settings a run records, then train_run, which resumes, loops, handles SIGTERM/SIGINT
and divergence, and hands how the job ended (train/outcome.py) to the job's writers.

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
from pathlib import Path
from typing import IO, Any

import torch
from tqdm import tqdm

from ngptlab import runlock
from ngptlab.errors import DataError, ParamsError
from ngptlab.files import write_text_atomic
from ngptlab.grid.runs import RunSpec
from ngptlab.grid.trunks import Segment
from ngptlab.jobclock import EXIT_RESUMABLE
from ngptlab.models.size import causal_flops_per_token
from ngptlab.observe.angular import IntervalStart
from ngptlab.observe.observer import Observer, restart_points
from ngptlab.prepare.shards import load_meta
from ngptlab.revision import code_revision
from ngptlab.settings import Condition, Params, Train
from ngptlab.tensorboard_view import TensorBoardView
from ngptlab.train import dist, final_eval, nonfinite, restore, state, threads
from ngptlab.train.batches import BatchPlan, plan_batches
from ngptlab.train.context import RunContext
from ngptlab.train.data import Shards, data_record, open_shards
from ngptlab.train.execution import execution_record
from ngptlab.train.job_limit import JobLimit
from ngptlab.train.jobs import Job, make_job
from ngptlab.train.log import clock, eval_line, say
from ngptlab.train.outcome import Outcome
from ngptlab.train.outputs import finite_or_none
from ngptlab.train.progress import Progress
from ngptlab.train.stop import StopRequest, divergence
from ngptlab.train.stop import diagnostics as stop_diagnostics
from ngptlab.train.throughput import mfu_of
from ngptlab.train.timing import StepTimer, record_memory
from ngptlab.train.trainer import Trainer, vocab_multiple


def crossed(tokens: int, batch_tokens: int, every: int) -> bool:
    """Did the last step carry `tokens` across a multiple of `every`?"""
    return tokens // every > (tokens - batch_tokens) // every


def resolved_params(train: Train, plan: BatchPlan, trainer: Trainer, topo: dist.Topology) -> dict[str, Any]:
    """The train settings this run actually used, with everything derived from them; not the settings of how
    it ran (train/execution.py), which its timing file records."""
    keys = ("source", "batch_sequences", "micro_batch_tokens", "warmup_max_fraction", "grad_clip",
            "eval_every_tokens", "eval_windows", "eval_seed", "diverge_loss", "compile")
    return {**{k: getattr(train, k) for k in keys}, "log_every_tokens": log_every_tokens(train),
            "final_eval_tokens": train.final_eval_tokens,
            "vocab_multiple": vocab_multiple(train),
            "activation_checkpointing": trainer.model.activation_checkpointing,
            "device": topo.device.type,
            "precision": "bf16-autocast" if trainer.precision == "bf16" else "fp32",
            "world_size": topo.world_size, "micro_batch_seqs": plan.micro_seqs,
            "grad_accum_steps": plan.accum_steps, "steps": plan.steps,
            "batch_tokens": plan.batch_tokens,
            "warmup_steps": trainer.schedule.warmup_steps,  # this run's, after the small-budget rule
            "weight_decay": trainer.recipe.weight_decay, "betas": list(trainer.recipe.betas),
            "eps": trainer.recipe.eps, **rotation_record(trainer),
            **trainer.schedule.record()}  # cosine: no keys, as before WSD


def rotation_record(trainer: Trainer) -> dict[str, Any]:
    """The peak angles of the arm's rotational matrices and their running mean's beta (models/rotational.py);
    no keys for an arm without them, as before they existed."""
    angles = trainer.recipe.rotation_angles(trainer.spec.lr)
    return {"rotation": angles, "rotation_beta": trainer.recipe.rotation_beta} if angles else {}


def run_config(ctx: RunContext, trainer: Trainer, shards: Shards) -> dict[str, Any]:
    """The config a checkpoint's header and config.json carry: the model to rebuild, the run, its settings."""
    spec = ctx.spec
    return {"format": "ngptlab.run/1", "run": ctx.name, "arm": spec.arm, "scale": spec.scale,
            "shape": trainer.shape.as_dict(),
            "vocab_size": shards.vocab_size, "vocab_multiple": trainer.model.vocab_multiple,
            "context": spec.context, "spec": spec.as_dict(),
            "train": resolved_params(ctx.train, ctx.plan, trainer, ctx.topo), "data": ctx.data,
            "code_revision": code_revision()}


def log_every_tokens(train: Train) -> int:
    """Metrics row interval (optional key train.log_every_tokens; default: every step)."""
    return int(train.log_every_tokens)  # the default 1: a row after every step


def train_run(spec: RunSpec | Segment, train: Train, root: str | Path = ".", fresh: bool = False,
              progress: bool = True, condition: Condition | None = None, params: Params | None = None) -> int:
    """Train a run or a trunk segment with the `train` section of params; artifacts under `root`. Returns the
    exit code. `condition`, the condition section of params, adds the condition numbers to the metrics rows
    (observe/observer.py; None: the angular update rate only). `params`, the whole params file, is what the
    job's identity is read from (train/identity.py; None: `train` and the schema's defaults)."""
    topo = dist.setup(train.device)
    say(dist.visibility(topo))  # every rank: which GPUs each node's processes see, in the run's log
    try:
        return _train_run(make_job(spec, train, root, params), train, topo, fresh, progress, condition)
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


def _train_run(job: Job, train: Train, topo: dist.Topology, fresh: bool, progress: bool,
               condition: Condition | None = None) -> int:
    plan = plan_batches(train, job.spec, topo.world_size, job.steps)
    data = data_record(load_meta(job.paths.tokens_dir), train.source)
    ctx = RunContext(job, train, topo, plan, data, job.identity(data), progress, condition)
    if job.done(ctx.expected, topo.is_main):
        return 0
    lock = _lock(job.lock_dir, job.name) if topo.is_main else None
    try:
        with threads.pinned():  # the launch never changes the bytes (train/threads.py)
            return _train_locked(ctx, fresh)
    finally:
        if lock:
            lock.release()


def _train_locked(ctx: RunContext, fresh: bool) -> int:
    main, paths, topo = ctx.main, ctx.paths, ctx.topo
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

    trainer = Trainer(ctx.spec, ctx.train, shards, ctx.plan, topo, ctx.job.schedule)
    config = run_config(ctx, trainer, shards)
    # its own checkpoint, a trunk's kept state or step 0; over several processes rank 0 alone reads it
    model, optimizer = trainer.model, trainer.optimizer
    start = restore.restore(topo, model, optimizer, lambda: restore.read_start(
        paths.state_dir, lambda: ctx.job.start(ctx.data), model, optimizer, ctx.expected))
    progress = start.progress
    progress.identity = ctx.expected
    metrics_path = paths.state_dir / state.METRICS
    rows = []
    if main:  # the rows up to the checkpoint we start from; rows logged after it will be logged again
        saved = start.rows_from / state.METRICS
        rows = saved.read_text().splitlines(keepends=True)[: progress.metrics_rows] if saved.exists() else []
        write_text_atomic(metrics_path, "".join(rows))
    metrics = open(metrics_path, "a") if main else None  # noqa: SIM115
    watched = main and ctx.train.tensorboard
    events = TensorBoardView(paths.tensorboard if watched else None, map(json.loads, rows), say)
    stop = StopRequest()
    stop.install()
    try:
        return _loop(ctx, trainer, config, progress, metrics, events, stop, start.interval)
    finally:
        stop.restore()
        trainer.attention.close()  # torch's attention settings as they were before this job
        events.close()
        if metrics:
            metrics.close()


def _loop(ctx: RunContext, trainer: Trainer, config: dict, progress: Progress, metrics: IO[str] | None,
          events: TensorBoardView, stop: StopRequest, interval: IntervalStart | None) -> int:
    job, train, topo, plan, spec, paths = ctx.job, ctx.train, ctx.topo, ctx.plan, ctx.spec, ctx.paths
    main, batch_tokens = ctx.main, plan.batch_tokens
    started, wall_before = time.perf_counter(), progress.wall_s
    step = progress.step
    first_step = step
    timer = StepTimer(trainer.device, trainer.compiled, progress)  # which steps count: train/timing.py
    limit = JobLimit(train, trainer.n_params)  # the job's own clock
    retries = progress.nonfinite_retries  # steps computed again: train/attention.py
    for name in progress.attention_disabled:  # kernels an earlier start of this job disabled
        trainer.attention.disable(name)
    # the weights' angular update rate and conditioning at evaluation points, from the state we start from
    # (its interval: the one it kept, where it is a checkpoint of this job's own)
    observer = Observer(trainer.model, step, ctx.condition, train.condition_every_evals,
                        restart_points(train, spec), interval, train.step_angle_every) if main else None
    diagnostics, loss, grad_norm = None, math.nan, math.nan  # nan: no step here (resumed at the end)
    # the log's causal MFU beside MFU: the FLOPs a causal kernel computes over those MFU counts
    causal_flops = causal_flops_per_token(trainer.flops_per_token, trainer.shape, spec.context)
    causal_share = causal_flops / trainer.flops_per_token
    bar = tqdm(total=plan.steps * batch_tokens, initial=step * batch_tokens, unit="tok", unit_scale=True,
               desc=job.name, disable=not (main and ctx.show_progress), dynamic_ncols=True, file=sys.stderr)
    if main:
        resumed = f"resumed from step {step}" if step else "from step 0"
        say(f"start {job.name}: {resumed} of {plan.steps} ({plan.steps * batch_tokens:,} tokens, "
            f"{plan.batch_tokens:,} per step), arm {spec.arm}, lr {spec.lr:g}, on {topo.device.type} "
            f"x{topo.world_size}, attention {trainer.attention.chosen()}")

    def checkpoint() -> None:
        began = time.perf_counter()
        timer.read(wait=True)
        progress.step, progress.wall_s = step, wall_before + time.perf_counter() - started
        progress.attention_disabled = list(trainer.attention.disabled)
        record_memory(trainer.device, progress)
        if main:
            metrics.flush()
            events.flush()
            state.save_state(paths.state_dir, trainer.model, trainer.optimizer, config, progress,
                             observer.interval_start(step))
        dist.barrier(topo)
        limit.checkpoint_done(time.perf_counter() - began)

    def must_stop() -> bool:
        return stop.signal is not None or limit.must_stop()

    while step < plan.steps:
        timer.begin()
        loss, grad_norm, stopping, retried = nonfinite.forward_backward(trainer, step, retries, must_stop())
        problem = divergence(loss, grad_norm, train.diverge_loss)
        if problem:  # no update: the weights stay the last finite state
            diagnostics = stop_diagnostics(problem, step, batch_tokens, loss, grad_norm, progress,
                                           trainer.model)
            if main:  # the failed step's row, so that curves show where the run stopped
                row = {"step": step + 1, "tokens": (step + 1) * batch_tokens,
                       "train_loss": finite_or_none(loss), "lr": spec.lr * trainer.schedule.factor(step),
                       "grad_norm": finite_or_none(grad_norm), "diverged": True}
                metrics.write(json.dumps(row, allow_nan=False) + "\n")
                metrics.flush()
                events.add(row)
            break
        with observer.stepping(step) if observer else contextlib.nullcontext():  # the step's angle, if due
            lr = trainer.update(step)
        timer.end(retried)
        step += 1
        tokens = step * batch_tokens
        timer.read()  # the steps whose CUDA events have completed: no synchronisation
        bar.update(batch_tokens)
        overall = progress.timed_steps * batch_tokens / progress.train_s if progress.train_s > 0 else 0.0
        bar.set_postfix_str(f"loss {loss:.3f} tok/s {overall:,.0f}", refresh=False)

        # a run evaluates at its budget too; a trunk segment's end is no budget (its branches evaluate there)
        evaluate = crossed(tokens, batch_tokens, train.eval_every_tokens) or (step == plan.steps
                                                                                  and job.ends_run)
        if evaluate or crossed(tokens, batch_tokens, log_every_tokens(train)):
            tokens_per_s = timer.take_window().rate(batch_tokens)  # the timed steps read since the last row
            row = {"step": step, "tokens": tokens, "train_loss": loss, "lr": lr, "grad_norm": grad_norm,
                   "tokens_per_s": tokens_per_s}
            utilisation = mfu_of(trainer.flops_per_token, tokens_per_s, trainer.peak.flops, topo.world_size)
            if utilisation is not None:
                row["mfu"] = utilisation
            if evaluate:
                val, _ = trainer.evaluator.loss(trainer.eval_offsets)  # the curve: the cheap windows
                row["val_loss"] = finite_or_none(val)
                if not math.isfinite(val):
                    diagnostics = stop_diagnostics(f"val loss is {val}", step, batch_tokens, loss, grad_norm,
                                                   progress)
                    row["diverged"] = True
                else:
                    progress.last_val_loss, progress.last_val_step = val, step
                if observer:
                    row.update(observer.observe(trainer.model, step, tokens // train.eval_every_tokens,
                                                step == plan.steps and job.ends_run))
            if main:
                metrics.write(json.dumps(row, allow_nan=False) + "\n")
                metrics.flush()
                events.add(row)
                if evaluate:
                    events.flush()
                    elapsed = time.perf_counter() - started
                    rate = (step - first_step) * batch_tokens / elapsed if elapsed > 0 else 0.0
                    say(eval_line(job.name, step, plan, row, rate, causal_share))
            progress.metrics_rows += 1
            if diagnostics:
                break
        if observer and not evaluate:
            observer.passed(trainer.model, step)
        limit.step_done()
        if crossed(tokens, batch_tokens, train.checkpoint_every_tokens) or step == plan.steps:
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
    attention_backend, timing_method = trainer.attention.record(), timer.method
    record_memory(trainer.device, progress)
    wall_s = wall_before + time.perf_counter() - started
    final = None
    if job.ends_run and not diagnostics:  # the run's final loss (after wall_s: not training time)
        final = final_eval.evaluate(trainer.evaluator, trainer.final_offsets)
        if not math.isfinite(final.loss):  # a completed run always has a finite final loss
            diagnostics = stop_diagnostics(f"final val loss is {final.loss}", step, batch_tokens, loss,
                                           grad_norm, progress)
    if main:
        if final is not None and not diagnostics:
            events.final(step, step * batch_tokens, final.loss, final.se)
        outcome = Outcome(model=trainer.model, config=config, progress=progress, steps=step,
                          batch_tokens=batch_tokens, wall_s=wall_s, diagnostics=diagnostics, final=final,
                          eval_offsets=trainer.eval_offsets, final_offsets=trainer.final_offsets,
                          flops_per_token=trainer.flops_per_token, peak=trainer.peak,
                          attention_backend=attention_backend, timing_method=timing_method,
                          threads=torch.get_num_threads(), execution=execution_record(train, spec.scale))
        written = job.finish(outcome, ctx.expected)
        ended = (f"diverged at step {step} ({diagnostics['reason']})" if diagnostics else
                 f"completed {step} steps, final val loss {final.loss:.4f} ± {final.se:.4f}" if final
                 else f"completed {step} steps")
        say(f"end {job.name}: {ended}; {clock(wall_s)} of training in all; outputs {written}")
    dist.barrier(topo)
    return 0
