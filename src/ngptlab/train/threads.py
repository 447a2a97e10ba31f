"""The CPU threads a training process computes with: set by the job itself, whoever launched it.

torch splits a CPU kernel's work (a matmul's blocks, a reduction's partial sums) over its intra-op threads,
so the thread count changes float rounding: the same run trained on 1 and on 16 threads ends with other
weights (up to 3e-3 apart for gpt-lrm at 8,192 tokens). torch takes its count from OMP_NUM_THREADS, else
from the machine's cores, so it used to depend on how the process was started: the workflow's launch.sh set
1 for a one-process run, torchrun sets 1 for each of several processes on a node (when OMP_NUM_THREADS is
unset), and a run started by hand took every core.

Every training process now computes on THREADS_PER_PROCESS = 1 thread, set here, whatever started it:

- one process on a CPU: what the workflow has always given it, so a run retrained by hand (`ngptlab train
  RUN`) ends with the pipeline's bytes;
- several processes (torchrun, DDP): one each, what torchrun gives the processes of a node, so a node's
  cores are not oversubscribed; a run of one process per node over several nodes, which torchrun left on
  every core of its node, computes on one too;
- a GPU run: its math is on the GPU; the host thread queues kernels and gathers batches, and one thread is
  what the workflow has always given it.

The run's summary records the count (`threads`). The process's count is restored when the job ends, for
callers that train in-process (the tests, `ngptlab bench`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

THREADS_PER_PROCESS = 1


@contextlib.contextmanager
def pinned(count: int = THREADS_PER_PROCESS) -> Iterator[int]:
    """Compute on `count` threads inside the block (a training process's THREADS_PER_PROCESS unless a
    benchmark times another); yields the count."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield count
    finally:
        torch.set_num_threads(before)
