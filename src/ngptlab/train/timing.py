"""Step times that measure training, not compilation: which steps count towards tokens/s and MFU, and how.

A step is timed from before its first forward to after its update (AdamW and the arm's constraint); the
evaluations and checkpoints between steps are not in it. Not counted (`excluded_steps`, by reason):

- compile: the first step after every start or resume of a job with train.compile true, where Dynamo traces
  and Inductor compiles the forward and backward graphs (a warm cache makes it shorter, never free);
- recompile: any later step during which torch.compile compiled again (a guard failed, or the compiled
  code was reset after an attention backend was switched off: train/attention.py). Detected from
  torch._dynamo.utils.counters, the process-wide compile counters that Dynamo keeps and its own tests read
  (counters["frames"]["total"]: frames Dynamo set out to compile, counters["stats"]["unique_graphs"]: graphs
  it produced); torch 2.13 documents no public counter (only TORCH_LOGS=recompiles and tlparse), so a
  torch without them just detects none and says so in `timing_method`;
- warm-up: on a GPU, the first CUDA_WARMUP_STEPS steps after each start (the compile step among them):
  allocator growth, cuBLAS and cuDNN heuristics, NCCL's lazy set-up;
- nonfinite-retry: a step computed twice (train/attention.py), whose time is not one step's.

On a GPU a step's time is the elapsed time between two CUDA events recorded around it on the current
stream, read without a synchronisation of its own: an event is read once query() says it has completed,
which the step's one host read (the loss and gradient norm, before the update) guarantees for every earlier
step; checkpoints and the run's end wait for the last one. On a CPU, time.perf_counter around the step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from ngptlab.train.progress import Progress

CUDA_WARMUP_STEPS = 3
COMPILE, RECOMPILE, WARMUP, RETRY = "compile", "recompile", "warm-up", "nonfinite-retry"
REASONS = (COMPILE, RECOMPILE, WARMUP, RETRY)


def compile_count() -> int | None:
    """Frames Dynamo set out to compile plus graphs it produced, so far in this process (None: unknown)."""
    try:
        from torch._dynamo.utils import counters
        return int(counters["frames"]["total"]) + int(counters["stats"]["unique_graphs"])
    except (ImportError, AttributeError, KeyError, TypeError):
        return None


@dataclass
class Window:
    """Timed steps since the last read: their count and seconds."""

    steps: int = 0
    seconds: float = 0.0

    def rate(self, batch_tokens: int) -> float | None:
        return self.steps * batch_tokens / self.seconds if self.steps and self.seconds > 0 else None


@dataclass
class StepTimer:
    """Times one process's steps; totals go into the job's progress record (saved in checkpoints, so a resumed
    job adds to them): train_s (timed steps' seconds), timed_steps, excluded_steps {reason: count},
    excluded_s."""

    device: torch.device
    compiled: bool
    progress: Progress
    started: int = 0  # steps begun by this process
    _pending: list = field(default_factory=list)  # (start, end, reason) not yet read
    _begin: object = None
    _compiles: int | None = None
    window: Window = field(default_factory=Window)

    def __post_init__(self) -> None:
        self.cuda = self.device.type == "cuda"

    @property
    def method(self) -> str:
        return timing_method(self.cuda, self.compiled, compile_count() is not None)

    def begin(self) -> None:
        self._compiles = compile_count()
        if self.cuda:
            self._begin = torch.cuda.Event(enable_timing=True)
            self._begin.record()
        else:
            self._begin = time.perf_counter()

    def end(self, retried: bool = False) -> None:
        """After the step's update is queued: why (if at all) the step does not count."""
        count = compile_count()
        reason = (COMPILE if self.compiled and self.started == 0 else
                  RETRY if retried else
                  RECOMPILE if count != self._compiles else
                  WARMUP if self.cuda and self.started < CUDA_WARMUP_STEPS else None)
        self.started += 1
        if self.cuda:
            stop = torch.cuda.Event(enable_timing=True)
            stop.record()
        else:
            stop = time.perf_counter()
        self._pending.append((self._begin, stop, reason))

    def read(self, wait: bool = False) -> None:
        """Add the steps whose times are known to the totals and to the window. wait: first wait for the
        last step's end (at a checkpoint or the job's end, which synchronise anyway)."""
        if self.cuda and wait and self._pending:
            self._pending[-1][1].synchronize()
        while self._pending:
            begin, stop, reason = self._pending[0]
            if self.cuda and not stop.query():
                break
            seconds = begin.elapsed_time(stop) / 1e3 if self.cuda else stop - begin
            self._pending.pop(0)
            if reason is None:
                self.progress.train_s += seconds
                self.progress.timed_steps += 1
                self.window.steps += 1
                self.window.seconds += seconds
            else:
                excluded = self.progress.excluded_steps
                excluded[reason] = excluded.get(reason, 0) + 1
                self.progress.excluded_s += seconds

    def take_window(self) -> Window:
        """The timed steps read since the last call (a metrics row's); a new window starts."""
        window, self.window = self.window, Window()
        return window


def timing_method(cuda: bool, compiled: bool, counters: bool = True) -> str:
    """The timing record's words for how its step times were measured."""
    clock = (f"CUDA events around each step, read without a synchronisation of their own, after "
             f"{CUDA_WARMUP_STEPS} warm-up steps per start" if cuda else "time.perf_counter around each step")
    excluded = ["the first step after every start or resume (compile)"] if compiled else []
    excluded.append("steps that recompiled (torch._dynamo.utils.counters)" if counters else
                    "steps that recompiled: not detectable with this torch (no torch._dynamo counters)")
    excluded.append("steps computed twice after a non-finite loss or gradient norm")
    return (f"{clock} (forward, backward and update; not evaluations or checkpoints); tokens/s and MFU count "
            f"only timed steps: not {', '.join(excluded)}")


def record_memory(device: torch.device, progress: Progress) -> None:
    """Peak GPU memory of the job's processes so far (the largest over its starts), into `progress`: what the
    caching allocator handed to tensors (torch.cuda.max_memory_allocated) and what it held from the driver
    (torch.cuda.max_memory_reserved), evaluations included; left None on a CPU."""
    if device.type != "cuda":
        return
    progress.max_memory_allocated_mib = max(progress.max_memory_allocated_mib or 0.0,
                                            round(torch.cuda.max_memory_allocated(device) / 2**20, 1))
    progress.max_memory_reserved_mib = max(progress.max_memory_reserved_mib or 0.0,
                                           round(torch.cuda.max_memory_reserved(device) / 2**20, 1))
