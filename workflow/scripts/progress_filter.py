"""Snakemake's terminal output for `make`: its progress without the job listings.

`make` pipes `snakemake`'s output through this filter. Snakemake's own options cannot give that view: `--quiet
rules` still prints three lines per finished job (675 for the default grid's 225 jobs), `--quiet rules
progress` prints no progress at all, and its log file (.snakemake/log/) is filtered the same way. So Snakemake
runs unquieted, its complete log keeps every job's listing (the last lines name it), and this filter drops,
from the terminal only:
- each job's listing: the `[date]` line and the `rule NAME:` / `localrule NAME:` block with its
  indented lines;
- each `Finished jobid: ...` line and the scheduler's `Select jobs to execute...` / `Execute N jobs...`;
- the progress lines `K of N steps (P%) done` but one per STEP_PERCENT of the jobs and the last, and the
  blank lines between jobs.
Everything else passes: the job counts, warnings, errors (`Error in rule ...` with its indented lines),
what a job prints to the terminal, and the closing lines. Ctrl-C is left to Snakemake: the filter ignores
SIGINT and reads on until Snakemake has said what it stopped.

Usage: snakemake ... 2>&1 | python workflow/scripts/progress_filter.py [STEP_PERCENT]   (default 5)
"""

from __future__ import annotations

import re
import signal
import sys

TIMESTAMP = re.compile(r"^\[\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4}\]$")
LISTING = re.compile(r"^(local)?(rule|checkpoint) \S+:$")
PROGRESS = re.compile(r"^(\d+) of (\d+) steps \(([\d.]+)%\) done$")
SCHEDULER = re.compile(r"^(Select jobs to execute\.\.\.|Execute \d+ jobs\.\.\.|Finished jobid: .*)$")


def keep(lines, step: int = 5):
    """The lines of Snakemake's output the terminal shows (an iterator of lines without their newlines)."""
    in_listing = False
    shown = -1  # the last progress percentage shown, in multiples of `step`
    for line in lines:
        if in_listing:
            if line.startswith("    "):
                continue
            in_listing = False
        if LISTING.match(line):
            in_listing = True
            continue
        if TIMESTAMP.match(line) or SCHEDULER.match(line):
            continue
        progress = PROGRESS.match(line)
        if progress:
            done, total, percent = int(progress[1]), int(progress[2]), float(progress[3])
            if done < total and percent // step <= shown:
                continue
            shown = int(percent // step)
        elif shown >= 0 and not line.strip():
            continue  # once jobs run, the blank lines the dropped listings leave
        yield line


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    step = int(argv[1]) if len(argv) > 1 else 5
    for line in keep((raw.rstrip("\n") for raw in sys.stdin), step):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
