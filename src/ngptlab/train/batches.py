"""A step's micro-batches on the device, the next step's staged while the current one runs.

Batches are a pure function of (seed, step) (train/data.py), so staging ahead changes nothing trained. The
trainer stages step + 1 right after step's forward and backward passes are queued and before the step's
one host read (train/loop.py): the numpy gather and the pinned host-to-device copy of the next batch then
overlap the GPU's backward pass instead of following the update. A step's batch is kept until a later step
asks for its own, so a step computed again (train/attention.py) reads the same tokens.
"""

from __future__ import annotations

import torch

from ngptlab.train.data import Shards, batch_offsets, gather


class Batches:
    def __init__(self, shards: Shards, plan, seed: int, rank: int, device: torch.device):
        self.shards, self.plan, self.seed, self.rank, self.device = shards, plan, seed, rank, device
        self._staged: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}

    def to_device(self, t: torch.Tensor) -> torch.Tensor:
        if self.device.type == "cuda":  # pinned: the copy is asynchronous, ordered on the current stream
            return t.pin_memory().to(self.device, non_blocking=True)
        return t

    def _stage(self, step: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        plan = self.plan
        offsets = batch_offsets(len(self.shards.train), plan.context, plan.seqs_global, self.seed, step)
        mine = offsets[self.rank * plan.seqs_per_rank:(self.rank + 1) * plan.seqs_per_rank]
        micro = []
        for i in range(plan.accum_steps):
            rows = mine[i * plan.micro_seqs:(i + 1) * plan.micro_seqs]
            x, y = gather(self.shards.train, rows, plan.context, self.shards.vocab_size)
            micro.append((self.to_device(x), self.to_device(y)))
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
