"""A quiet `make`: what it prints on success stays under MAKE_LINES lines, without running it. Its lines are
the commands make echoes, `ngptlab plan --write`'s one line and Snakemake's output through
workflow/scripts/progress_filter.py, here a captured log of the default grid's whole run (225 jobs,
tests/support/snakemake-default-grid.log.gz). pip's install steps print nothing at the Makefile's
PIP_QUIET but their errors. Seconds."""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FILTER = REPO / "workflow" / "scripts" / "progress_filter.py"
LOG = Path(__file__).parent / "support" / "snakemake-default-grid.log.gz"
MAKE_LINES = 200
# What Snakemake prints when a job fails (a captured failure of the report rule), all of which must show.
FAILURE = """\
CalledProcessError in file "workflow/rules/report.smk", line 38:
Command 'set -euo pipefail;  ngptlab report --params params.yaml' returned non-zero exit status 1.
[Fri Dec  4 12:27:35 2026]
Error in rule report:
    message: None
    jobid: 1
    log: logs/report/report.log (check log file(s) for error details)
    shell:
        ngptlab report --params params.yaml > logs/report/report.log 2>&1
        (command exited with non-zero exit code)
Shutting down, this might take some time.
Exiting because a job execution failed. Look above for error messages""".splitlines()


def captured() -> list[str]:
    return gzip.decompress(LOG.read_bytes()).decode().splitlines()


def shown(lines: list[str]) -> list[str]:
    """What the terminal shows of these lines of Snakemake's output, through the filter as make runs it."""
    out = subprocess.run([sys.executable, str(FILTER)], input="\n".join(lines) + "\n", capture_output=True,
                         text=True, check=True, timeout=60)
    return out.stdout.splitlines()


def test_the_filter_shows_the_default_grids_run_in_a_few_dozen_lines():
    log = captured()
    terminal = shown(log)
    assert len(log) > 3000 and len(terminal) < 70
    assert [line for line in terminal if "steps (" in line][-1] == "225 of 225 steps (100%) done"
    assert sum("steps (" in line for line in terminal) == 21  # every 5% and the first
    assert not [line for line in terminal if re.match(r"^(local)?rule \w+:$", line)]  # the job listings
    assert "total          225" in terminal and terminal[-2].startswith("Complete log(s): ")


def test_a_failure_passes_the_filter_whole():
    terminal = shown([*captured()[:-2], *FAILURE])
    assert terminal[-len(FAILURE) + 1:] == [line for line in FAILURE if not line.startswith("[")]


def test_make_prints_under_200_lines_on_success():
    # every command of the install and pipeline recipes (`make -n` lists the silent `@` ones too: an upper
    # bound), plan's line, and the filtered log of the default grid's run
    commands = subprocess.run(["make", "-n", "-B", "VENV=/nonexistent-venv", "all"], cwd=REPO,
                              capture_output=True, text=True, check=True, timeout=60).stdout.splitlines()
    assert any("snakemake --cores" in line for line in commands)
    total = len(commands) + 1 + len(shown(captured()))
    assert total < MAKE_LINES, total


def pip_install(verbosity: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    """An install that warns (a find-links location that does not exist, as a configured mirror without the
    package) and then fails; pip's own configuration left out, nothing fetched."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": os.devnull}
    return subprocess.run([sys.executable, "-m", "pip", "install", *verbosity, "--no-index", "--find-links",
                           str(tmp_path / "no-such-mirror"), "ngptlab-no-such-package==1.0"],
                          env=env, capture_output=True, text=True, timeout=120)


def test_the_install_steps_show_pips_errors_and_not_its_location_warnings(tmp_path):
    makefile = (REPO / "Makefile").read_text()
    quiet = re.search(r"^PIP_QUIET \?= (.+)$", makefile, re.M)[1].split()
    installs = [line for line in makefile.splitlines() if "/pip install" in line]
    assert len(installs) == 3 and all("$(PIP_QUIET)" in line for line in installs)
    warned = pip_install(["--quiet"], tmp_path)  # the single -q the Makefile had
    assert "WARNING: Location " in warned.stderr and "is ignored" in warned.stderr
    failed = pip_install(quiet, tmp_path)
    assert failed.returncode != 0 and failed.stdout == ""
    assert failed.stderr.startswith("ERROR: ") and "WARNING" not in failed.stderr, failed.stderr
