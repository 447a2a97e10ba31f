"""A training job that stops by its own clock before its time limit (train.max_job_minutes; ngptlab/jobclock).

After every step the loop asks whether one more step and a checkpoint would still end before the job's
deadline; if not, it checkpoints now and exits EXIT_RESUMABLE, and the workflow's next job resumes the run
from that checkpoint (the same bytes as a run that went through: batches are a function of (seed, step)).

What the next step and its checkpoint need is measured in this job: the slowest step so far (evaluation
steps included), twice, since over several processes a stop is acted on one step after it is asked
(train/stop.py); and the longest checkpoint written so far. Before the first checkpoint of a job its time is
estimated from the state's size at `train.checkpoint_write_gbps`, as `ngptlab plan` estimates it
(ngptlab/checkpoint_cost.py).
"""

from __future__ import annotations

import time

from ngptlab.checkpoint_cost import checkpoint_minutes
from ngptlab.jobclock import job_clock
from ngptlab.settings import Train


class JobLimit:
    def __init__(self, train: Train, n_params: int):
        self.clock = job_clock(train.max_job_minutes)
        self.slowest_step_s = 0.0
        self._steps = 0
        self.checkpoint_s = 60 * checkpoint_minutes(train, n_params)
        self._measured_checkpoint = False
        self._step_started = time.perf_counter()

    def step_done(self) -> None:
        """After each step. The job's first step stands alone until a second is measured: it carries the
        job's one-off costs (compilation, warm-up), which the steps after it do not repeat."""
        now = time.perf_counter()
        seconds, self._step_started = now - self._step_started, now
        self._steps += 1
        self.slowest_step_s = seconds if self._steps <= 2 else max(self.slowest_step_s, seconds)

    def checkpoint_done(self, seconds: float) -> None:
        self.checkpoint_s = max(seconds, self.checkpoint_s if self._measured_checkpoint else 0.0)
        self._measured_checkpoint = True
        self._step_started = time.perf_counter()  # the checkpoint is not the next step's time

    def reserve_s(self) -> float:
        return 2 * self.slowest_step_s + self.checkpoint_s

    def must_stop(self) -> bool:
        return self.clock.must_stop(self.reserve_s())

    def reason(self) -> str:
        return (f"{max(self.clock.remaining_s(), 0):.0f} s left of this job (train.max_job_minutes or the "
                f"Slurm time limit), and two steps ({self.slowest_step_s:.1f} s each at most) and a "
                f"checkpoint ({self.checkpoint_s:.1f} s) need {self.reserve_s():.0f} s")
