"""A WSD grid through the whole DAG, in Snakemake and in DVC (real tools, a copy of the end-to-end grid with
train.schedule wsd and cosine calibration runs).

train -> condition -> speedup -> evaluate -> report runs on trunks and branches; after `dvc commit` neither
tool has anything to do; a budget larger than every other makes both tools name the same work (one new
trunk segment and one branch per trunk, and what reads them), and `dvc repro` and Snakemake train only
the new part of each trunk and its branch; a new cooldown fraction names exactly the WSD jobs in both tools,
never the cosine runs.
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from support.workflow import (
    assert_nothing_to_do,
    dvc,
    dvc_changed,
    e2e_params,
    git,
    job_counts,
    make_workdir,
    planned_jobs,
    ran_stages,
    set_params,
    snakemake,
)

from ngptlab.grid.enumeration import enumerate_runs
from ngptlab.grid.trunks import enumerate_segments
from ngptlab.settings import Params

pytestmark = pytest.mark.slow

BUDGETS = [2048, 4096]  # 4 and 8 steps of 512 tokens at context 128
ARMS = ("gpt", "ngpt")


def wsd_grid(budgets=BUDGETS) -> dict:
    params = e2e_params()
    train = params["train"]
    scale = train["scales"][0]
    train.update(schedule="wsd", cooldown_fraction=0.25, budgets=list(budgets),
                 calibrate={"budgets": [budgets[-1]]}, eval_every_tokens=2048, checkpoint_every_tokens=2048,
                 learning_rates={scale: {arm: [3.0e-3] for arm in ARMS}})
    return params


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """The WSD grid trained by Snakemake, recorded by `dvc commit`, committed to git."""
    base = tmp_path_factory.getbasetemp()
    work = make_workdir(base / "wsd-grid", wsd_grid())
    snakemake(work, "--cores", "2", timeout=1800)
    git(work, "init", "-q")
    dvc(work, "commit", "--force")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "WSD grid")
    return work


def trained_tokens(work: Path) -> dict[str, int]:
    return {path.stem: json.loads(path.read_text())["trained_tokens"]
            for path in work.glob("results/timing/*/*.json")}


def test_the_whole_dag_runs_on_trunks_and_branches(trained):
    params = Params.of(wsd_grid())
    segments, runs = enumerate_segments(params), enumerate_runs(params)
    assert len(segments) == 2 * len(ARMS) and len(runs) == 3 * len(ARMS)  # 2 WSD budgets + 1 calibration
    tokens = trained_tokens(trained)
    wsd = sum(tokens[s.name] for s in segments) + sum(tokens[r.name] for r in runs if r.schedule == "wsd")
    assert wsd == len(ARMS) * (BUDGETS[1] + 0.25 * BUDGETS[0])  # B_k + f x the others, per trunk
    speedup = json.loads(next(trained.glob("results/speedup/*.json")).read_text())
    assert {r["run"] for r in speedup["runs"]} == {r.name for r in runs if r.schedule == "wsd"}
    report = (trained / "reports" / "report.md").read_text()
    assert "WSD" in report
    with open(trained / "reports" / "tables" / "compute.csv") as f:  # what was spent: a trunk counted once
        compute = next(csv.DictReader(f))
    assert int(compute["tokens"]) == wsd + len(ARMS) * BUDGETS[-1]  # + the cosine calibration runs
    assert not list(trained.glob("runs/trunks/*/*/to4"))  # its branches done: only each trunk's last kept
    assert len(list(trained.glob("runs/trunks/*/*/to6"))) == len(ARMS)
    assert_nothing_to_do(trained)


def test_a_larger_budget_trains_only_the_new_trunk_part_and_branch_in_both_tools(trained, tmp_path):
    work = trained
    before = trained_tokens(work)
    set_params(work, "train.budgets=[2048,4096,8192]")
    new_work = Counter(trunk=len(ARMS), train=len(ARMS), condition=len(ARMS), speedup=1, evaluate=1, report=1)
    assert dvc_changed(work) == new_work + Counter(plan=1)
    planned = job_counts(snakemake(work, "--dry-run").stdout)
    assert planned == new_work + Counter(lineage=sum(new_work.values()), all=1)
    # DVC trains one arm's new trunk segment and branch (what that branch depends on), Snakemake the rest
    out = dvc(work, "repro", "train@cpu-4l-ctx128-gpt-t8192-lr0.003-s0-wsd", timeout=1800)
    assert ran_stages(out.stdout) == Counter(plan=1, trunk=1, train=1)
    trunks = re.findall(r"Running stage 'trunk@([^']+)'", out.stdout)
    assert trunks == ["cpu-4l-ctx128-gpt-lr0.003-s0-trunk-from6-to12"]
    rest = new_work - Counter(trunk=1, train=1)
    planned = job_counts(snakemake(work, "--dry-run").stdout)
    assert planned == rest + Counter(lineage=sum(rest.values()), all=1)
    snakemake(work, "--cores", "2", timeout=1800)
    dvc(work, "commit", "--force")
    after = trained_tokens(work)
    assert {name: after[name] for name in before} == before  # nothing trained before was trained again
    assert {name: tokens for name, tokens in after.items() if name not in before} == {
        **{f"cpu-4l-ctx128-{arm}-lr0.003-s0-trunk-from6-to12": 6 * 512 for arm in ARMS},
        **{f"cpu-4l-ctx128-{arm}-t8192-lr0.003-s0-wsd": 4 * 512 for arm in ARMS}}
    assert_nothing_to_do(work)
    # for the next test
    git(work, "checkout", "-q", "--", "params.yaml", "results/plan.json", "dvc.yaml", "dvc.lock")
    dvc(work, "checkout", "--force")


def test_a_new_cooldown_fraction_names_exactly_the_wsd_jobs_in_both_tools(trained):
    work = trained
    set_params(work, "train.cooldown_fraction=0.5")
    wsd_runs = len(ARMS) * len(BUDGETS)
    new_work = Counter(trunk=2 * len(ARMS), train=wsd_runs, condition=wsd_runs, speedup=1, evaluate=1,
                       report=1)
    assert dvc_changed(work) == new_work + Counter(plan=1)
    out = snakemake(work, "--dry-run").stdout
    assert job_counts(out) == new_work + Counter(lineage=sum(new_work.values()), all=1)
    retrained = [job.outputs[0] for job in planned_jobs(out) if job.rule in ("train", "condition")]
    assert retrained and all("-wsd" in output for output in retrained)  # the calibration runs stay
