"""Batch arithmetic: tokens per optimizer step, steps per run, and how the global batch is shared out.

The global batch is train.batch_sequences sequences at every context and whatever the number of processes;
gradient accumulation fills what one forward pass of train.micro_batch_tokens does not.
"""

from __future__ import annotations

from dataclasses import dataclass

from ngptlab.errors import ParamsError
from ngptlab.settings import Train


def tokens_per_step(train: Train, context: int) -> int:
    """Tokens per optimizer step: the global batch is a number of sequences at every context."""
    return train.batch_sequences * context


def steps_per_run(train: Train, context: int, budget: int) -> int:
    """Optimizer steps in a run of `budget` tokens (whole batches; the remainder is not trained)."""
    return budget // tokens_per_step(train, context)


@dataclass(frozen=True)
class BatchSplit:
    """How one optimizer step's global batch is shared: each of world_size processes takes
    seqs_per_rank sequences, in accum_steps forward passes of micro_seqs sequences."""

    seqs_per_rank: int
    micro_seqs: int
    accum_steps: int


def split_batch(batch_sequences: int, micro_batch_tokens: int, context: int, world_size: int) -> BatchSplit:
    """The global batch stays batch_sequences sequences whatever the number of processes (over all nodes);
    gradient accumulation fills what one forward pass of micro_batch_tokens does not."""
    if micro_batch_tokens % context:
        raise ParamsError(f"train.micro_batch_tokens ({micro_batch_tokens}) must be a multiple of the "
                          f"context {context}")
    if batch_sequences % world_size:
        raise ParamsError(f"train.batch_sequences ({batch_sequences}) cannot be split evenly over "
                          f"{world_size} processes")
    seqs_per_rank = batch_sequences // world_size
    micro_seqs = min(micro_batch_tokens // context, seqs_per_rank)
    if seqs_per_rank % micro_seqs:
        raise ParamsError(f"train.micro_batch_tokens ({micro_batch_tokens}) = {micro_seqs} sequences does "
                          f"not divide the {seqs_per_rank} sequences each of {world_size} processes gets per "
                          f"step")
    return BatchSplit(seqs_per_rank, micro_seqs, seqs_per_rank // micro_seqs)
