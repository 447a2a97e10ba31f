"""`ngptlab bench workflow`: how long `snakemake -n` and `dvc status` take to plan a preset's grid.

Both run in a scratch copy of the workflow (the Snakefile, dvc.yaml, workflow/, the code DVC hashes) with the
preset applied as `make preset` does (params.yaml and results/plan.json), inside its own git repository as
DVC requires, and with no outputs: every job and every stage is planned. Each command runs `--repeat` times;
the median is compared with its target. The targets were set on the paper preset when it had 1521 jobs (10 s
for `snakemake -n`, 20 s for `dvc status`); both tools' work grows with the jobs, so the target of a grid is
that time per job times its jobs. Read the ratios: the times vary with the machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ngptlab.config.load import load_params
from ngptlab.grid.enumeration import enumerate_cells, enumerate_runs
from ngptlab.grid.trunks import enumerate_segments
from ngptlab.layout import REPO_ROOT
from ngptlab.settings import Params

COPIED = ("Snakefile", "dvc.yaml", "workflow", "slurm", "src", ".dvc/config", ".dvcignore")
TARGETS_S = {"snakemake -n": 10.0, "dvc status": 20.0}
TARGET_JOBS = 1521


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", default="paper", help="workflow/presets/<name>.yaml (default: paper)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command (default 3)")


def copy_workflow(dest: Path) -> Path:
    """The workflow and the code it runs and DVC hashes, without params, outputs or git."""
    for name in COPIED:
        src, target = REPO_ROOT / name, dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            target.symlink_to(os.readlink(src))
        elif src.is_dir():
            shutil.copytree(src, target, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", ".snakemake"))
        elif src.exists():
            shutil.copy2(src, target)
    return dest


def write_plan(work: Path) -> None:
    """results/plan.json from work's params.yaml, as `make preset` writes it."""
    plan = [str(Path(sys.executable).parent / "ngptlab"), "plan", "--params", "params.yaml", "--write",
            "results/plan.json"]
    subprocess.run(plan, cwd=work, check=True, capture_output=True)


def scratch_copy(dest: Path, preset: str) -> Path:
    copy_workflow(dest)
    preset_file = REPO_ROOT / "workflow" / "presets" / f"{preset}.yaml"
    if not preset_file.is_file():
        raise SystemExit(f"ngptlab bench workflow: no preset {preset_file}")
    shutil.copy2(preset_file, dest / "params.yaml")
    write_plan(dest)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    return dest


def timed(cmd: list[str], cwd: Path) -> tuple[float, str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"`{' '.join(cmd)}` failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return elapsed, proc.stdout


def grid_jobs(grid: Params) -> int:
    """The grid's jobs, which the targets are per: train and condition per run, one per trunk segment,
    speedup and evaluate per cell, prepare, report and `all`. Snakemake also plans one lineage job for each
    but `all` (lineage_jobs)."""
    return (2 * len(enumerate_runs(grid)) + len(enumerate_segments(grid)) + 2 * len(enumerate_cells(grid))
            + 3)


def lineage_jobs(jobs: int) -> int:
    return jobs - 1


def target_s(command: str, jobs: int) -> float:
    """The time `command` may take to plan `jobs` jobs: its target per job times the jobs."""
    return TARGETS_S[command] * jobs / TARGET_JOBS


def run(args: argparse.Namespace, params: Params) -> int:
    bin_dir = Path(sys.executable).parent
    commands = {"snakemake -n": [str(bin_dir / "snakemake"), "--dry-run", "--nolock", "--quiet", "all"],
                "dvc status": [str(bin_dir / "dvc"), "status"]}
    with tempfile.TemporaryDirectory(prefix="ngptlab-bench-workflow-") as tmp:
        work = scratch_copy(Path(tmp), args.preset)
        jobs = grid_jobs(load_params(work / "params.yaml"))
        print(f"preset {args.preset}: {jobs} jobs (and {lineage_jobs(jobs)} lineage jobs); scratch copy "
              f"{work}, {args.repeat} runs each, median")
        print(f"{'command':<14} {'median s':>9} {'ms/job':>7} {'target s':>9} {'ratio':>7}")
        for name, cmd in commands.items():
            times = []
            for _ in range(args.repeat):
                elapsed, _ = timed(cmd, work)
                times.append(elapsed)
            median = statistics.median(times)
            target = target_s(name, jobs)
            print(f"{name:<14} {median:>9.1f} {1000 * median / jobs:>7.1f} {target:>9.1f} "
                  f"{median / target:>7.2f}")
        stages = jobs  # every job but `all`, and the plan stage
        print(f"once dvc.lock records them, `dvc status` parses a params file for each of {stages} stages:")
        for name in ("params.yaml", "results/plan.json"):
            ms = params_read_ms(work / name)
            print(f"  {name:<18} {ms:>7.1f} ms per parse  x {stages} = {ms * stages / 1000:>6.1f} s")
    return 0


def params_read_ms(path: Path, repeat: int = 5) -> float:
    """How long DVC takes to load a params file, as it does for every stage it checks (it keeps no copy)."""
    from dvc.fs import LocalFileSystem
    from dvc.utils.serialize import load_path

    fs = LocalFileSystem()
    started = time.perf_counter()
    for _ in range(repeat):
        load_path(str(path), fs)
    return 1000 * (time.perf_counter() - started) / repeat
