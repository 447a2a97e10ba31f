"""The two controls, gpt-qknorm and ngpt-freew: in `plan` at the paper's shapes, and through
train -> condition -> speedup -> report on a tiny grid, calling the verbs as the pipeline does."""

from __future__ import annotations

import csv
import json

import torch
from support.train import CONTEXT, make_params, write_params, write_shards

from ngptlab.cli import main
from ngptlab.config.load import load_params
from ngptlab.grid.enumeration import enumerate_cells, enumerate_runs
from ngptlab.layout import REPO_ROOT
from ngptlab.models.size import padded_vocab, parameter_count
from ngptlab.plan.estimate import estimate_runs
from ngptlab.results import train_dir
from ngptlab.settings import Params
from ngptlab.vocabulary import VOCAB_SIZE

torch.set_num_threads(1)
NEW_ARMS = ("gpt-qknorm", "ngpt-freew")


def test_new_arms_in_the_paper_plan():
    params = load_params(REPO_ROOT / "workflow" / "presets" / "paper.yaml")
    runs = [r for r in enumerate_runs(params) if r.arm in NEW_ARMS]
    rows = estimate_runs(params.train, runs, mfu=0.4, peak_tflops=989.0)
    assert {(r["arm"], r["scale"], r["context"]) for r in rows} == {
        (arm, scale, ctx) for arm in NEW_ARMS for scale in ("0.5B", "1B") for ctx in (1024, 4096, 8192)}
    by_arm = {(r["arm"], r["scale"]): r["n_params"] for r in rows}
    rows_of_vocab = padded_vocab(VOCAB_SIZE, params.train.vocab_multiple)  # 50304: padded to 64
    # QK-norm adds two head_dim gains per block (0.5B: 24 x 2 x 64); ngpt-freew has nGPT's parameters
    assert by_arm[("gpt-qknorm", "0.5B")] == parameter_count("gpt", "0.5B", rows_of_vocab) + 24 * 2 * 64
    assert by_arm[("ngpt-freew", "1B")] == parameter_count("ngpt", "1B", rows_of_vocab)
    assert {r["warmup_steps"] for r in rows if r["arm"] == "ngpt-freew"} == {0}


def test_new_arms_run_through_train_condition_speedup_report(tmp_path):
    write_shards(tmp_path)
    arms = ["gpt", *NEW_ARMS]
    params = make_params(arms=arms, budgets=[2048, 8192],
                         learning_rates={"cpu-4l": {arm: [3e-3] for arm in arms}})
    path = str(write_params(tmp_path, params))
    common = ["--params", path, "--root", str(tmp_path)]
    for spec in enumerate_runs(Params.of(params)):
        assert main(["train", *common, "--no-progress", spec.name]) == 0
        assert main(["condition", *common, spec.name]) == 0
    cell = enumerate_cells(Params.of(params))[0]
    assert main(["speedup", *common, cell]) == 0
    assert main(["report", *common]) == 0

    doc = json.loads((tmp_path / "results" / "speedup" / f"{cell}.json").read_text())
    assert set(doc["arms"]) == set(arms) and doc["context"] == CONTEXT
    for spec in enumerate_runs(Params.of(params)):
        summary = json.loads((train_dir(tmp_path, spec) / "summary.json").read_text())
        assert summary["status"] == "completed"
        assert (tmp_path / "results" / "conditioning" / f"{spec.name}.json").is_file()
    with open(tmp_path / "reports" / "tables" / "speedup.csv") as f:
        assert {row["arm"] for row in csv.DictReader(f)} == set(arms)
    assert all(arm in (tmp_path / "reports" / "report.md").read_text() for arm in NEW_ARMS)
