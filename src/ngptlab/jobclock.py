"""How long a job may still run: its own clock against the time it has.

A cluster job has a time limit (`train.max_job_minutes`, the partition's limit, and the Slurm job's own end
time); a run or an evaluation longer than that stops by itself before it, saves what it has and exits
EXIT_RESUMABLE (75), and the workflow's next job continues it. Stopping by our own clock, not by Slurm's
signal, means a job never depends on the signal arriving in time, and the checkpoint never races a kill.

The clock starts when the job started: inside a Slurm job when Slurm started it (squeue), and its deadline is
never later than the job's end time; elsewhere launch.sh exports NGPTLAB_JOB_STARTED (seconds since the
epoch) once, so a torchrun restart inside the job counts from the same moment.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime

EXIT_RESUMABLE = os.EX_TEMPFAIL  # 75: stopped with its work saved; run the same command again to continue
# torchrun's agent exits 1 whenever it was signalled itself, whatever its processes said; launch.sh names this
# file, a process that stops resumably writes its exit code there, and launch.sh exits with it.
RESUMABLE_MARK_ENV = "NGPTLAB_RESUMABLE_MARK"
STARTED_ENV = "NGPTLAB_JOB_STARTED"
# Kept free at the end of a job for the process to exit and the filesystem to settle: a twentieth of the
# job, at most two minutes (a minute-long test job keeps 3 s).
MARGIN_FRACTION, MARGIN_MAX_S = 0.05, 120.0


@dataclass(frozen=True)
class JobClock:
    """`deadline`: seconds since the epoch by which the job must have exited; None: no limit."""

    deadline: float | None
    margin_s: float = 0.0

    def remaining_s(self) -> float:
        return float("inf") if self.deadline is None else self.deadline - self.margin_s - time.time()

    def must_stop(self, reserve_s: float) -> bool:
        """Would work that needs `reserve_s` more seconds (the next step and a checkpoint) overrun?"""
        return self.remaining_s() < reserve_s


def job_started() -> float:
    """When this job started: inside Slurm the job's start (a requeued job's latest), else
    NGPTLAB_JOB_STARTED if launch.sh set it, else when this process started."""
    start, _ = slurm_times()
    if start is not None:
        return start
    value = os.environ.get(STARTED_ENV)
    try:
        return float(value) if value else _process_start
    except ValueError:
        return _process_start


def job_clock(max_job_minutes: float | None) -> JobClock:
    """The clock of the job running this process, limited by `max_job_minutes` (None: no limit of its own)
    and by the Slurm job's end time when it runs inside one."""
    started, (_, slurm_end) = job_started(), slurm_times()
    limits = [started + 60.0 * float(max_job_minutes)] if max_job_minutes else []
    if slurm_end is not None:
        limits.append(slurm_end)
    if not limits:
        return JobClock(None)
    deadline = min(limits)
    return JobClock(deadline, min(MARGIN_MAX_S, MARGIN_FRACTION * max(deadline - started, 0.0)))


@functools.cache
def slurm_times() -> tuple[float | None, float | None]:
    """(start, end) of this Slurm job as squeue has them (its end: the start plus its time limit); Nones
    outside Slurm, for a job without a limit, or where squeue cannot say. Asked once per process."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job or shutil.which("squeue") is None:
        return None, None
    try:
        out = subprocess.run(["squeue", "-h", "-j", job, "-o", "%S %e"], capture_output=True, text=True,
                             timeout=30, check=False).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None, None
    return tuple(_timestamp(word) for word in out[:2]) if len(out) >= 2 else (None, None)


def _timestamp(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text).timestamp()  # local time, as squeue prints it
    except ValueError:
        return None  # "Unknown", "N/A", "NONE": no such time


_process_start = time.time()


def mark_resumable(code: int) -> None:
    """Tell the launcher (launch.sh, through RESUMABLE_MARK_ENV) that this process stopped resumably."""
    mark = os.environ.get(RESUMABLE_MARK_ENV)
    if code == EXIT_RESUMABLE and mark:
        with open(mark, "w") as f:
            f.write(f"{code}\n")
