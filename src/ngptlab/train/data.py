"""Token shards, training batches and validation windows.

Two properties make runs comparable and resumable:
- A training batch is a pure function of (run seed, step): its window offsets come from a generator seeded
  with both, so a resumed run draws exactly the batches the uninterrupted run would have drawn, with no
  data-loader state to save. Every arm and budget with the same seed sees the same data in the same order.
- The validation windows depend only on (eval_seed, context): every arm, budget, learning rate and seed of a
  cell is scored on the same tokens. The final evaluation of a run reads windows of its own, more of them
  (train.final_eval_tokens), which depend only on the val shard and the context.
Batches are global; each DDP rank takes its own contiguous slice, so the data do not depend on world size.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ngptlab.errors import DataError
from ngptlab.prepare.shards import load_meta, open_tokens, verify_shards

# Stream tags keep the training and evaluation generators independent even when seed == eval_seed.
_TRAIN_STREAM = 0x7472
_EVAL_STREAM = 0x6576

# A run's final evaluation (train.final_eval_tokens, ngptlab.train.final_eval) reads at most this many val
# tokens, `all` included (2^22: about OpenWebText's validation split at the paper's val_fraction).
FINAL_EVAL_CAP_TOKENS = 4_194_304


@dataclass
class Shards:
    """The memory-mapped train/val token arrays of one source, with its meta.json."""

    dir: Path
    meta: dict
    train: np.ndarray
    val: np.ndarray

    @property
    def vocab_size(self) -> int:
        return int(self.meta["vocab_size"])


def data_record(meta: dict, source: str) -> dict[str, str]:
    """What a run records about its data: the source name and the shard hashes from meta.json."""
    return {"source": source, "train_sha256": meta["splits"]["train"]["sha256"],
            "val_sha256": meta["splits"]["val"]["sha256"]}


def open_shards(tokens_dir: str | Path, verify: bool = True) -> Shards:
    """Memory-map train.bin and val.bin; with verify, first recompute sizes and sha256 against meta.json
    (DataError naming the file on any mismatch)."""
    tokens_dir = Path(tokens_dir)
    meta = verify_shards(tokens_dir) if verify else load_meta(tokens_dir)
    if not isinstance(meta.get("vocab_size"), int) or meta["vocab_size"] < 2:
        raise DataError(f"{tokens_dir / 'meta.json'}: missing or bad 'vocab_size'")
    return Shards(tokens_dir, meta, open_tokens(tokens_dir, "train"), open_tokens(tokens_dir, "val"))


def _generator(*words: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([w % (1 << 63) for w in words]))


def batch_offsets(n_tokens: int, context: int, n_seqs: int, seed: int, step: int) -> np.ndarray:
    """Start offsets of the global batch of training step `step` (0-based): uniform, with replacement."""
    if n_tokens < context + 1:
        raise DataError(f"train shard has {n_tokens} tokens, fewer than one window of {context + 1}")
    return _generator(_TRAIN_STREAM, seed, step).integers(0, n_tokens - context, size=n_seqs, dtype=np.int64)


def eval_offsets(n_tokens: int, context: int, n_windows: int, seed: int) -> np.ndarray:
    """Start offsets of the fixed validation windows: distinct, non-overlapping, sorted, seeded by
    (seed, context) only, so every arm and budget of a cell is evaluated on the same tokens."""
    slots = n_tokens // (context + 1)
    if slots < n_windows:
        raise DataError(f"val shard has {n_tokens} tokens: room for {slots} windows of {context + 1}, "
                        f"but train.eval_windows asks for {n_windows}")
    chosen = _generator(_EVAL_STREAM, seed, context).choice(slots, size=n_windows, replace=False)
    return np.sort(chosen).astype(np.int64) * (context + 1)


def final_eval_offsets(n_tokens: int, context: int, requested: int | str) -> np.ndarray:
    """Start offsets of a run's final-evaluation windows: consecutive, non-overlapping windows of context+1
    tokens tiling the val shard from offset 0, min(requested, cap, n_tokens) // (context+1) of them, where
    the cap is FINAL_EVAL_CAP_TOKENS = 4,194,304 and `all` requests the whole shard. No seed: the same
    windows for every run of a cell.

    An explicit number of tokens the shard cannot hold, or fewer than two windows (no standard error), is a
    DataError, raised before a run trains."""
    window = context + 1
    wanted = FINAL_EVAL_CAP_TOKENS if requested == "all" else min(requested, FINAL_EVAL_CAP_TOKENS)
    if requested != "all" and wanted > n_tokens:
        raise DataError(f"train.final_eval_tokens {requested} is more than the val shard's {n_tokens} tokens "
                        f"(context {context})")
    n_windows = min(wanted, n_tokens) // window
    if n_windows < 2:
        raise DataError(f"train.final_eval_tokens {requested} at context {context} gives {n_windows} "
                        f"windows of {window} tokens (val shard: {n_tokens}); a standard error needs 2")
    return np.arange(n_windows, dtype=np.int64) * window


def gather(tokens: np.ndarray, offsets: np.ndarray, context: int,
           vocab_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-token targets [len(offsets), context] as int64 tensors. With vocab_size, an id
    outside the vocabulary is a DataError here rather than an index error deep in the embedding."""
    index = offsets[:, None] + np.arange(context + 1, dtype=np.int64)[None, :]
    window_tokens = tokens[index]
    if vocab_size is not None and window_tokens.size and int(window_tokens.max()) >= vocab_size:
        raise DataError(f"token id {int(window_tokens.max())} in the shards is outside the vocabulary "
                        f"(meta.json vocab_size {vocab_size})")
    windows = torch.from_numpy(window_tokens.astype(np.int64))
    return windows[:, :-1].contiguous(), windows[:, 1:].contiguous()
