"""`ngptlab plan`: validate a params file and print the runs it describes, with their size and cost.

Compute is estimated, not measured: GPU-hours = training FLOPs / (peak FLOP/s x MFU). The defaults are an
H100/H200's dense bf16 peak (989 TFLOP/s) and an MFU of 40%, both stated in the output. Each job is priced
at the tokens it trains (plan/estimate.py): with train.schedule wsd a trunk that several budgets share is
counted once, in its segments' rows, and each WSD run at its cooldown branch. Disk (final checkpoints,
resume state, DVC's cache and remote) is plan/storage.py's, also from the rows.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ngptlab.config.load import load_params
from ngptlab.errors import ParamsError
from ngptlab.grid.enumeration import enumerate_cells, enumerate_runs
from ngptlab.grid.sweeps import lopsided_sweeps
from ngptlab.plan.edit import edit_params_file, parse_assignment, set_value
from ngptlab.plan.estimate import estimate_plan
from ngptlab.plan.extend import DEFAULT_CAP, extend_sweeps
from ngptlab.plan.grid import check_grid_file, read_grid_file, write_grid_file
from ngptlab.plan.memory import GPU_MEMORY_GB
from ngptlab.plan.protocol import describe, has_protocol, projected_params
from ngptlab.plan.prune import DEFAULT_KEEP, prune_sweeps
from ngptlab.plan.runtime import describe_runtimes
from ngptlab.plan.seeds import add_seeds
from ngptlab.plan.sharing import sharing_lines
from ngptlab.plan.storage import PROFILE, describe_storage, plan_storage


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the run table as JSON")
    parser.add_argument("--mfu", type=float, default=0.4,
                        help="model FLOPs utilisation assumed (default 0.4)")
    parser.add_argument("--peak-tflops", type=float, default=989.0,
                        help="peak accelerator throughput in TFLOP/s (default 989: H100/H200 dense bf16)")
    parser.add_argument("--gpu-memory-gb", type=float, default=GPU_MEMORY_GB,
                        help=f"memory of one GPU, for the memory check (default {GPU_MEMORY_GB:g}: an H100; "
                             "141 for an H200)")
    parser.add_argument("--profile-config", metavar="FILE",
                        help="the Snakemake profile whose `jobs` bound how many runs train at once, for the "
                             f"disk their resume state takes (default: {PROFILE} under --root)")
    parser.add_argument("--write", metavar="FILE",
                        help="write the resolved grid (runs, cells) and the stages' lineage keys to FILE, "
                             "which dvc.yaml reads")
    parser.add_argument("--within-grid", action="store_true",
                        help="with --write: fail (after writing) when the runs, cells or source differ from "
                             "FILE's, for dvc.yaml's plan stage: DVC resolved its stages from the old grid")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="set a params key (dotted, the value as YAML, as `dvc exp run -S`) in the "
                             "params file in place, then rewrite the grid file (--write, default "
                             "results/plan.json): how to change the grid before `dvc exp run`; repeatable")
    parser.add_argument("--check", metavar="FILE",
                        help="fail unless FILE (from --write) still matches the params file")
    parser.add_argument("--extend-sweeps", action="store_true",
                        help="add the x2 / /2 neighbouring learning rate to every sweep whose best is at an "
                             "edge (results under --root), edit the params file in place and rewrite the "
                             "grid file (--write, default results/plan.json)")
    parser.add_argument("--prune-sweeps", type=int, nargs="?", const=DEFAULT_KEEP, metavar="K",
                        help="successive halving: once every budget up to B has results (results under "
                             "--root; B is train.protocol's when it names one), the budgets above B keep "
                             f"each arm's K best learning rates (default {DEFAULT_KEEP}: the best and the "
                             "one below it); edits the params file and rewrites the grid file")
    parser.add_argument("--add-seeds", type=int, metavar="N",
                        help="once train.seeds have results, add N seeds at every arm's best learning rate "
                             "per budget (wsd: the best trunk); edits the params file and rewrites the grid "
                             "file")
    parser.add_argument("--root", default=".", metavar="DIR",
                        help="the project directory: its src/ is the code --write fingerprints and --check "
                             "compares, and with --extend-sweeps its results/ are read (default: .)")
    parser.add_argument("--max-sweep", type=int, default=DEFAULT_CAP, metavar="N",
                        help=f"with --extend-sweeps: learning rates per sweep at most "
                             f"(default {DEFAULT_CAP})")


def run(args: argparse.Namespace, params: dict) -> int:
    plan_file = args.write or str(Path(args.root) / "results" / "plan.json")  # of --set, --extend-sweeps
    if args.set:
        assignments = [parse_assignment(a) for a in args.set]
        edit_params_file(args.params, lambda document: [set_value(document, k, v) for k, v in assignments])
        args.write = plan_file
        params = load_params(args.params)
        print(f"set {', '.join(k for k, _ in assignments)} in {args.params}")
    if args.extend_sweeps:
        added, capped = extend_sweeps(args.params, args.root, plan_file, cap=args.max_sweep)
        for a in added:
            print(f"{a['scale']} ctx{a['context']} {a['arm']}: best lr at the {a['edge']} of its sweep; "
                  f"added {a['lr']:g}")
        for c in capped:
            print(f"{c['scale']} ctx{c['context']} {c['arm']}: best lr at the {c['edge']} of its sweep, "
                  f"which already has {args.max_sweep} values (--max-sweep); not extended")
        print(f"{len(added)} learning rate(s) added to {args.params}; wrote {plan_file}")
        return 0
    if args.prune_sweeps is not None:
        entries, notes = prune_sweeps(args.params, args.root, plan_file, keep=args.prune_sweeps)
        for e in entries:
            print(f"{e['scale']} ctx{e['context']} {e['arm']}: above {e['after_budget']:,} keeps "
                  f"{', '.join(f'{lr:g}' for lr in e['learning_rates'])} (best there {e['best_lr']:g})")
        return _grown(notes, f"{len(entries)} sweep(s) pruned in {args.params}", plan_file)
    if args.add_seeds is not None:
        entries, notes = add_seeds(args.params, args.root, plan_file, args.add_seeds)
        for e in entries:
            print(f"{e['scale']} ctx{e['context']} {e['arm']} at {e['budget']:,}: seeds "
                  f"{', '.join(map(str, e['seeds']))} at lr {e['lr']:g}")
        return _grown(notes, f"{len(entries)} (arm, budget) point(s) given seeds in {args.params}", plan_file)
    if args.write:
        before = read_grid_file(args.write)
        write_grid_file(params, args.write, args.root)
        print(f"wrote {args.write}: {len(enumerate_runs(params))} runs, {len(enumerate_cells(params))} cells")
        if args.within_grid and before is not None:
            refuse_grid_change(before, read_grid_file(args.write) or {}, args.write)
        return 0
    if args.check:
        check_grid_file(params, args.check, args.root)
        return 0
    estimate = {"mfu": args.mfu, "peak_tflops": args.peak_tflops, "gpu_memory_gb": args.gpu_memory_gb}
    plan, projected = estimate_plan(params, **estimate), projection(params, **estimate)
    rows, segments = plan["runs"], plan["trunks"]
    total_flops, total_gpu_hours = plan["total_train_flops"], plan["total_gpu_hours"]
    storage = plan_storage(plan, args.root, args.profile_config)
    if args.json:
        print(json.dumps({"params_file": args.params, "mfu": args.mfu, "peak_tflops": args.peak_tflops,
                          "cells": enumerate_cells(params), **plan, "projected": projected,
                          "storage": storage}, indent=1))
        return 0
    print_runs(rows, wsd=bool(segments))
    print(f"batch: {params['train']['batch_sequences']} sequences per step at every context")
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
    for line in memory_warnings(rows):
        print(f"warning: {line}")
    for line in lopsided_sweeps(params["train"]):
        print(f"note: {line}; a fair comparison gives every arm as many")
    for line in sharing_lines(plan):
        print(line)
    for line in describe_storage(storage):
        print(line)
    jobs = f"{len(rows)} runs and {len(segments)} trunk segments" if segments else f"{len(rows)} runs"
    print(f"{jobs} in {len(enumerate_cells(params))} cells; {total_flops:.3g} training FLOPs; "
          f"{total_gpu_hours:.4g} GPU-hours at {args.mfu:.0%} MFU of {args.peak_tflops:g} TFLOP/s")
    if projected:
        print(f"projected over the whole protocol (train.protocol: {describe(params['train'])}): "
              f"{projected['runs']} runs, {projected['total_gpu_hours']:,.0f} GPU-hours; which learning "
              "rates survive and where the seeds go does not change the cost")
    return 0


def _grown(notes: list[str], summary: str, plan_file: str) -> int:
    for note in notes:
        print(f"note: {note}")
    print(f"{summary}; wrote {plan_file}")
    return 0


def projection(params: dict, **estimate) -> dict | None:
    """The protocol's projected size and cost (plan/protocol.py), or None for a grid without a protocol."""
    if not has_protocol(params["train"]):
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


def refuse_grid_change(before: dict, after: dict, path: str) -> None:
    """DVC resolves dvc.yaml's stages (`foreach` over runs and cells) from the plan before its first stage
    rewrites it, so within that run a changed grid would be half seen: refuse, naming the second pass."""
    added = set(after.get("runs", {})) - set(before.get("runs", {}))
    removed = set(before.get("runs", {})) - set(after.get("runs", {}))
    changes = [f"{len(added)} runs added"] if added else []
    changes += [f"{len(removed)} runs removed"] if removed else []
    kept = set(after.get("runs", {})) & set(before.get("runs", {}))
    moved = [run for run in kept if before["runs"][run] != after["runs"][run]]
    changes += [f"{len(moved)} runs start elsewhere"] if moved else []
    if before.get("trunks", {}) != after.get("trunks", {}):
        changes += ["other trunk segments"]
    changes += ["a new source"] if before.get("source") != after.get("source") else []
    if changes:
        change = ", ".join(changes)
        raise ParamsError(f"{path}: the grid changed ({change}) after DVC had resolved its stages from the "
                          "previous plan; the plan is rewritten now, so run `dvc repro` (or `dvc exp run`) "
                          "once more and it trains the new runs. Before `dvc exp run --queue`, change grid "
                          "keys with `ngptlab plan --set KEY=VALUE` instead of -S")


def memory_warnings(rows: list[dict]) -> list[str]:
    """One line per (scale, context) whose runs need more memory than one process has."""
    worst: dict[tuple[str, int], dict] = {}
    for r in rows:
        key = (r["scale"], r["context"])
        if not r["fits"] and (key not in worst or r["memory_gb"] > worst[key]["memory_gb"]):
            worst[key] = r
    return [f"{scale} ctx{context}: runs need up to {r['memory_gb']:.3g} GB per process ({r['arm']}), more "
            f"than the {r['memory_limit_gb']:.3g} GB of one {'GPU' if r['memory_on'] == 'gpu' else 'process'}"
            f" (--gpu-memory-gb, train.resources); lower train.micro_batch_tokens or set "
            f"train.activation_checkpointing" for (scale, context), r in worst.items()]
