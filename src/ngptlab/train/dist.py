"""Process topology: a single process, or one of several under `torchrun` (DDP; gloo on CPU, nccl on GPU)."""

from __future__ import annotations

import inspect
import os
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ngptlab.device import resolve_device
from ngptlab.train import nccl_env


@dataclass(frozen=True)
class Topology:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def ddp(module: torch.nn.Module, topology: Topology, n_params: int) -> DistributedDataParallel:
    """DDP around the (compiled) model, for the hot loop: gradient buckets sized from the model (a quarter of
    its fp32 gradients, within 25..100 MiB: few all-reduces, yet several to overlap with the backward pass),
    gradients as views into the buckets (no copy between them, one gradient's memory less), and no buffer
    broadcast before each forward (no_buffer_sync): the only buffers are the RoPE tables, identical on every
    rank."""
    bucket_mib = min(100.0, max(25.0, n_params * 4 / 2**20 / 4))
    cuda = topology.device.type == "cuda"
    return DistributedDataParallel(module, device_ids=[topology.local_rank] if cuda else None,
                                   bucket_cap_mb=bucket_mib, gradient_as_bucket_view=True,
                                   **no_buffer_sync())


def no_buffer_sync(init: Callable | None = None) -> dict[str, bool]:
    """DDP's keyword for "no buffer broadcast before each forward", in the spelling the installed torch's DDP
    accepts (read from its signature, not its version string, so a patched or nightly build is judged by
    what it takes): forward_sync_buffers=False where it has one (torch 2.13, which deprecates the old name
    with a warning on every construction), else broadcast_buffers=False (torch 2.11). The two differ only at
    start, where the old one also skips the initial buffer sync; the RoPE tables need none."""
    parameters = inspect.signature(init or DistributedDataParallel.__init__).parameters
    if "forward_sync_buffers" in parameters:
        return {"forward_sync_buffers": False}
    return {"broadcast_buffers": False}


def setup(device_setting: str) -> Topology:
    """Read torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK); start the process group if world > 1."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = resolve_device(device_setting, "train.device", local_rank)
    if world_size > 1 and not dist.is_initialized():
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return Topology(rank, world_size, local_rank, device)


def visibility(topology: Topology) -> str:
    """One line for the log: this process's host, ranks, the GPUs it sees, and the collective libraries'
    settings (the network NCCL takes), which can differ between nodes."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    count = torch.cuda.device_count()
    gpus = f"{count} GPU{'s' if count > 1 else ''} visible" if count else "no GPU"
    return (f"host {socket.gethostname()} rank {topology.rank}/{topology.world_size} local rank "
            f"{topology.local_rank}: CUDA_VISIBLE_DEVICES={'unset' if visible is None else repr(visible)}, "
            f"{gpus}, on {topology.device}; {nccl_env.describe(os.environ)}")


def teardown(topology: Topology) -> None:
    if topology.distributed and dist.is_initialized():
        dist.destroy_process_group()


def all_mean(value: torch.Tensor, topology: Topology) -> torch.Tensor:
    if topology.distributed:
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
        value /= topology.world_size
    return value


def all_sum(value: torch.Tensor, topology: Topology) -> torch.Tensor:
    if topology.distributed:
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
    return value


def any_rank(flag: bool, topology: Topology) -> bool:
    """True on every rank if it is true on any: all ranks must agree to stop at the same step."""
    if not topology.distributed:
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=topology.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def barrier(topology: Topology) -> None:
    if topology.distributed:
        dist.barrier()


def end_without_restart(topology: Topology) -> None:
    """Before a stop by the job's own clock: ask this node's torchrun agent to shut down, as Slurm's signal
    would, so that it does not take the workers' exit 75 for a fault and restart them (train.max_restarts)
    in a job whose time is up. The agent is each worker's parent; one worker per node asks."""
    if topology.distributed and topology.local_rank == 0 and os.environ.get("TORCHELASTIC_RUN_ID"):
        os.kill(os.getppid(), signal.SIGTERM)
