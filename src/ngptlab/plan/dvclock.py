"""DVC's record of the plan stage, kept with the plan: where `ngptlab plan` rewrites results/plan.json from
params.yaml and the code (`--write`, `--accept-code`), the plan stage of dvc.yaml has just been done, so
`dvc commit --force plan` records it in dvc.lock, DVC's way to say a stage's changed dependencies are up to
date. `dvc status` then names the same stages as `snakemake -n` (docs/provenance.md), where it would also name
`plan` until the next `dvc repro`. Nothing is done outside a DVC repository whose dvc.lock holds the stage,
nor for a plan DVC does not read (another params file, another path): that would record a lie.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from ngptlab.errors import NgptlabError
from ngptlab.plan.dvcyaml import PLAN_FILE

PARAMS_FILE = "params.yaml"  # the params file dvc.yaml's plan stage reads


def is_dvc_plan(params_file: str | Path, plan: str | Path, root: str | Path) -> bool:
    """Whether `plan`, written from `params_file`, is what dvc.yaml's plan stage makes under root."""
    root = Path(root)
    return (Path(params_file).resolve() == (root / PARAMS_FILE).resolve()
            and Path(plan).resolve() == (root / PLAN_FILE).resolve())


def commit_plan_stage(root: str | Path, written: str) -> bool:
    """In a DVC repository whose dvc.lock holds the `plan` stage: `dvc commit --force plan`. False where
    there is none; an error naming what was `written` already where DVC fails."""
    root = Path(root)
    lock = root / "dvc.lock"
    if not lock.is_file() or "plan" not in ((yaml.safe_load(lock.read_text()) or {}).get("stages") or {}):
        return False
    beside = Path(sys.executable).with_name("dvc")  # this environment's, else the one on PATH
    dvc = str(beside) if beside.is_file() else shutil.which("dvc") or "dvc"
    done = subprocess.run([dvc, "commit", "--force", "plan"], cwd=root, capture_output=True, text=True)
    if done.returncode:
        why = ((done.stderr or done.stdout).strip().splitlines() or ["failed"])[-1]
        raise NgptlabError(f"{written} is written, but `dvc commit --force plan` failed in {root}: {why}; "
                           "run it there")
    return True
