"""`ngptlab bench schedule`: the wall time of training a small sweep in WSD against the same sweep in cosine.

Both grids are the embedded default's model at its first context, the baseline and nGPT at one learning rate
each, three budgets 2x apart (--budget-steps, in optimizer steps), one seed; they differ only in
train.schedule (and cooldown_fraction, --fraction). Each trains through Snakemake (`--cores`, the train and
trunk jobs of every run) in a scratch copy of the workflow whose token shards are prepared beforehand, not
timed. The two alternate, --repeat times each, and the medians are compared: a WSD sweep trains
B_k + f x (the other budgets) tokens where cosine trains their sum, but it runs more jobs (one per trunk
segment besides one per run), each with its start-up, so the ratio of wall times is what it saves here.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

from ngptlab import layout
from ngptlab.bench.workflow import copy_workflow, timed, write_plan
from ngptlab.grid.enumeration import enumerate_runs
from ngptlab.grid.trunks import enumerate_segments
from ngptlab.layout import REPO_ROOT
from ngptlab.schedule import COSINE, WSD
from ngptlab.settings import Params


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--budget-steps", type=int, nargs=3, default=[32, 64, 128], metavar="STEPS",
                        help="the three budgets in optimizer steps (default 32 64 128: 2x apart)")
    parser.add_argument("--fraction", type=float, default=0.2, help="WSD cooldown fraction (default 0.2)")
    parser.add_argument("--repeat", type=int, default=1, help="trainings of each grid (default 1)")
    parser.add_argument("--cores", type=int, default=2, help="snakemake --cores (default 2)")


def sweep(schedule: str, budget_steps: list[int], fraction: float) -> dict:
    params = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    train = params["train"]
    scale, context = train["scales"][0], train["contexts"][0]
    arms = ["gpt", "ngpt"]
    train.update(scales=[scale], contexts=[context], arms=arms, schedule=schedule, cooldown_fraction=fraction,
                 budgets=[steps * train["batch_sequences"] * context for steps in budget_steps],
                 learning_rates={scale: {arm: [1.0e-2] for arm in arms}})
    train["resources"] = {scale: train["resources"][scale]}
    params["speedup"]["baseline"] = "gpt"
    return params


def prepared_copy(dest: Path, params: dict, tokens_from: Path | None) -> Path:
    """A scratch copy with params written and its shards prepared (copied from a first copy: same data)."""
    copy_workflow(dest)
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    write_plan(dest)
    source = params["prepare"]["source"]["name"]
    snakemake = str(Path(sys.executable).parent / "snakemake")
    if tokens_from is None:
        timed([snakemake, "--cores", "2", f"{layout.tokens_dir(source)}/meta.json"], dest)
    else:  # the same prepare settings and code: its shards and lineage key are this copy's too
        for part in (layout.tokens_dir(source), layout.lineage_dir("prepare", source)):
            shutil.copytree(tokens_from / part, dest / part)
    return dest


def train_targets(params: dict) -> list[str]:
    return [layout.train_results_dir(run.cell, run.name) + "/summary.json"
            for run in enumerate_runs(Params.of(params))]


def trained_tokens(work: Path) -> int:
    return sum(json.loads(path.read_text()).get("trained_tokens", 0)
               for path in (work / "results" / "timing").rglob("*.json"))


def run(args: argparse.Namespace, params: Params) -> int:
    grids = {schedule: sweep(schedule, args.budget_steps, args.fraction) for schedule in (COSINE, WSD)}
    snakemake = str(Path(sys.executable).parent / "snakemake")
    times: dict[str, list[float]] = {schedule: [] for schedule in grids}
    tokens: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="ngptlab-bench-schedule-") as tmp:
        first = None
        for attempt in range(args.repeat):
            for schedule, grid in grids.items():
                work = prepared_copy(Path(tmp) / f"{schedule}-{attempt}", grid, first)
                first = first or work
                started = time.perf_counter()
                timed([snakemake, "--cores", str(args.cores), *train_targets(grid)], work)
                times[schedule].append(time.perf_counter() - started)
                tokens[schedule] = trained_tokens(work)
    budgets = grids[WSD]["train"]["budgets"]
    print(f"sweep: arms gpt, ngpt; budgets {', '.join(f'{b:,}' for b in budgets)} tokens "
          f"({', '.join(map(str, args.budget_steps))} steps); WSD cooldown fraction {args.fraction:g}; "
          f"snakemake --cores {args.cores}; median of {args.repeat}")
    print(f"{'schedule':<8} {'jobs':>5} {'tokens trained':>15} {'wall s':>8}")
    for schedule, grid in grids.items():
        typed = Params.of(grid)
        jobs = len(enumerate_runs(typed)) + len(enumerate_segments(typed))
        print(f"{schedule:<8} {jobs:>5} {tokens[schedule]:>15,} {statistics.median(times[schedule]):>8.1f}")
    expected = (budgets[-1] + args.fraction * sum(budgets[:-1])) / sum(budgets)  # per trunk
    wall = statistics.median(times[WSD]) / statistics.median(times[COSINE])
    ratio = tokens[WSD] / tokens[COSINE]
    print(f"WSD / cosine: tokens {ratio:.3f} (B_k + f x the others over their sum: "
          f"{expected:.3f}), wall time {wall:.3f}")
    return 0
