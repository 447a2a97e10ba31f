"""`ngptlab plan`: the size and cost of every run from the shapes alone, batch arithmetic, quiet pipes."""

from __future__ import annotations

import subprocess
import sys

from ngptlab.params import REPO_ROOT

PAPER = REPO_ROOT / "workflow" / "presets" / "paper.yaml"


def test_plan_sizes_the_paper_grid_without_torch():
    code = ("import sys; from ngptlab.cli import main; rc = main(['plan', '--params', sys.argv[1]]); "
            "assert rc == 0; assert 'torch' not in sys.modules, 'plan imported torch'")
    result = subprocess.run([sys.executable, "-c", code, str(PAPER)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "1B-ctx8192-gpt-orth" in result.stdout


def test_plan_into_a_closed_pipe_ends_quietly():
    command = f"{sys.executable} -m ngptlab.cli plan --json --params {PAPER} | head -n 2"
    result = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True)
    assert result.stdout.splitlines()[0] == "{"
    assert result.stderr == "" and result.returncode == 0
