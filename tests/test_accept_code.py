"""`ngptlab plan --accept-code`: a refactor is accepted on bit-identical golden traces and then moves no
lineage key; a numeric change is refused in one line naming the arm and what differs, recording nothing; a
revision without the golden runner is refused; a grid of several processes is traced on two; in a DVC
repository the plan stage is committed up to date.

One git repository of the package's source and a params file of the test's own (gpt and ngpt at a tiny CPU
shape) is made once; each test edits a clone of it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

import ngptlab
from ngptlab.cli import main
from ngptlab.config.load import load_params
from ngptlab.plan.closure import ACCEPTED, stage_code, stage_fingerprints
from ngptlab.plan.dvclock import commit_plan_stage
from ngptlab.plan.golden import golden_params, trace_trees
from ngptlab.report.sections.provenance import accepted_table
from ngptlab.settings.roles import PER_RUN

SRC = Path(ngptlab.__file__).resolve().parent.parent
ARMS = ("gpt", "ngpt")
SHAPE = {"n_layer": 2, "d_model": 32, "n_head": 2, "mlp_ratio": 2}
PARAMS = {
    "prepare": {"source": {"kind": "local", "name": "tiny", "files": ["none.txt"], "format": "text"},
                "val_fraction": 0.1, "split_seed": 0, "batch_documents": 8, "workers": 1},
    "train": {"source": "tiny", "shapes": {"tiny": SHAPE},
              "scales": ["tiny"], "contexts": [16], "arms": list(ARMS), "budgets": [512], "seeds": [0],
              "learning_rates": {"tiny": {arm: [3.0e-3] for arm in ARMS}}, "batch_sequences": 4,
              "micro_batch_tokens": 32, "warmup_steps": 2, "warmup_max_fraction": 0.25, "grad_clip": 1.0,
              "eval_every_tokens": 256, "eval_windows": 4, "eval_seed": 0, "diverge_loss": 20.0,
              "vocab_multiple": 1, "device": "cpu", "compile": False, "checkpoint_every_tokens": 512,
              "resources": {"tiny": {"nodes": 1, "gpus": 0, "processes": 1, "mem_mb": 2000,
                                     "runtime_min": 10}}},
    "condition": {"sample_rows": 64, "seed": 0, "singular_tol": 1.0e-10, "device": "cpu"},
    "evaluate": {"budgets": "largest", "tasks": ["ngptlab_lastword"], "task_dirs": [], "limit": 10, "seed": 0,
                 "context_words": 10, "continuation_words": 5, "batch_size": 4, "device": "cpu"},
    "speedup": {"baseline": "gpt", "bootstrap": 10, "seed": 0},
    "report": {"title": "accept-code test", "min_budget_for_claims": 1000000},
}
LOOP = "src/ngptlab/train/loop.py"
RECIPE = "src/ngptlab/models/gpt.py"
RUNNER = "src/ngptlab/plan/golden.py"


def git(repo: Path, *args: str) -> str:
    identity = ["-c", "user.name=test", "-c", "user.email=test@example.com"]
    return subprocess.run(["git", "-C", str(repo), *identity, *args], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """The package's source, the test's params and the plan written from them, committed."""
    base = tmp_path_factory.mktemp("accept") / "base"
    shutil.copytree(SRC / "ngptlab", base / "src" / "ngptlab", ignore=shutil.ignore_patterns("__pycache__"))
    (base / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    assert main(["plan", "--params", str(base / "params.yaml"), "--root", str(base),
                 "--write", str(base / "results" / "plan.json")]) == 0
    git(base, "init", "-q")
    git(base, "add", "-A")
    git(base, "commit", "-q", "-m", "base")
    return base


@pytest.fixture
def repo(project: Path, tmp_path: Path) -> Path:
    clone = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", str(project), str(clone)], check=True)
    return clone


def accept(repo: Path, params: str = "params.yaml") -> int:
    return main(["plan", "--accept-code", "--root", str(repo), "--params", str(repo / params)])


def refactor(repo: Path) -> None:
    """A helper added to the training loop: code that changes no number."""
    loop = repo / LOOP
    loop.write_text(loop.read_text() + "\n\ndef _steps_left(steps: int, step: int) -> int:\n"
                                       "    return steps - step\n")


def test_a_refactor_is_accepted_and_moves_no_lineage_key(repo, capsys):
    at_head = stage_fingerprints(repo, ARMS)
    raw = stage_code("train", repo, arms=("gpt",)).fingerprint
    refactor(repo)
    assert stage_code("train", repo, arms=("gpt",)).fingerprint != raw
    edited = stage_fingerprints(repo, ARMS)
    moved = {(stage, arm) for stage in PER_RUN for arm in ARMS if edited[stage][arm] != at_head[stage][arm]}
    assert ("train", "gpt") in moved and ("train", "ngpt") in moved
    assert main(["plan", "--params", str(repo / "params.yaml"), "--root", str(repo),
                 "--check", str(repo / "results" / "plan.json")]) != 0  # stale before acceptance
    capsys.readouterr()

    assert accept(repo) == 0, capsys.readouterr().err
    entries = json.loads((repo / ACCEPTED).read_text())["accepted"]
    assert {(entry["stage"], entry["arm"]) for entry in entries} == moved
    head = git(repo, "rev-parse", "HEAD")
    for entry in entries:
        assert entry["revision"] == head and entry["accepted_as"] == at_head[entry["stage"]][entry["arm"]]
        assert entry["fingerprint"] == stage_code(entry["stage"], repo, arms=(entry["arm"],)).fingerprint
        assert list(entry["traces"]) == ["cosine-fp32"] and entry["accepted_at"]
    assert stage_fingerprints(repo, ARMS) == at_head  # no key moves: Snakemake and DVC rerun nothing
    assert main(["plan", "--params", str(repo / "params.yaml"), "--root", str(repo),
                 "--check", str(repo / "results" / "plan.json")]) == 0
    table = accepted_table(SimpleNamespace(root=repo))  # the report's provenance lists them
    assert len(table) == len(entries) and table.rows[0][table.columns.index("revision")] == head


def test_a_numeric_change_is_refused_naming_the_arm_and_what_differs(repo, capsys):
    recipe = repo / RECIPE
    text = recipe.read_text()
    assert "eps: float = 1e-8" in text
    recipe.write_text(text.replace("eps: float = 1e-8", "eps: float = 1e-6"))  # AdamW's epsilon
    one_arm = {**PARAMS, "train": {**PARAMS["train"], "arms": ["gpt"]}}  # half the traces
    (repo / "gpt.yaml").write_text(yaml.safe_dump(one_arm))
    capsys.readouterr()

    assert accept(repo, "gpt.yaml") != 0
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    assert "arm gpt" in error and ("loss" in error or "tensor" in error)
    assert not (repo / ACCEPTED).exists()


def test_nothing_changed_is_nothing_to_accept(repo, capsys):
    assert accept(repo) == 0
    assert "nothing to accept" in capsys.readouterr().out
    assert not (repo / ACCEPTED).exists()


def test_a_revision_without_the_golden_runner_is_refused(repo, capsys):
    git(repo, "rm", "-q", RUNNER)
    git(repo, "commit", "-q", "-m", "no golden runner")
    git(repo, "checkout", "-q", "HEAD~1", "--", RUNNER)  # the working tree has it again
    refactor(repo)
    capsys.readouterr()

    assert accept(repo) != 0
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "golden" in error
    assert not (repo / ACCEPTED).exists()


def test_a_grid_of_several_processes_is_traced_on_two(project, tmp_path):
    grid = {**PARAMS, "train": {**PARAMS["train"], "resources": {"tiny": {
        **PARAMS["train"]["resources"]["tiny"], "processes": 2}}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(grid))
    spec = {"arms": {"gpt": golden_params(grid, load_params(tmp_path / "params.yaml"), "gpt")}}

    traces = trace_trees({"here": project}, spec, tmp_path)["here"]["gpt"]
    assert list(traces) == ["cosine-fp32-x2"]
    assert len(traces["cosine-fp32-x2"]["losses"]) == 8 and traces["cosine-fp32-x2"]["tensors"]


def test_in_a_dvc_repository_the_plan_stage_is_committed_up_to_date(tmp_path):
    dvc = str(Path(sys.executable).with_name("dvc"))
    assert not commit_plan_stage(tmp_path, "the plan")  # no DVC repository: nothing to do
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("x = 1\n")
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"plan": {
        "cmd": "cp src/a.py plan.json", "deps": ["src"], "outs": [{"plan.json": {"cache": False}}]}}}))
    for command in (["init", "--no-scm"], ["repro"]):
        subprocess.run([dvc, *command], cwd=tmp_path, check=True, capture_output=True)
    (tmp_path / "src" / "a.py").write_text("x = 1  # the code changed\n")

    assert commit_plan_stage(tmp_path, "the plan")
    status = subprocess.run([dvc, "status", "--json"], cwd=tmp_path, check=True, capture_output=True,
                            text=True)
    assert json.loads(status.stdout) == {}
