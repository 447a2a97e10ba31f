"""How long a job may still run: its own clock against the time it has.

A cluster job has a time limit (`train.max_job_minutes`, the partition's limit, and the Slurm job's own end
time); a run or an evaluation longer than that stops by itself before it, saves what it has and exits
EXIT_RESUMABLE (75), and the workflow's next job continues it. Stopping by our own clock, not by Slurm's
signal, means a job never depends on the signal arriving in time, and the checkpoint never races a kill.

The clock starts when the job started: launch.sh exports NGPTLAB_JOB_STARTED (seconds since the epoch) once,
so a torchrun restart inside the job, or a second node, counts from the same moment. Inside a Slurm job the
deadline is also never later than the job's end time as Slurm has it (squeue), whichever comes first.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime

EXIT_RESUMABLE = os.EX_TEMPFAIL  # 75: stopped with its work saved; run the same command again to continue
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
    """When this job started: NGPTLAB_JOB_STARTED if launch.sh set it, else when this process started."""
    value = os.environ.get(STARTED_ENV)
    try:
        return float(value) if value else _process_start
    except ValueError:
        return _process_start


def job_clock(max_job_minutes: float | None) -> JobClock:
    """The clock of the job running this process, limited by `max_job_minutes` (None: no limit of its own)
    and by the Slurm job's end time when it runs inside one."""
    limits = []
    if max_job_minutes:
        limits.append(job_started() + 60.0 * float(max_job_minutes))
    slurm_end = slurm_end_time()
    if slurm_end is not None:
        limits.append(slurm_end)
    if not limits:
        return JobClock(None)
    deadline = min(limits)
    length = max(deadline - job_started(), 0.0)
    return JobClock(deadline, min(MARGIN_MAX_S, MARGIN_FRACTION * length))


def slurm_end_time() -> float | None:
    """The end time Slurm has for this job (its start plus its time limit), or None outside Slurm, for a job
    without a limit, or where squeue cannot say."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job or shutil.which("squeue") is None:
        return None
    try:
        out = subprocess.run(["squeue", "-h", "-j", job, "-o", "%e"], capture_output=True, text=True,
                             timeout=30, check=False).stdout.strip()
        return datetime.fromisoformat(out).timestamp()  # local time, as squeue prints it
    except (OSError, subprocess.SubprocessError, ValueError):
        return None  # "UNLIMITED", "N/A", or no answer: no deadline of Slurm's


_process_start = time.time()
