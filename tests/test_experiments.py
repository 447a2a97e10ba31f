"""Snakemake and DVC agree when the data or the settings change, and DVC's experiments work: real Snakemake,
DVC and git on copies of the end-to-end grid's local run, recorded with `dvc commit` and committed.

Both tools decide what is stale from the same lineage keys (ngptlab/plan/lineage.py): a changed prepare
setting makes every stage after prepare stale in both, an edit that changes no value reruns nothing, a
non-grid `dvc exp run -S` reruns exactly the stages whose key includes that setting, a grid change trains
only its new runs, and after `dvc exp apply` neither tool has anything to do.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
import yaml
from support.workflow import (
    E2E_BUDGETS,
    E2E_LEARNING_RATES,
    assert_nothing_to_do,
    copy_run,
    dvc,
    dvc_changed,
    e2e_params,
    git,
    job_counts,
    local_smoke_run,
    ran_stages,
    set_params,
    snakemake,
)

from ngptlab import layout
from ngptlab.grid.enumeration import enumerate_cells, enumerate_runs
from ngptlab.settings import Params

pytestmark = pytest.mark.slow


@pytest.fixture
def committed(tmp_path_factory, tmp_path) -> Path:
    """A copy of the local end-to-end run, recorded in dvc.lock and committed to git."""
    work = copy_run(local_smoke_run(tmp_path_factory.getbasetemp()).work, tmp_path / "work")
    git(work, "init", "-q")
    dvc(work, "commit", "--force")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "end-to-end run")
    assert_nothing_to_do(work)
    return work










def test_reordered_params_plan_nothing_in_either_tool(committed):
    params = yaml.safe_load((committed / "params.yaml").read_text())
    reordered = {section: dict(reversed(list(values.items()))) if isinstance(values, dict) else values
                 for section, values in reversed(list(params.items()))}
    (committed / "params.yaml").write_text("# reordered, same values\n" + yaml.safe_dump(reordered,
                                                                                         sort_keys=False))
    assert_nothing_to_do(committed)


def test_a_new_val_fraction_plans_every_run_again_in_both_tools(committed):
    # Both tools call every stage after prepare stale, and nothing else; one run retrained shows the new
    # shards reach training. (That a retrained grid records and then leaves nothing to do is what test_dvc
    # and test_provenance check on runs of their own: retraining the whole grid here would add minutes.)
    params = Params.of(e2e_params())
    runs, cells = enumerate_runs(params), len(enumerate_cells(params))
    set_params(committed, "prepare.val_fraction=0.03")
    after_prepare = Counter(train=len(runs), condition=len(runs), speedup=cells, evaluate=cells, report=1)
    assert dvc_changed(committed) == Counter(plan=1, prepare=1) + after_prepare
    planned = job_counts(snakemake(committed, "--dry-run").stdout)
    assert planned == Counter(prepare=1, lineage=2 * len(runs) + 2 * cells + 2, all=1) + after_prepare
    summary = committed / layout.train_results_dir(runs[0].cell, runs[0].name) / "summary.json"
    snakemake(committed, "--cores", "2", str(summary.relative_to(committed)), timeout=900)
    meta = json.loads((committed / "data" / "tokens" / params.train.source / "meta.json").read_text())
    assert json.loads(summary.read_text())["data"]["train_sha256"] == meta["splits"]["train"]["sha256"]


def test_dvc_experiments_run_queue_show_and_apply(committed):
    out = dvc(committed, "exp", "run", "-n", "limit20", "-S", "evaluate.limit=20", timeout=900)
    assert ran_stages(out.stdout) == Counter(plan=1, evaluate=1, report=1)  # exactly what reads the key
    dvc(committed, "exp", "run", "--queue", "-n", "limit15", "-S", "evaluate.limit=15")
    dvc(committed, "exp", "run", "--run-all", timeout=1800)
    shown = json.loads(dvc(committed, "exp", "show", "--json").stdout)
    experiments = {rev["name"]: rev["data"] for entry in shown for exp in entry.get("experiments") or []
                   for rev in exp["revs"]}
    assert {"limit20", "limit15"} <= set(experiments)
    cells = enumerate_cells(Params.of(e2e_params()))
    for name, data in experiments.items():
        metrics = data["metrics"]  # the report's, one file of numbers per cell and arm: nothing else
        assert set(metrics) == {f"reports/metrics/{cell}/{arm}.json" for cell in cells
                                for arm in e2e_params()["train"]["arms"]}, name
        for cell in cells:
            for arm in E2E_LEARNING_RATES:
                headline = metrics[f"reports/metrics/{cell}/{arm}.json"]["data"]
                assert isinstance(headline["best_val_loss"], float), (name, cell, arm)
        assert data["params"]["params.yaml"]["data"]["evaluate"]["limit"] == int(name.removeprefix("limit"))
    dvc(committed, "exp", "apply", "limit15")
    assert yaml.safe_load((committed / "params.yaml").read_text())["evaluate"]["limit"] == 15
    assert_nothing_to_do(committed)


def test_a_grid_experiment_trains_only_its_new_runs(committed):
    params = e2e_params()
    scale, context = params["train"]["scales"][0], params["train"]["contexts"][0]
    set_params(committed, f"train.learning_rates.{scale}.ngpt=[0.003,0.01,0.03]")
    out = dvc(committed, "exp", "run", "-n", "more-lr", timeout=1800)
    trained = sorted(re.findall(r"Running stage 'train@([^']+)'", out.stdout))
    new = sorted(f"{scale}-ctx{context}-ngpt-t{budget}-lr0.03-s0" for budget in E2E_BUDGETS)  # one lr more
    assert trained == new
    analysis = Counter(speedup=1, evaluate=1, report=1)  # the one cell's, and the report
    assert ran_stages(out.stdout) == Counter(plan=1, train=len(new), condition=len(new)) + analysis
    # -S on a grid key: the plan stage rewrites the plan and stops, naming the second pass.
    out = dvc(committed, "exp", "run", "-S", "train.budgets=[2048,8192,16384]", check=False, timeout=900)
    assert out.returncode != 0 and "the grid changed (" in out.stdout + out.stderr
