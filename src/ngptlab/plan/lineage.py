"""The lineage of every job: what its results are made from, as one key per job.

A job's key is a hash of everything its outputs depend on: its stage's settings, its stage's code, and the
keys of the jobs upstream of it (the data's key for train, the train key for condition, ...). So a change
anywhere upstream, a new val_fraction for instance, changes the key of every job after it, and an edit that
changes no value (reordered keys, a comment) changes no key: the settings are hashed as canonical JSON.

Both tools decide what is stale from these keys, never from file times:
- Snakemake: each job has one input, its key file results/lineage/<stage>/<job>/<key>, made by the `lineage`
  rule (workflow/rules/lineage.smk). A changed key is a missing file, which Snakemake plans with or without
  its records in .snakemake/, whatever the files' times after a `dvc pull` or `dvc exp apply`, and even when
  a job upstream runs too (Snakemake skips a job whose ancient() inputs an upstream job rewrites).
- DVC: each stage declares its key, `lineage.<stage>` of results/plan.json, as a param, and keeps its
  content-hashed file dependencies.

The per-run stages have one key per schedule and weight dtype (a run's name encodes its grid point, its
schedule and its dtype's cell, so a WSD setting changes the keys of WSD runs only, and an fp32 run's key is
the same whether or not the grid also trains bf16); WSD trunk segments have one key (a segment's name says
where it starts and ends, its cell which dtype it trains in); the per-cell stages have one per cell, since a
cell's results also depend on which runs it holds.
"""

from __future__ import annotations

import hashlib
import json

from ngptlab import schedule as schedules
from ngptlab import weight_dtype as weight_dtypes
from ngptlab.grid.enumeration import GRID_KEYS, enumerate_runs
from ngptlab.settings import setting

# prepare settings that change how fast the shards are written, never their bytes.
PREPARE_SPEED_KNOBS = ("workers", "batch_documents")
# A stage's Slurm time limit (plan/runtime.py): how long its job may take, never what it makes.
WORKFLOW_KNOBS = ("runtime_min",)

# The train settings that change a run's results. The grid lists are not among them (a run's name encodes its
# scale, context, arm, budget, lr and seed, so adding a run retrains no other), nor the speed-only knobs
# (micro_batch_tokens, device, compile, checkpoint_every_tokens, resources).
TRAIN_SETTINGS = ("source", "shapes", "batch_sequences", "warmup_steps", "warmup_max_fraction", "grad_clip",
                  "eval_every_tokens", "eval_windows", "eval_seed", "diverge_loss", "vocab_multiple")

STAGES = ("prepare", "trunk", "train", "condition", "speedup", "evaluate", "report")
PER_SCHEDULE = ("train", "condition")  # a key per lineage group: schedule and dtype (RunSpec.lineage_group)
PER_CELL = ("speedup", "evaluate")  # a key per cell


def key_of(made_from: dict) -> str:
    """16 hex digits of the sha256 of `made_from` as canonical JSON (sorted keys): order-free."""
    text = json.dumps(made_from, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def settings(params: dict, stage: str, knobs: tuple[str, ...] = ()) -> dict:
    """A stage's section without the keys that never change its results."""
    return {k: v for k, v in params[stage].items() if k not in (*knobs, *WORKFLOW_KNOBS)}


def made_from(params: dict, code: dict[str, str]) -> dict:
    """What each stage's results are made from: {stage: inputs}; per lineage group (cosine, wsd, and with
    bf16 runs cosine-bf16, wsd-bf16) for train and condition, per cell (by name) for speedup and evaluate.
    `code` maps each stage to the fingerprint of its code (ngptlab.plan.closure)."""
    train_params = params["train"]
    prepare_settings = settings(params, "prepare", PREPARE_SPEED_KNOBS)
    # min_documents is a check of what the source yields, not a setting of it: it never changes the shards
    prepare_settings["source"] = {k: v for k, v in prepare_settings["source"].items() if k != "min_documents"}
    prepare = {"prepare": prepare_settings, "code": code["prepare"]}
    data = key_of(prepare)
    common = {"data": data, "train": {k: train_params[k] for k in TRAIN_SETTINGS}, "code": code["train"]}
    # A trunk shares the warmup of the smallest budget (ngptlab.schedule), and the cooldown fraction places
    # its segments (a new one retrains them all, as a fresh grid would); its branches add the cooldown's
    # shape. The cosine runs' key has none of these, so a WSD setting never retrains a cosine run.
    trunk = {**common, "warmup_budget": min(train_params["budgets"]),
             "cooldown_fraction": schedules.cooldown_fraction(train_params)}
    # A run's final evaluation is its own (a trunk segment has none): its windows change runs, not trunks.
    run_end = {"final_eval_tokens": setting(train_params, "train.final_eval_tokens")}
    train = {schedules.COSINE: {**common, **run_end},
             schedules.WSD: {**trunk, "cooldown_shape": schedules.cooldown_shape(train_params), **run_end}}
    # Another dtype's runs: the same inputs and the dtype, under keys of their own ("cosine-bf16"); an fp32
    # grid has none of these, so its keys and records stay those of before.
    train.update({weight_dtypes.lineage_group(schedule, dtype): {**inputs, "weight_dtype": dtype}
                  for dtype in weight_dtypes.of(train_params) if dtype != weight_dtypes.FP32
                  for schedule, inputs in list(train.items())})
    trained = {schedule: key_of(inputs) for schedule, inputs in train.items()}
    runs_of_cell: dict[str, list[str]] = {}
    schedules_of_cell: dict[str, set[str]] = {}
    for run in enumerate_runs(params):
        runs_of_cell.setdefault(run.cell, []).append(run.name)
        schedules_of_cell.setdefault(run.cell, set()).add(run.lineage_group)
    speedup = {cell: {"train": {s: trained[s] for s in sorted(schedules_of_cell[cell])}, "runs": runs,
                      "speedup": params["speedup"], "code": code["speedup"]}
               for cell, runs in runs_of_cell.items()}
    evaluate = {cell: {"speedup": key_of(speedup[cell]), "data": data,
                       "evaluate": settings(params, "evaluate"), "code": code["evaluate"]}
                for cell in runs_of_cell}
    condition = {schedule: {"train": key, "condition": settings(params, "condition"),
                            "code": code["condition"]} for schedule, key in trained.items()}
    in_grid = set().union(*schedules_of_cell.values())
    report = {"condition": {s: key_of(condition[s]) for s in sorted(in_grid)},
              "cells": {cell: key_of(evaluate[cell]) for cell in runs_of_cell},  # each includes its speed-up
              "grid": {k: train_params.get(k) for k in GRID_KEYS}, "report": settings(params, "report"),
              "code": code["report"]}
    return {"prepare": prepare, "trunk": trunk, "train": train, "condition": condition, "speedup": speedup,
            "evaluate": evaluate, "report": report}
