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

The per-run stages have one key per arm, schedule and weight dtype ("cosine-gpt", "wsd-bf16-ngpt": a run's
name encodes its grid point, its schedule and its dtype's cell), since each arm's code is its own (its module
and its row of the table of arms, plan/closure.py) and so is its part of a per-arm setting (the schema's
`per_arm`: train.angles): an edit of gpt_angle.py or `ngptlab plan --match-angles` reruns that arm's jobs
alone, a WSD setting the WSD runs only, and an fp32 run's key is the same whether or not the grid also
trains bf16. WSD trunk segments have one key per arm (a segment's name says where it starts and ends, its
cell which dtype it trains in); the per-cell stages have one per cell, since a cell's results also depend on
which runs it holds.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict

from ngptlab import schedule as schedules
from ngptlab import weight_dtype as weight_dtypes
from ngptlab.grid.enumeration import enumerate_runs
from ngptlab.grid.runs import lineage_group
from ngptlab.settings import Params
from ngptlab.settings.roles import GRID, PER_RUN, STAGES, shaping
from ngptlab.weight_dtype import FP32

PER_SCHEDULE = PER_RUN  # a key per lineage group (RunSpec's and TrunkSpec's)
PER_CELL = ("speedup", "evaluate")  # a key per cell
__all__ = ["PER_CELL", "PER_SCHEDULE", "STAGES", "key_of", "made_from"]


def key_of(made_from: dict) -> str:
    """16 hex digits of the sha256 of `made_from` as canonical JSON (sorted keys): order-free."""
    text = json.dumps(made_from, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def made_from(params: Params, code: dict, accepted: str = "") -> dict:
    """What each stage's results are made from: {stage: inputs}; per lineage group for trunk (wsd-gpt, ...),
    train and condition (cosine-gpt, wsd-gpt, with bf16 runs cosine-bf16-gpt, ...), per cell (by name) for
    speedup and evaluate.
    A stage's settings are the keys the schema says shape it (settings/roles.py), defaults filled in.
    `code` maps each stage to the fingerprint of its code, a run stage's per arm (ngptlab.plan.closure);
    `accepted`, the digest of the refactors accepted as changing no number (closure.accepted_digest), is the
    report's, whose provenance lists them ("" where none: the keys of before any was accepted)."""
    full = asdict(params)  # every key, defaults filled in
    prepare = {"prepare": shaping(full, "prepare"), "code": code["prepare"]}
    data = key_of(prepare)
    # Every arm has keys of its own, holding its code (its module and its row of the table of arms) and its
    # part of a per-arm setting (train.angles).
    arms = sorted(set(params.train.arms))
    # A trunk's warmup is the smallest budget's (ngptlab.schedule): a smaller budget retrains every trunk,
    # a larger one none.
    trunk = {lineage_group(schedules.WSD, FP32, arm): {
        "data": data, "trunk": shaping(full, "trunk", schedules.WSD, arm), "code": code["trunk"][arm],
        "warmup_budget": min(full["train"]["budgets"])} for arm in arms}
    # A WSD run branches from its trunk, so its key holds the trunk's; a cosine run's holds no WSD setting.
    # Another dtype's runs: the same inputs and the dtype, under keys of their own ("cosine-bf16"); an fp32
    # grid has none of these.
    train, arm_of_group = {}, {}
    for dtype in weight_dtypes.of(params.train):
        extra = {} if dtype == FP32 else {"weight_dtype": dtype}
        for arm in arms:
            wsd_trunk = key_of(trunk[lineage_group(schedules.WSD, FP32, arm)])
            cosine = lineage_group(schedules.COSINE, dtype, arm)
            wsd = lineage_group(schedules.WSD, dtype, arm)
            train[cosine] = {"data": data, "train": shaping(full, "train", schedules.COSINE, arm),
                             "code": code["train"][arm], **extra}
            train[wsd] = {"trunk": wsd_trunk, "train": shaping(full, "train", schedules.WSD, arm),
                          "code": code["train"][arm], **extra}
            arm_of_group |= {cosine: arm, wsd: arm}
    trained = {group: key_of(inputs) for group, inputs in train.items()}
    runs_of_cell: dict[str, list[str]] = {}
    schedules_of_cell: dict[str, set[str]] = {}
    for run in enumerate_runs(params):
        runs_of_cell.setdefault(run.cell, []).append(run.name)
        schedules_of_cell.setdefault(run.cell, set()).add(run.lineage_group)
    speedup = {cell: {"train": {s: trained[s] for s in sorted(schedules_of_cell[cell])}, "runs": runs,
                      "speedup": shaping(full, "speedup"), "code": code["speedup"]}
               for cell, runs in runs_of_cell.items()}
    evaluate = {cell: {"speedup": key_of(speedup[cell]), "data": data,
                       "evaluate": shaping(full, "evaluate"), "code": code["evaluate"]}
                for cell in runs_of_cell}
    condition = {group: {"train": key, "condition": shaping(full, "condition"),
                         "code": code["condition"][arm_of_group[group]]} for group, key in trained.items()}
    in_grid = set().union(*schedules_of_cell.values())
    report = {"condition": {s: key_of(condition[s]) for s in sorted(in_grid)},
              "cells": {cell: key_of(evaluate[cell]) for cell in runs_of_cell},  # each includes its speed-up
              "grid": shaping(full, GRID), "report": shaping(full, "report"), "code": code["report"],
              **({"accepted": accepted} if accepted else {})}
    return {"prepare": prepare, "trunk": trunk, "train": train, "condition": condition, "speedup": speedup,
            "evaluate": evaluate, "report": report}
