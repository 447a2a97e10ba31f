"""A grid in the reference code's precision (train.weight_dtype bf16: weights and AdamW state stored in bf16)
through the whole DAG in Snakemake, then recorded by DVC with nothing left to do in either tool: its runs,
their cell `<scale>-ctx<context>-bf16`, its speed-up against the bf16 baseline and the report naming the
dtype. The smallest grid that does it: two arms, one learning rate, one budget.
"""

from __future__ import annotations

import json

import pytest
from support.workflow import assert_nothing_to_do, copy_tokens, dvc, e2e_params, git, make_workdir, snakemake

from ngptlab import layout
from ngptlab.grid.enumeration import enumerate_runs
from ngptlab.settings import Params

pytestmark = pytest.mark.slow


def test_a_bf16_grid_runs_end_to_end_in_snakemake_and_dvc(tmp_path, tmp_path_factory):
    params = e2e_params()
    train = params["train"]
    scale = train["scales"][0]
    train.update(weight_dtype="bf16", budgets=[2048], eval_every_tokens=2048, checkpoint_every_tokens=2048,
                 learning_rates={scale: {arm: [3.0e-3] for arm in ("gpt", "ngpt")}})
    runs = enumerate_runs(Params.of(params))
    cell = f"{scale}-ctx{train['contexts'][0]}-bf16"
    assert {r.cell for r in runs} == {cell} and all(f"{cell}-" in r.name for r in runs)
    work = make_workdir(tmp_path / "bf16", params)
    copy_tokens(tmp_path_factory.getbasetemp(), work)

    snakemake(work, "--cores", "2", timeout=1200)
    for run in runs:
        summary = json.loads((work / layout.train_results_dir(cell, run.name) / "summary.json").read_text())
        assert summary["status"] == "completed" and summary["spec"]["weight_dtype"] == "bf16"
    speedup = json.loads((work / layout.speedup_file(cell)).read_text())
    assert speedup["cell"] == cell and {t["arm"] for t in speedup["targets"]} == {"gpt"}
    assert all("-bf16-" in r["run"] for r in speedup["runs"])
    assert "bf16" in (work / "reports" / "report.md").read_text()

    git(work, "init", "-q")
    dvc(work, "commit", "--force")
    assert_nothing_to_do(work)
