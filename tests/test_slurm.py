"""Training on a real Slurm cluster through `--profile slurm`, against the local run of the end-to-end grid: a
scale with processes: 2 trains through torchrun (DDP, two processes) inside one Slurm job; and a scale with
nodes: 2 trains as one Slurm job over two nodes, one torchrun agent per node. (Every rule through the profile,
on settle's protocol in miniature, is tests/test_cluster_recipe.py's.)

Needs the cluster that `.ci/setup-slurm.sh` starts (CI runs it before the tests): one node in the default
partition, two in the partition `multi`. Skipped only where Slurm is not installed at all; an installed
Slurm that does not answer is a failure.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.workflow import (
    E2E_DIVERGING,
    REPO,
    SLURM_MARKS,
    SLURM_PROFILE,
    copy_tokens,
    e2e_params,
    local_smoke_run,
    make_workdir,
    run,
    snakemake,
)

from ngptlab import layout
from ngptlab.grid.enumeration import enumerate_runs
from ngptlab.grid.runs import RunSpec
from ngptlab.results import train_dir
from ngptlab.settings import Params

pytestmark = SLURM_MARKS

SLURM = SLURM_PROFILE


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    return local_smoke_run(tmp_path_factory.getbasetemp())


def read_json(path) -> dict:
    return json.loads(path.read_text())


def slurm_logs(work, rule: str) -> list:
    """The sbatch logs the profile keeps (logs/slurm/rule_<rule>/<wildcards>/<slurm job id>.log)."""
    return sorted((work / "logs" / "slurm" / f"rule_{rule}").rglob("*.log"))


def smallest_completing_run(params: dict) -> RunSpec:
    """The end-to-end grid's smallest run that does not diverge."""
    completing = [r for r in enumerate_runs(Params.of(params)) if (r.arm, r.lr) != E2E_DIVERGING]
    return min(completing, key=lambda r: (r.budget, r.context))


def model_file(run: RunSpec) -> str:
    return f"{layout.run_dir(run.cell, run.name)}/model.safetensors"


def assert_two_processes_match_the_local_run(work: Path, local_work: Path, run: RunSpec) -> None:
    here = read_json(train_dir(work, run) / "summary.json")
    local = read_json(train_dir(local_work, run) / "summary.json")
    assert here["params"]["world_size"] == 2 and local["params"]["world_size"] == 1
    keys = ("status", "tokens", "steps")
    assert [here[k] for k in keys] == [local[k] for k in keys]
    # Two processes average the gradients of half batches: the same step up to float summation order.
    assert here["final_val_loss"] == pytest.approx(local["final_val_loss"], rel=1e-4)


def test_a_two_process_scale_trains_with_torchrun_inside_one_slurm_job(smoke, tmp_path, tmp_path_factory):
    params = e2e_params()
    ddp_run = smallest_completing_run(params)
    for resources in params["train"]["resources"].values():
        resources["processes"] = 2
    work = make_workdir(tmp_path / "ddp", params)
    copy_tokens(tmp_path_factory.getbasetemp(), work)  # prepare is tested above

    snakemake(work, "--cores", "2", *SLURM, model_file(ddp_run), timeout=1200)

    [log] = slurm_logs(work, "train")
    job = run(["scontrol", "show", "job", log.stem], work).stdout  # kept for MinJobAge=600 s
    assert "NumCPUs=2 " in job and "NumTasks=1 " in job  # one task, two CPUs: torchrun starts the processes
    assert_two_processes_match_the_local_run(work, smoke.work, ddp_run)


def test_a_two_node_scale_trains_as_one_slurm_job_over_two_nodes(smoke, tmp_path, tmp_path_factory):
    params = e2e_params()
    spec = smallest_completing_run(params)
    for resources in params["train"]["resources"].values():
        resources.update(nodes=2, processes=1)
    work = make_workdir(tmp_path / "nodes", params)
    copy_tokens(tmp_path_factory.getbasetemp(), work)  # prepare is tested above

    snakemake(work, model_file(spec), "--cores", "2", *SLURM,
              "--set-resources", "train:slurm_partition=multi", timeout=600)

    [log] = slurm_logs(work, "train")
    job = run(["scontrol", "show", "job", log.stem], work).stdout  # kept for MinJobAge=600 s
    assert "NumNodes=2 " in job and "NumTasks=2 " in job  # one task per node: one torchrun agent each
    nodes = run(["scontrol", "show", "hostnames", job.split(" NodeList=")[1].split()[0]], work).stdout.split()
    assert len(nodes) == 2
    train_log = (work / layout.train_log(spec.cell, spec.name)).read_text()
    assert "launch.sh: 2 nodes" in train_log and "rendezvous at " in train_log
    assert_two_processes_match_the_local_run(work, smoke.work, spec)


def test_a_two_node_launch_refuses_a_one_node_allocation(tmp_path):
    launch = REPO / "workflow" / "scripts" / "launch.sh"
    result = run(["srun", "--partition", "main", "--nodes", "1", "--time", "1", "--mem", "100", "bash",
                  str(launch), "2", "1", "0", "train", "--params", "params.yaml", "some-run"], tmp_path,
                 check=False)
    assert result.returncode == 2
    assert "the run asks for 2 nodes but Slurm job" in result.stderr and "has 1" in result.stderr
