"""A step's batch: its arithmetic (sequences per rank and per forward pass), and its micro-batches on the
device, the next step's staged while the current one runs.

The global batch in sequences is fixed by params (the paper: 512 at every context), whatever the number of
processes.

Batches are a pure function of (seed, step) (train/data.py), so staging ahead changes nothing trained. The
trainer stages step + 1 right after step's forward and backward passes are queued and before the step's
one host read (train/trainer.py): the numpy gather and the pinned host-to-device copy of the next batch then
overlap the GPU's backward pass instead of following the update. A step's batch is kept until a later step
asks for its own, so a step computed again (train/attention.py) reads the same tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ngptlab.batch import split_batch, steps_per_run
from ngptlab.errors import ParamsError
from ngptlab.grid.runs import RunSpec
from ngptlab.grid.trunks import TrunkSpec
from ngptlab.settings import Train
from ngptlab.train.data import Shards, batch_offsets, gather


@dataclass(frozen=True)
class BatchPlan:
    context: int
    seqs_global: int  # sequences per optimizer step, all ranks together
    seqs_per_rank: int
    micro_seqs: int  # sequences per forward pass
    accum_steps: int  # forward passes per rank per optimizer step
    steps: int  # optimizer steps in the budget

    @property
    def batch_tokens(self) -> int:
        return self.seqs_global * self.context


def plan_batches(train: Train, spec: RunSpec | TrunkSpec, world_size: int,
                 steps: int | None = None) -> BatchPlan:
    """world_size counts every process of the run, on all its nodes (torchrun's WORLD_SIZE); `steps`: where
    the job ends (default: the run's budget)."""
    context, seqs_global = spec.context, train.batch_sequences
    split = split_batch(seqs_global, train.micro_batch_tokens, context, world_size)
    steps = steps_per_run(train, context, spec.budget) if steps is None else steps
    if steps < 1:
        raise ParamsError(f"budget {spec.budget} tokens is less than one batch "
                          f"(train.batch_sequences {seqs_global} x context {context})")
    return BatchPlan(context, seqs_global, split.seqs_per_rank, split.micro_seqs, split.accum_steps, steps)


def to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    if device.type == "cuda":  # pinned: the copy is asynchronous, ordered on the current stream
        return t.pin_memory().to(device, non_blocking=True)
    return t


class Batches:
    def __init__(self, shards: Shards, plan: BatchPlan, seed: int, rank: int, device: torch.device):
        self.shards, self.plan, self.seed, self.rank, self.device = shards, plan, seed, rank, device
        self._staged: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}

    def _stage(self, step: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        plan = self.plan
        offsets = batch_offsets(len(self.shards.train), plan.context, plan.seqs_global, self.seed, step)
        mine = offsets[self.rank * plan.seqs_per_rank:(self.rank + 1) * plan.seqs_per_rank]
        micro = []
        for i in range(plan.accum_steps):
            rows = mine[i * plan.micro_seqs:(i + 1) * plan.micro_seqs]
            x, y = gather(self.shards.train, rows, plan.context, self.shards.vocab_size)
            micro.append((to_device(x, self.device), to_device(y, self.device)))
        return micro

    def get(self, step: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(inputs, targets) of each of this rank's micro-batches of `step`; earlier steps' are dropped."""
        for old in [s for s in self._staged if s < step]:
            del self._staged[old]
        if step not in self._staged:
            self._staged[step] = self._stage(step)
        return self._staged[step]

    def prefetch(self, step: int) -> None:
        """Stage `step`'s micro-batches now (none past the job's last step)."""
        if step < self.plan.steps and step not in self._staged:
            self._staged[step] = self._stage(step)

    @property
    def staged(self) -> list[int]:
        return sorted(self._staged)
