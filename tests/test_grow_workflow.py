"""A grid that grows by its results, through both tools (real training, real Snakemake and DVC): a WSD grid
whose train.protocol holds its largest budget back; `ngptlab plan --prune-sweeps` lets it in at each arm's
best learning rate and `dvc repro` trains exactly that (the pruned learning rate's trunk stops); `ngptlab
plan --add-seeds` adds a seed at each arm's best trunk and Snakemake plans exactly its runs; nothing
trained before trains again, and a second call of either command changes nothing. Two learning rates per
arm put every best at an edge of its sweep: both commands are told to go on (--allow-untuned), as the
tuning check's own test (tests/test_grow.py) covers the refusal.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from support.workflow import (
    BIN,
    assert_nothing_to_do,
    dvc,
    dvc_changed,
    e2e_params,
    git,
    job_counts,
    make_workdir,
    ran_stages,
    run,
    snakemake,
)

from ngptlab.config.load import load_params
from ngptlab.grid.enumeration import enumerate_runs
from ngptlab.grid.runs import parse_run_name
from ngptlab.grid.trunks import enumerate_segments

pytestmark = pytest.mark.slow

BUDGETS = [2048, 4096]  # 4 and 8 steps of 512 tokens at context 128; branch points 3 and 6
ARMS = ("gpt", "ngpt")


def growing_grid() -> dict:
    params = e2e_params()
    train = params["train"]
    scale = train["scales"][0]
    train.update(schedule="wsd", cooldown_fraction=0.25, budgets=list(BUDGETS), eval_every_tokens=2048,
                 checkpoint_every_tokens=2048,
                 learning_rates={scale: {arm: [3.0e-3, 1.0e-2] for arm in ARMS}},
                 protocol={"prune_sweeps": {"after_budget": BUDGETS[0], "keep": 1}, "add_seeds": 1})
    return params


def trained_tokens(work: Path) -> dict[str, int]:
    return {path.stem: json.loads(path.read_text())["trained_tokens"]
            for path in work.glob("results/timing/*/*.json")}


def plan(work: Path, *args: str) -> str:
    return run([str(BIN / "ngptlab"), "plan", *args], work).stdout


def grow(work: Path, *args: str) -> str:
    """`ngptlab plan` growing the grid: two learning rates per arm are never an interior best."""
    return plan(work, *args, "--allow-untuned")


def jobs(work: Path) -> set[str]:
    params = load_params(work / "params.yaml")
    return {r.name for r in enumerate_runs(params)} | {s.name for s in enumerate_segments(params)}


def test_pruned_and_seeded_grids_train_only_their_new_runs_in_both_tools(tmp_path):
    work = make_workdir(tmp_path / "grow", growing_grid())
    snakemake(work, "--cores", "2", timeout=1800)
    branches = [parse_run_name(name) for name in trained_tokens(work) if name.endswith("-wsd")]
    assert {run.budget for run in branches} == {BUDGETS[0]}  # the larger budget is held back
    git(work, "init", "-q")
    dvc(work, "commit", "--force")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "budgets up to the pruning")
    before, jobs_before = trained_tokens(work), jobs(work)

    grow(work, "--prune-sweeps", "1")
    new = jobs(work) - jobs_before
    assert len(new) == 2 * len(ARMS)  # per arm: its best trunk's next segment and its branch at 4096
    assert {n.rsplit("-", 1)[-1] for n in new if "trunk" in n} == {"to6"}
    kept = {e.arm: e for e in load_params(work / "params.yaml").train.pruned_sweeps}
    assert set(kept) == set(ARMS) and all(len(e.learning_rates) == 1 for e in kept.values())
    new_work = Counter(trunk=len(ARMS), train=len(ARMS), condition=len(ARMS), speedup=1, evaluate=1, report=1)
    assert dvc_changed(work) == new_work + Counter(plan=1)
    assert ran_stages(dvc(work, "repro", timeout=1800).stdout) == new_work + Counter(plan=1)
    after = trained_tokens(work)
    assert {name: after[name] for name in before} == before  # nothing trained before trained again
    assert {name: tokens for name, tokens in after.items() if name not in before} == {
        name: (3 if "trunk" in name else 2) * 512 for name in new}  # from3-to6, and a branch from 6 to 8
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "pruned")
    assert_nothing_to_do(work)

    # The seeds: Snakemake plans exactly their trunks and branches and the stages after them. (Training them
    # is the same mechanism the pruning's runs just went through in DVC; left out for CI's time.)
    grow(work, "--add-seeds", "1")
    seeded = jobs(work) - jobs_before - new
    assert len(seeded) == len(ARMS) * (2 + 2)  # per arm: seed 1's trunk (two segments) and two branches
    assert all("-s1-" in name or name.endswith("-s1-wsd") for name in seeded)
    planned = job_counts(snakemake(work, "--dry-run").stdout)
    seeded_work = Counter(trunk=2 * len(ARMS), train=2 * len(ARMS), condition=2 * len(ARMS), speedup=1,
                          evaluate=1, report=1)
    assert planned == seeded_work + Counter(lineage=sum(seeded_work.values()), all=1)

    text = (work / "params.yaml").read_text()
    grow(work, "--add-seeds", "1")
    grow(work, "--prune-sweeps", "1")
    assert (work / "params.yaml").read_text() == text  # a second call changes nothing
