"""Where a job starts, read by rank 0 alone and broadcast to the other ranks.

A job starts from its own checkpoint (its state/), else from where the job says (a WSD branch or segment:
its trunk's kept state, train/trunk.py), else from step 0. Over several processes rank 0 alone reads and
verifies the files: one read and one hash of the checkpoint instead of one per rank, and a rank that cannot
see them (a node-local path, a cluster filesystem not yet showing rank 0's last write) cannot start from
step 0 on its own while rank 0 resumes. Rank 0 then broadcasts what it read: the progress record, the weights,
AdamW's per-parameter state and the RNG states; last, every rank checks that all start at the same step.
Where the angular update rate's interval starts (a job resumed from its own checkpoint) stays on rank 0, the
only rank that observes the weights.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as torch_dist

from ngptlab.errors import CheckpointError
from ngptlab.observe.angular import IntervalStart
from ngptlab.train import state
from ngptlab.train.dist import Topology
from ngptlab.train.log import say
from ngptlab.train.progress import Progress


@dataclass
class Start:
    progress: Progress  # step, wall time, metrics rows, resumed_from, ... (train/progress.py)
    rows_from: Path  # the state directory whose metrics rows lead up to the start
    loaded: bool  # weights, optimizer state and RNG came from a checkpoint (else: step 0, as built)
    # where the angular interval of a job resumed from its own checkpoint starts, read on rank 0 (None: at
    # the start's step, which a trunk's kept state always is: a branch point, where intervals restart)
    interval: IntervalStart | None = None


def read_start(state_dir: Path, elsewhere: Callable[[], tuple[Path, dict] | None], model: torch.nn.Module,
               optimizer: torch.optim.Optimizer, expected: dict) -> Start:
    """Load the job's start into `model` and `optimizer` from the files (this process reads them): its own
    checkpoint in `state_dir` (made as `expected`, its identity), else `elsewhere()`, where the job says it
    starts without one (a WSD branch or segment: its trunk's kept state, with the trunk's identity),
    else step 0."""
    progress = state.load_state(state_dir, model, optimizer, expected)
    if progress is not None:
        progress.resumed_from = [*progress.resumed_from, progress.step]
        return Start(progress, state_dir, loaded=True, interval=state.load_interval(state_dir))
    if start := elsewhere():
        rows_from, trunk_expected = start
        progress = state.load_state(rows_from, model, optimizer, trunk_expected)
        progress.started_at, progress.resumed_from = progress.step, []
        return Start(progress, rows_from, loaded=True)
    return Start(Progress(), state_dir, loaded=False)


def restore(topo: Topology, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
            read: Callable[[], Start]) -> Start:
    """`read()` on one process; over several, on rank 0, then broadcast to every rank and checked."""
    if not topo.distributed:
        return read()
    start, failure = None, None
    if topo.is_main:
        try:
            start = read()
        except Exception as err:  # the other ranks wait in the broadcast below: tell them, then raise
            failure = err
    payload = [_payload(start, failure, optimizer) if topo.is_main else None]
    torch_dist.broadcast_object_list(payload, src=0, device=_object_device(topo))
    sent = payload[0]
    if failure is not None:
        raise failure
    if "error" in sent:
        raise CheckpointError(f"rank 0 could not read where this job starts, so rank {topo.rank} does not "
                              f"start either: {sent['error']}")
    if not topo.is_main:
        start = Start(sent["progress"], sent["rows_from"], sent["loaded"])
    if start.loaded:
        _broadcast_weights(model)
        _broadcast_optimizer(optimizer, sent["optimizer"], topo)
        if not topo.is_main:
            _set_rng(sent["rng"])
        else:
            say(f"rank 0 read checkpoint step {start.progress.step} ({start.rows_from}); broadcast to "
                f"{topo.world_size} ranks")
    steps = gather_steps(start.progress.step, topo)
    step = check_same_step(steps)
    if topo.is_main:
        say(f"all {topo.world_size} ranks start at step {step}")
    return start


def check_same_step(steps: list[int]) -> int:
    """The step every rank starts at (`steps`: one per rank, by rank); CheckpointError naming the ranks
    and their steps if they differ."""
    if len(set(steps)) == 1:
        return steps[0]
    ranks: dict[int, list[int]] = {}
    for rank, step in enumerate(steps):
        ranks.setdefault(step, []).append(rank)
    shown = "; ".join(f"step {step}: {_ranks(found)}" for step, found in sorted(ranks.items()))
    raise CheckpointError(f"the {len(steps)} ranks would start at different steps ({shown}); every rank "
                          f"must resume from the same checkpoint")


def _ranks(ranks: list[int]) -> str:
    listed = ", ".join(map(str, ranks[:8])) + (f" and {len(ranks) - 8} more" if len(ranks) > 8 else "")
    return f"rank{'s' if len(ranks) > 1 else ''} {listed}"


def gather_steps(step: int, topo: Topology) -> list[int]:
    """Every rank's step, by rank."""
    mine = torch.tensor([step], dtype=torch.int64, device=topo.device)
    every = [torch.empty_like(mine) for _ in range(topo.world_size)]
    torch_dist.all_gather(every, mine)
    return [int(t.item()) for t in every]


def _object_device(topo: Topology) -> torch.device | None:
    # broadcast_object_list stages the pickled bytes on a device: NCCL needs this rank's GPU
    return topo.device if topo.device.type == "cuda" else None


def _payload(start: Start | None, failure: Exception | None, optimizer: torch.optim.Optimizer) -> dict:
    """What rank 0 sends first: the progress record, and the shapes of the tensors to come (the other ranks
    have no optimizer state before their first step, so they allocate from this)."""
    if failure is not None:
        return {"error": str(failure) or type(failure).__name__}
    sent: dict[str, Any] = {"progress": start.progress, "rows_from": start.rows_from, "loaded": start.loaded}
    if start.loaded:
        structure, scalars = [], {}
        for index, per_param in optimizer.state_dict()["state"].items():
            for key, value in per_param.items():
                if isinstance(value, torch.Tensor):
                    on_cpu = value.device.type == "cpu"
                    structure.append((index, key, tuple(value.shape), value.dtype, on_cpu))
                else:
                    scalars.setdefault(index, {})[key] = value
        cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
        rng = {"cpu": torch.get_rng_state(), "cuda": torch.cuda.get_rng_state_all() if cuda else []}
        sent.update(optimizer={"tensors": structure, "scalars": scalars}, rng=rng)
    return sent


@torch.no_grad()
def _broadcast_weights(model: torch.nn.Module) -> None:
    """Rank 0's weights and buffers into every rank's, in place (so DDP and the optimizer keep theirs)."""
    seen = set()
    for tensor in model.state_dict().values():
        if tensor.numel() == 0 or tensor.data_ptr() in seen:  # tied weights: sent once
            continue
        seen.add(tensor.data_ptr())
        torch_dist.broadcast(tensor, src=0)


def _broadcast_optimizer(optimizer: torch.optim.Optimizer, layout: dict, topo: Topology) -> None:
    """AdamW's moments and step counts, one tensor at a time on the process group's device (NCCL: GPU,
    gloo: CPU); the other ranks load them as rank 0 holds them (a step count on the CPU stays there)."""
    own = optimizer.state_dict()["state"]
    received: dict[int, dict[str, Any]] = {}
    for index, key, shape, dtype, on_cpu in layout["tensors"]:
        if topo.is_main:
            buffer = own[index][key].to(topo.device)
        else:
            buffer = torch.empty(shape, dtype=dtype, device=topo.device)
        torch_dist.broadcast(buffer, src=0)
        received.setdefault(index, {})[key] = buffer.cpu() if on_cpu else buffer
    if topo.is_main:
        return
    for index, scalars in layout["scalars"].items():
        received.setdefault(index, {}).update(scalars)
    optimizer.load_state_dict({"state": received, "param_groups": optimizer.state_dict()["param_groups"]})


def _set_rng(rng: dict) -> None:
    """Rank 0's RNG states, as load_state sets them from the file."""
    torch.set_rng_state(rng["cpu"])
    if rng["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"][: torch.cuda.device_count()])
