"""A model's loss on val windows: the mean over windows of each one's mean token loss, and its standard
error.

The loop scores the few seeded eval windows at every evaluation (the curve); a run's end scores its own
final-eval windows (train/final_eval.py). Either way the windows are split over the ranks, each scores its
share, and one all-reduce sums the per-window losses back.

On a CPU in eager fp32 the LM head and its loss go HEAD_ROWS tokens at a time: a micro-batch's logits
(tokens x the 50k vocabulary, ~100 MB at 512 tokens) then stay in cache instead of streaming through
memory twice, about half the time of an evaluation at d 64. Each token's logits and loss are computed by
the same row-wise kernels either way, so the losses are the same bits (tests/test_final_eval.py).

A compiled model (train.compile) gets every batch at the micro-batch's shape: a last batch of fewer windows
is padded with windows of token 0 whose losses are dropped, so one eval graph serves every evaluation
instead of torch.compile tracing (and, with automatic dynamic shapes, recompiling) for the tail. The real
windows' losses are those of the unpadded batch to float rounding (tests/test_eval_tail.py); the eager path
never pads.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ngptlab.train import dist
from ngptlab.train.batches import to_device
from ngptlab.train.data import gather

HEAD_ROWS = 32  # tokens per LM-head chunk: 32 x 50k fp32 logits, 6 MB (32 and 64 fastest of 16 to 512)


def mean_and_se(window_losses: torch.Tensor) -> tuple[float, float]:
    """The mean of per-window losses and its standard error: sd over windows / sqrt(n) (nan for one window).

    Adjacent windows are neighbouring text, not independent draws, so the standard error is a lower bound on
    the sampling error of the split's loss."""
    n = window_losses.numel()
    se = window_losses.std(correction=1).item() / math.sqrt(n) if n > 1 else math.nan
    return window_losses.mean().item(), se


def pad_rows(windows: torch.Tensor, rows: int) -> torch.Tensor:
    """`windows` [n x context] followed by rows of token 0 up to `rows` rows."""
    return torch.cat([windows, windows.new_zeros(rows - len(windows), windows.size(1))])


@dataclass(frozen=True)
class Evaluator:
    """The model, the val split and how to read it: what scoring windows takes."""

    forward: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor | None]]  # the (compiled) model
    val: np.ndarray  # the val split's tokens
    vocab_size: int
    context: int
    micro_seqs: int  # windows per forward pass
    autocast: AbstractContextManager  # the run's precision
    topo: dist.Topology
    # the eager model, when its head may go in row chunks (CPU, fp32, not compiled): hidden_states and head
    model: torch.nn.Module | None = None
    pad_tail: bool = False  # a short last batch padded to micro_seqs windows (compiled: one graph)

    def token_losses(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Each token's loss, [windows x context], of the windows x with targets y."""
        if self.model is None:
            with self.autocast:
                logits, _ = self.forward(x)
            return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1),
                                   reduction="none")
        with self.autocast:
            hidden = self.model.hidden_states(x).flatten(0, 1)
        targets = y.reshape(-1)
        chunks = []
        for start in range(0, len(targets), HEAD_ROWS):
            with self.autocast:
                logits = self.model.head(hidden[start:start + HEAD_ROWS])
            chunks.append(F.cross_entropy(logits.float(), targets[start:start + HEAD_ROWS], reduction="none"))
        return torch.cat(chunks)

    @torch.no_grad()
    def loss(self, offsets: np.ndarray) -> tuple[float, float]:
        """Mean over `offsets`' windows of each one's mean loss, and its standard error; split over ranks."""
        n, context, device = len(offsets), self.context, self.topo.device
        losses = torch.zeros(n, dtype=torch.float64, device=device)
        mine = np.arange(self.topo.rank, n, self.topo.world_size)
        for start in range(0, len(mine), self.micro_seqs):
            chunk = mine[start:start + self.micro_seqs]
            x, y = gather(self.val, offsets[chunk], context, self.vocab_size)
            if self.pad_tail and len(chunk) < self.micro_seqs:
                x, y = pad_rows(x, self.micro_seqs), pad_rows(y, self.micro_seqs)
            x, y = to_device(x, device), to_device(y, device)
            per_token = self.token_losses(x, y)[:len(chunk) * context]  # the padding's rows dropped
            per_window = per_token.view(len(chunk), context).mean(1)
            losses[torch.as_tensor(chunk, device=device)] = per_window.double()
        return mean_and_se(dist.all_sum(losses, self.topo))
