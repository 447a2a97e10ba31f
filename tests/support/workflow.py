"""Shared by the workflow tests (test_workflow, test_slurm, test_dvc): scratch copies of the workflow, the
commands run in them, the end-to-end grid, and one local run of it that the Slurm and DVC tests compare
against.

Everything runs the real tools (snakemake, dvc, git, ssh, Slurm) as subprocesses, with this venv first on
PATH as in an activated environment. Not a test module: pytest collects nothing here.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from support import REPO, TEST_PARAMS, fixture_params

BIN = Path(sys.executable).parent

# What a clone holds that the pipeline reads: the workflow, the DVC settings, and the stages' code (DVC hashes
# it as stage dependencies; the code that runs is the installed package, which is this same tree). Not the
# repository's params.yaml and results/plan.json: a scratch copy's params.yaml is the tests' own
# (support.TEST_PARAMS) and its plan is written there, from it and this code.
WORKFLOW_FILES = ("Snakefile", "dvc.yaml", "slurm", "profiles", "workflow", ".dvc/config", ".dvc/.gitignore",
                  ".dvcignore", ".gitignore", "src", "results/accepted-code.json")
IGNORE = shutil.ignore_patterns("__pycache__", "*.egg-info", ".snakemake")

# The marks of a module that runs jobs on the Slurm cluster `.ci/setup-slurm.sh` starts (CI runs it before the
# tests): skipped only where Slurm is not installed at all; an installed Slurm that does not answer is a
# failure.
SLURM_MARKS = [
    pytest.mark.slurm,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("sinfo") is None,
                       reason="Slurm is not installed here (no sinfo); `bash .ci/setup-slurm.sh` starts one"),
]
# The Slurm profile, answering at once on this one-machine cluster: Snakemake's first look at a job after 1 s
# instead of its 60, and no cap on status checks (the profile's suit a real cluster's controller).
SLURM_PROFILE = ("--profile", "slurm", "--slurm-init-seconds-before-status-checks", "1",
                 "--max-status-checks-per-second", "10")

# Downloads of `prepare` (pinned PyPI archives) are shared by every scratch copy and kept between sessions.
DOWNLOAD_CACHE = REPO / "data" / "cache"


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["NGPTLAB_CACHE"] = str(DOWNLOAD_CACHE)
    env.pop("SNAKEMAKE_PROFILE", None)
    return env


def run(cmd: list[str], cwd: Path, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    """Run a command; on failure, an assertion that shows the command and the end of its output."""
    proc = subprocess.run(cmd, cwd=cwd, env=environment(), capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"`{' '.join(cmd)}` in {cwd} exited {proc.returncode}\n"
                             f"--- stdout (end) ---\n{proc.stdout[-4000:]}\n"
                             f"--- stderr (end) ---\n{proc.stderr[-6000:]}")
    return proc


def snakemake(work: Path, *args: str, timeout: float = 600,
              check: bool = True) -> subprocess.CompletedProcess:
    return run([str(BIN / "snakemake"), *args], work, timeout=timeout, check=check)


def dvc(work: Path, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    return run([str(BIN / "dvc"), *args], work, timeout=timeout, check=check)


def git(work: Path, *args: str) -> subprocess.CompletedProcess:
    return run(["git", "-c", "user.name=ngptlab test", "-c", "user.email=test@ngptlab.invalid",
                "-c", "init.defaultBranch=main", *args], work)


# ----------------------------------------------------------------------------------------------------------
# Scratch copies


def make_workdir(dest: Path, params: dict | None = None) -> Path:
    """A copy of the workflow files in dest, with params (default: the tests' own params file, TEST_PARAMS)
    as its params.yaml and the plan written from them."""
    dest.mkdir(parents=True)
    for name in WORKFLOW_FILES:
        src = REPO / name
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            target.symlink_to(os.readlink(src))
        elif src.is_dir():
            shutil.copytree(src, target, ignore=IGNORE, symlinks=True)
        else:
            shutil.copy2(src, target)
    if params is None:
        shutil.copy2(TEST_PARAMS, dest / "params.yaml")
        write_plan(dest)
    else:
        write_params(dest, params)
    return dest


def write_params(work: Path, params: dict) -> None:
    """The documented way to change the experiment: params.yaml, then its resolved grid for DVC."""
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    write_plan(work)


def write_plan(work: Path) -> None:
    """results/plan.json of work's params.yaml and code, as `ngptlab plan --write` writes it."""
    run([str(BIN / "ngptlab"), "plan", "--params", "params.yaml", "--write", "results/plan.json"], work)


def apply_preset(work: Path, name: str) -> None:
    """What `make preset NAME=<name>` does (README): the preset becomes params.yaml, then the plan."""
    shutil.copy2(work / "workflow" / "presets" / f"{name}.yaml", work / "params.yaml")
    write_plan(work)


def default_params() -> dict:
    """The tests' own params (TEST_PARAMS), what a scratch copy's params.yaml holds unless a test says."""
    return fixture_params()


# The end-to-end tests' own grid: the tests' params (TEST_PARAMS) with a smaller grid, so that running it
# through Snakemake, Slurm and DVC costs about a minute of CPU each, while still exercising every rule and
# stage: two arms (the baseline and nGPT), its first context, two budgets 4x apart (so there is a speed-up to
# estimate), two learning rates per arm, one of which (gpt at 1.0) diverges within its first steps (train
# loss > train.diverge_loss), so the diverged path runs too; every other run completes. Both arms are
# speed-up baselines (gpt the primary), so a second baseline runs through every stage at no cost in
# training. `make` still runs the researcher's params.yaml.
E2E_BUDGETS = (2048, 8192)
E2E_LEARNING_RATES = {"gpt": (3.0e-3, 1.0), "ngpt": (3.0e-3, 1.0e-2)}
E2E_DIVERGING = ("gpt", 1.0)  # (arm, learning rate) whose runs diverge


def e2e_params() -> dict:
    params = default_params()
    train = params["train"]
    scale = train["scales"][0]
    train.update(scales=[scale], contexts=train["contexts"][:1], arms=list(E2E_LEARNING_RATES),
                 budgets=list(E2E_BUDGETS), eval_every_tokens=min(E2E_BUDGETS),
                 checkpoint_every_tokens=min(E2E_BUDGETS),
                 final_eval_tokens=4096)  # 32 windows: a quarter of the default's time, in every run
    train["learning_rates"] = {scale: {arm: list(lrs) for arm, lrs in E2E_LEARNING_RATES.items()}}
    train["resources"] = {scale: train["resources"][scale]}
    params["evaluate"]["limit"] = 25  # examples per task: lm-eval's whole path, a quarter of the time
    params["speedup"]["baseline"] = list(E2E_LEARNING_RATES)
    return params


# ----------------------------------------------------------------------------------------------------------
# What Snakemake plans


@dataclass(frozen=True)
class Job:
    rule: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def job_counts(output: str) -> Counter:
    """The "Job stats" table of a dry run: rule -> number of jobs (empty when there is nothing to do)."""
    counts: Counter = Counter()
    block = output.split("Job stats:", 1)
    if len(block) < 2:
        return counts
    for line in block[1].splitlines()[3:]:
        parts = line.split()
        if len(parts) != 2 or parts[0] == "total":
            break
        counts[parts[0]] = int(parts[1])
    return counts


def planned_jobs(dry_run_output: str) -> list[Job]:
    """Every job a dry run lists (with --forceall: the whole DAG) as (rule, inputs, outputs)."""
    jobs, current = [], None
    for line in dry_run_output.splitlines():
        header = re.match(r"^(?:local)?rule (\S+):$", line)
        if header:
            current = {"rule": header.group(1), "input": (), "output": ()}
            jobs.append(current)
            continue
        field = re.match(r"^    (input|output): (.*)$", line)
        if current is not None and field:
            current[field.group(1)] = tuple(field.group(2).split(", "))
    return [Job(j["rule"], j["input"], j["output"]) for j in jobs]


# ----------------------------------------------------------------------------------------------------------
# One local run of the end-to-end grid, shared by the test modules of a session (a session-scoped fixture
# imported into several modules would run once per module, so the memo lives here).


@dataclass(frozen=True)
class SmokeRun:
    work: Path
    wall_s: float


@functools.cache
def local_smoke_run(base: Path) -> SmokeRun:
    work = make_workdir(base / "smoke-local", e2e_params())
    started = time.monotonic()
    snakemake(work, "--cores", "2", timeout=1800)
    return SmokeRun(work, time.monotonic() - started)


@functools.cache
def prepared_alone(base: Path) -> Path:
    """A scratch copy of the end-to-end grid where only `prepare` has run."""
    params = e2e_params()
    work = make_workdir(base / "prepared", params)
    snakemake(work, "--cores", "2", f"data/tokens/{params['train']['source']}/meta.json")
    return work


def copy_tokens(base: Path, work: Path) -> None:
    """The end-to-end grid's token shards into `work`, for tests that start at train (prepare is tested by
    the local run): that run's when this process has made it, else from `prepare` alone, so that a
    pytest-xdist worker without the tests of the local run does not train it."""
    source = local_smoke_run(base).work if local_smoke_run.cache_info().currsize else prepared_alone(base)
    shutil.copytree(source / "data" / "tokens", work / "data" / "tokens")


# ----------------------------------------------------------------------------------------------------------
# Copies of a finished run, and what both tools then plan


def copy_run(src: Path, dest: Path) -> Path:
    """A copy of a finished run; files over 1 MB are hard links (DVC replaces, never edits, them)."""
    def link_or_copy(a, b):
        if os.path.getsize(a) > 1 << 20:
            os.link(a, b)
        else:
            shutil.copy2(a, b)
    shutil.copytree(src, dest, symlinks=True, copy_function=link_or_copy,
                    ignore=shutil.ignore_patterns(".snakemake"))
    return dest


def assert_nothing_to_do(work: Path) -> None:
    assert "Data and pipelines are up to date" in dvc(work, "status").stdout
    out = snakemake(work, "--dry-run")
    assert job_counts(out.stdout) == Counter() and "Nothing to be done" in out.stdout + out.stderr


def dvc_changed(work: Path) -> Counter:
    """The stages `dvc status` names, counted per stage kind (train@<run> -> train)."""
    names = re.findall(r"^(\S+):$", dvc(work, "status").stdout, flags=re.M)
    return Counter(name.split("@")[0] for name in names)


def ran_stages(output: str) -> Counter:
    return Counter(name.split("@")[0] for name in re.findall(r"Running stage '([^']+)'", output))


def set_params(work: Path, *assignments: str) -> None:
    """The documented way to change params.yaml and its plan before DVC resolves its stages."""
    run([str(BIN / "ngptlab"), "plan", *sum((["--set", a] for a in assignments), [])], work)


# ----------------------------------------------------------------------------------------------------------
# The SSH server `.ci/setup-sshd.sh` starts, a DVC remote for the sharing tests (test_dvc, the cluster recipe)

SSH_ENV = Path("/var/lib/ngptlab-sshd/remote.env")


def on_server(ssh: dict, command: str, check: bool = True) -> str:
    """Run a shell command on the SSH server (`ssh`: the variables of SSH_ENV)."""
    login = f"{ssh['NGPTLAB_SSH_USER']}@{ssh['NGPTLAB_SSH_HOST']}"
    return run(["ssh", "-i", ssh["NGPTLAB_SSH_KEY"], "-p", ssh["NGPTLAB_SSH_PORT"], "-o", "BatchMode=yes",
                "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", login, command],
               Path("/"), check=check).stdout


def tree(root: Path) -> dict[str, bytes]:
    """Every file under root, by relative path, with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
