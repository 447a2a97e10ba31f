"""A run's final evaluation: its setting, its windows, its loss with a standard error.

Intermediate evaluations read the few seeded eval windows (train.eval_windows), cheap enough to repeat along
the curve. The evaluation at a run's budget, whose loss is the run's final_val_loss, reads windows of its own:
train.final_eval_tokens tokens (`all`, the default: the whole val split up to data.FINAL_EVAL_CAP_TOKENS =
4,194,304), tiled from the split's start (data.final_eval_offsets), so every arm, learning rate, seed and
budget of a cell is scored on the same tokens, enough of them to put an interval on the loss. Their number is
rarely a multiple of the micro-batch: a compiled model gets the last batch padded to it (train/evaluation.py),
so the final evaluation runs on the curve's eval graph rather than compiling one for its tail.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

import numpy as np

from ngptlab.settings import Train
from ngptlab.train.data import final_eval_offsets
from ngptlab.train.evaluation import Evaluator


def windows(train: Train, val_tokens: int, context: int) -> np.ndarray:
    """The start offsets of the final-eval windows of a run at `context` over a val split of `val_tokens`."""
    return final_eval_offsets(val_tokens, context, train.final_eval_tokens)


def record(offsets: np.ndarray, context: int) -> dict:
    """What a summary says about the windows: the val tokens they cover, their number, the offsets' sha256."""
    return {"tokens": len(offsets) * (context + 1), "windows": len(offsets),
            "sha256": hashlib.sha256(offsets.tobytes()).hexdigest()}


@dataclass(frozen=True)
class FinalEval:
    """A run's final evaluation: the loss on its final-eval windows, its standard error, and the seconds it
    took (not training time)."""

    loss: float
    se: float
    seconds: float


def evaluate(evaluator: Evaluator, offsets: np.ndarray) -> FinalEval:
    """The trained model's final evaluation on the windows at `offsets` (windows()). Every rank calls it: the
    windows are split over them (train/evaluation.py)."""
    started = time.perf_counter()
    loss, se = evaluator.loss(offsets)
    return FinalEval(loss, se, time.perf_counter() - started)
