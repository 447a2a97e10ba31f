"""Damaged outputs are seen by the workflow before any job (ngptlab/workflow/damage.py): a truncated shard or
checkpoint stops Snakemake with one line naming the file and its repairs, and nothing is deleted; each
repair works as printed."""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest
import torch
from safetensors.torch import save_file
from snakemake.exceptions import WorkflowError
from support import TEST_PARAMS
from support.code import made_up_code
from support.workflow import E2E_BUDGETS, E2E_DIVERGING, dvc, git, prepared_alone, run, snakemake

from ngptlab import layout
from ngptlab.config.load import load_params, read_mapping
from ngptlab.grid.enumeration import enumerate_runs
from ngptlab.layout import REPO_ROOT
from ngptlab.workflow.damage import checkpoint_damage, shard_damage
from ngptlab.workflow.grid import Grid


@pytest.fixture
def project(tmp_path):
    """A project root with the tests' grid's shards (sizes as meta.json records) and one run's checkpoint."""
    config = read_mapping(TEST_PARAMS)  # Snakemake's config: the file's mapping
    params = load_params(TEST_PARAMS)
    params_file = tmp_path / "params.yaml"
    params_file.write_text(TEST_PARAMS.read_text())
    tokens = tmp_path / layout.tokens_dir(params.prepare.source.name)
    tokens.mkdir(parents=True)
    for split, n in (("train", 1000), ("val", 100)):
        (tokens / f"{split}.bin").write_bytes(b"\0\1" * n)
    (tokens / "meta.json").write_text(json.dumps({"splits": {
        "train": {"file": "train.bin", "bytes": 2000, "tokens": 1000},
        "val": {"file": "val.bin", "bytes": 200, "tokens": 100}}}))
    grid = Grid(params, str(params_file), code=made_up_code())
    run = next(iter(grid.runs.values()))
    model = tmp_path / layout.run_dir(run.cell, run.name) / "model.safetensors"
    model.parent.mkdir(parents=True)
    save_file({"w": torch.ones(64, 64), "b": torch.zeros(64)}, str(model))
    return tmp_path, config, grid, tokens, model


def test_whole_outputs_pass(project):
    root, _, grid, tokens, model = project
    assert shard_damage(tokens) is None and checkpoint_damage(model) is None and grid.damaged(root) is None


def test_a_truncated_shard_is_named_with_its_repair_and_left_alone(project):
    root, _, grid, tokens, _ = project
    with open(tokens / "train.bin", "r+b") as f:
        f.truncate(1500)
    problem = grid.damaged(root)
    assert problem.startswith(
        f"{tokens}/train.bin: 1500 bytes, but meta.json records 2000 bytes (1000 tokens)")
    # the file alone, relative to the project root where the commands run; not meta.json (git-tracked)
    shard = tokens.relative_to(root) / "train.bin"
    assert repairs(problem) == [f"dvc checkout --force {shard}",
                                f"rm {shard} && snakemake --cores all {shard}"]
    assert (tokens / "train.bin").stat().st_size == 1500


@pytest.mark.parametrize("keep", [0, 5, 40, -100])
def test_a_truncated_checkpoint_is_named_with_its_repair(project, keep):
    root, _, grid, _, model = project
    size = model.stat().st_size
    with open(model, "r+b") as f:
        f.truncate(keep if keep >= 0 else size + keep)
    problem = grid.damaged(root)
    assert problem.startswith(str(model)) and "retrains that run" in problem
    path = model.relative_to(root)
    assert repairs(problem) == [f"dvc checkout --force {path}", f"rm {path} && snakemake --cores all {path}"]
    assert model.is_file()


def test_snakemake_refuses_to_start_on_a_damaged_output(project):
    root, config, _, tokens, _ = project
    with open(tokens / "val.bin", "ab") as f:
        f.write(b"\0\0")
    (root / "src").symlink_to(REPO_ROOT / "src")  # the code the plan fingerprints
    cwd = os.getcwd()
    os.chdir(root)
    try:
        with pytest.raises(WorkflowError,
                           match=r"^damaged output: .*val.bin: 202 bytes, but meta.json records 200"):
            Grid.from_config(config, [root / "params.yaml"])
        # a job's own Snakemake process (a Slurm job step) leaves the check to the one that planned it
        assert Grid.from_config(config, [root / "params.yaml"], check_outputs=False).damaged() is not None
    finally:
        os.chdir(cwd)


def repairs(problem: str) -> list[str]:
    """The commands a damage line prints (in backticks)."""
    return re.findall(r"`([^`]+)`", problem)


def truncate(path, keep: int = 100) -> None:
    with open(path, "r+b") as f:
        f.truncate(keep)


@pytest.mark.slow  # a scratch workflow: prepare (shared), one run of the smallest budget, each made again
def test_every_printed_repair_works_as_printed(tmp_path_factory, tmp_path):
    """On a real scratch workflow under git and DVC, each command a damaged shard or checkpoint prints, run
    as printed in the project root, brings back the file's bytes, and Snakemake then starts again."""
    work = tmp_path / "work"
    shutil.copytree(prepared_alone(tmp_path_factory.getbasetemp()), work, symlinks=True)
    params = load_params(work / "params.yaml")
    smallest = next(r for r in enumerate_runs(params) if r.budget == min(E2E_BUDGETS)
                    and (r.arm, r.lr) != E2E_DIVERGING)
    tokens = layout.tokens_dir(params.prepare.source.name)
    model = f"{layout.run_dir(smallest.cell, smallest.name)}/model.safetensors"
    snakemake(work, "--cores", "2", model)
    git(work, "init", "-q")
    dvc(work, "commit", "--force", "prepare", f"train@{smallest.name}")  # DVC's cache holds both
    meta = (work / tokens / "meta.json").read_bytes()

    for path in (f"{tokens}/train.bin", model):
        whole = (work / path).read_bytes()
        printed = None
        for which in range(2):
            truncate(work / path)
            refused = snakemake(work, "--dry-run", check=False)
            assert refused.returncode != 0
            output = (refused.stdout + refused.stderr).splitlines()
            line = next(line for line in output if "damaged output: " in line)
            assert line.split("damaged output: ", 1)[1].startswith(f"{path}: ")
            commands = repairs(line)
            assert printed in (None, commands) and len(commands) == 2
            printed = commands
            run(["bash", "-c", commands[which]], work)  # as printed, in the project root
            assert (work / path).read_bytes() == whole, commands[which]
    assert (work / tokens / "meta.json").read_bytes() == meta  # rewritten with the shards, the same bytes
    assert snakemake(work, "--dry-run").returncode == 0
