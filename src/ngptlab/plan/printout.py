"""The plan printed: the runs a params file describes, with their size and cost.

Compute is estimated, not measured: GPU-hours = training FLOPs / (peak FLOP/s x MFU). The defaults are an
H100/H200's dense bf16 peak (989 TFLOP/s) and an MFU of 40%, both stated in the output. Each job is priced
at the tokens it trains (plan/estimate.py): with train.schedule wsd a trunk that several budgets share is
counted once, in its segments' rows, and each WSD run at its cooldown branch. Disk (final checkpoints,
resume state, DVC's cache and remote) is plan/storage.py's, also from the rows.
"""

from __future__ import annotations

import json
from collections import Counter

from ngptlab.grid.enumeration import enumerate_cells
from ngptlab.grid.sweeps import lopsided_sweeps
from ngptlab.plan.checkpointing import AUTO, ESTIMATE_MARGIN
from ngptlab.plan.estimate import estimate_plan, gpu_hours_text
from ngptlab.plan.protocol import describe, has_protocol, projected_params, projection_bound
from ngptlab.plan.runtime import describe_runtimes
from ngptlab.plan.sharing import sharing_lines
from ngptlab.plan.storage import describe_storage, plan_storage
from ngptlab.settings import Params


def print_plan(params: Params, params_file: str, root: str, mfu: float, peak_tflops: float,
               gpu_memory_gb: float, profile_config: str | None, as_json: bool) -> int:
    """The plan of a params file: its runs (and WSD trunk segments) with size, cost, time limits, memory and
    disk, as tables and notes, or as JSON."""
    estimate = {"mfu": mfu, "peak_tflops": peak_tflops, "gpu_memory_gb": gpu_memory_gb}
    plan, projected = estimate_plan(params, **estimate), projection(params, **estimate)
    rows, segments = plan["runs"], plan["trunks"]
    total_flops, total_gpu_hours = plan["total_train_flops"], plan["total_gpu_hours"]
    storage = plan_storage(plan, root, profile_config)
    if as_json:
        print(json.dumps({"params_file": params_file, "mfu": mfu, "peak_tflops": peak_tflops,
                          "cells": enumerate_cells(params), **plan, "projected": projected,
                          "storage": storage}, indent=1))
        return 0
    print_runs(rows, wsd=bool(segments))
    print(f"batch: {params.train.batch_sequences} sequences per step at every context")
    print("nodes x GPUs: per run (train.resources; GPUs per node); wall-h: GPU-h over all the run's GPUs; "
          "limit-h: the Slurm time limit of each of its jobs; jobs: how many (train.max_job_minutes)")
    print("mem-GB: estimated peak memory of one process (weights, gradients, AdamW state, activations at the "
          "micro-batch; plan/memory.py)")
    if segments:
        print("trained: the tokens a WSD run trains itself, its cooldown branch from its branch point; its "
              "FLOPs and GPU-h are those of the branch, and warmup is its trunk's")
        print()
        print_segments(segments)
        print("state-GB: the training state the segment keeps at its end, which branches start from")
    for line in describe_runtimes(params, rows, segments, plan["stages"]):
        print(line)
    for line in checkpointing_lines(params, rows):
        print(line)
    for line in memory_warnings(rows):
        print(f"warning: {line}")
    for line in lopsided_sweeps(params.train):
        print(f"note: {line}; a fair comparison gives every arm as many")
    for line in sharing_lines(plan):
        print(line)
    for line in describe_storage(storage):
        print(line)
    jobs = f"{len(rows)} runs and {len(segments)} trunk segments" if segments else f"{len(rows)} runs"
    print(f"{jobs} in {len(enumerate_cells(params))} cells; {total_flops:.3g} training FLOPs; "
          f"{gpu_hours_text(total_gpu_hours)} GPU-hours at {mfu:.0%} MFU of {peak_tflops:g} TFLOP/s")
    if projected:
        print(f"projected over the whole protocol (train.protocol: {describe(params)}): "
              f"{projected['runs']} runs, {gpu_hours_text(projected['total_gpu_hours'])} GPU-hours"
              f"{projection_bound(params)}")
    return 0


def projection(params: Params, **estimate) -> dict | None:
    """The protocol's projected size and cost (plan/protocol.py), or None for a grid without a protocol."""
    if not has_protocol(params.train):
        return None
    plan = estimate_plan(projected_params(params), **estimate)
    return {"runs": len(plan["runs"]), "trunk_segments": len(plan["trunks"]),
            "total_train_flops": plan["total_train_flops"], "total_gpu_hours": plan["total_gpu_hours"]}


def _wall(r: dict) -> str:
    return f"{r['wall_hours']:>7.3g}" if r["wall_hours"] is not None else f"{'cpu':>7}"


def _trained(r: dict) -> str:
    return f" {r['trained_tokens']:>8.3g}"


def print_table(header: str, lines: list[str]) -> None:
    """A fixed-width table: its header, a rule, its lines, a rule."""
    print(header)
    print("-" * len(header))
    for line in lines:
        print(line)
    print("-" * len(header))


def print_runs(rows: list[dict], wsd: bool) -> None:
    """The run table; a WSD grid's has a `trained` column, the tokens of each run's own job."""
    width = max([52, *(len(r["run"]) for r in rows)])
    trained = f" {'trained':>8}" if wsd else ""
    header = (f"{'run':<{width}} {'arm':<12} {'ctx':>5} {'params':>9} {'tokens':>8}{trained} {'tok/step':>9} "
              f"{'steps':>7} {'warmup':>6} {'lr':>8} {'FLOPs':>9} {'GPU-h':>8} {'nodes x GPUs':>12} "
              f"{'wall-h':>7} {'limit-h':>7} {'jobs':>4} {'mem-GB':>7}")
    print_table(header, [
        f"{r['run']:<{width}} {r['arm']:<12} {r['context']:>5} {r['n_params'] / 1e6:>8.1f}M "
        f"{r['budget']:>8.3g}{_trained(r) if wsd else ''} {r['tokens_per_step']:>9,} "
        f"{r['steps']:>7,} {r['warmup_steps']:>6,} {r['lr']:>8.3g} {r['train_flops']:>9.2e} "
        f"{r['gpu_hours']:>8.3g} {r['nodes']:>6} x {r['gpus_per_node']:<3} {_wall(r)} "
        f"{r['time_limit_min'] / 60:>7.3g} {r['jobs']:>4} {r['memory_gb']:>7.3g}" for r in rows])


def print_segments(segments: list[dict]) -> None:
    """The trunk segments' table: each trains its trunk from `from` to `to` (optimizer steps)."""
    width = max(len(s["segment"]) for s in segments)
    header = (f"{'trunk segment':<{width}} {'arm':<12} {'ctx':>5} {'params':>9} {'from':>7} {'to':>7} "
              f"{'tokens':>8} {'warmup':>6} {'FLOPs':>9} {'GPU-h':>8} {'nodes x GPUs':>12} {'wall-h':>7} "
              f"{'limit-h':>7} {'jobs':>4} {'state-GB':>8}")
    print_table(header, [
        f"{s['segment']:<{width}} {s['arm']:<12} {s['context']:>5} {s['n_params'] / 1e6:>8.1f}M "
        f"{s['start']:>7,} {s['step']:>7,} {s['trained_tokens']:>8.3g} {s['warmup_steps']:>6,} "
        f"{s['train_flops']:>9.2e} {s['gpu_hours']:>8.3g} {s['nodes']:>6} x {s['gpus_per_node']:<3} "
        f"{_wall(s)} {s['time_limit_min'] / 60:>7.3g} {s['jobs']:>4} {s['state_gb']:>8.3g}"
        for s in segments])


def checkpointing_lines(params: Params, rows: list[dict]) -> list[str]:
    """Under train.activation_checkpointing auto, which runs checkpoint (plan/checkpointing.py): their count
    per (scale, context, arm), or that none does."""
    if params.train.activation_checkpointing != AUTO:
        return []
    counts = Counter((r["scale"], r["context"], r["arm"]) for r in rows if r["checkpointing"])
    if not counts:
        return ["activation checkpointing (auto): no run needs it"]
    which = ", ".join(f"{scale} ctx{context} {arm} {n}" for (scale, context, arm), n in counts.items())
    return [f"activation checkpointing (auto), where a run does not fit without it: {sum(counts.values())} "
            f"of {len(rows)} runs ({which}); mem-GB is theirs with it"]


def memory_warnings(rows: list[dict]) -> list[str]:
    """One line per (scale, context) whose runs need more memory than one process has, with its remedy: the
    largest train.micro_batch_tokens at which every one of them fits (the same runs, no more compute), else
    train.activation_checkpointing (about a third more compute) and the largest micro-batch with it."""
    groups: dict[tuple[str, int], list[dict]] = {}
    for r in rows:
        if not r["fits"]:
            groups.setdefault((r["scale"], r["context"]), []).append(r)
    lines = []
    for (scale, context), over in groups.items():
        r = max(over, key=lambda row: row["memory_gb"])
        lines.append(f"{scale} ctx{context}: runs need up to {r['memory_gb']:.3g} GB per process "
                     f"({r['arm']}), with the estimate's {ESTIMATE_MARGIN - 1:.0%} margin more than the "
                     f"{r['memory_limit_gb']:.3g} GB of one "
                     f"{'GPU' if r['memory_on'] == 'gpu' else 'process'} (--gpu-memory-gb, train.resources); "
                     f"{_memory_remedy(over, context)}")
    return lines


def _memory_remedy(over: list[dict], context: int) -> str:
    """What makes every one of a (scale, context)'s runs that do not fit fit, the cheapest first."""
    tokens = min(r["fitting_micro_tokens"] for r in over)
    if tokens:
        sequences = tokens // context
        return (f"train.micro_batch_tokens {tokens:,} fits them ({sequences} sequence{'s' * (sequences > 1)} "
                f"per pass)")
    if "checkpointed_gb" not in over[0]:  # checkpointing on already
        return ("not even one sequence per pass fits, with train.activation_checkpointing: more memory per "
                "process (a larger GPU, fewer processes per node on a CPU)")
    tokens = min(r["checkpointed_micro_tokens"] for r in over)
    if not tokens:
        return ("not even one sequence per pass fits, with train.activation_checkpointing or without: more "
                "memory per process (a larger GPU, fewer processes per node on a CPU)")
    if all(r["checkpointed_fits"] for r in over):  # with the margin, as `fits`: no warning once it is set
        worst = max(r["checkpointed_gb"] for r in over)
        return (f"not one sequence per pass fits; set train.activation_checkpointing (up to {worst:.3g} GB, "
                f"about a third more compute)")
    return (f"not one sequence per pass fits; set train.activation_checkpointing (about a third more "
            f"compute) and train.micro_batch_tokens {tokens:,}")
