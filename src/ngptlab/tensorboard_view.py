"""A training job's curves as TensorBoard event files, so that a grid in progress can be watched
(`tensorboard --logdir runs`).

A view of the metrics log, never a record: the stages read metrics.jsonl. Every numeric field of a metrics
row but its step (train_loss, lr, grad_norm, val_loss, tokens, tokens_per_s, mfu, ...) is a scalar of that
name at the row's step, and every number of a field that maps names to numbers (an evaluation point's
angular_rate, relative_change, step_angle and kappa: observe/observer.py) a scalar `field/name`. At each
start of a job the event directory is written afresh from the rows its checkpoint kept (the rows the metrics
log keeps), so a resumed run holds each step once. Only rank 0 writes; the events flush at evaluations,
checkpoints and the job's end, never per step.

At the end of a run its final evaluation (the whole-val-split loss of its summary, final_val_loss, and its
standard error) is a scalar of its own at the last step: the number the speed-up stage reads, beside the
cheap val_loss curve. TensorBoard plots a scalar against its step only, so the curves a comparison across
arms and budgets reads by tokens (BY_TOKENS) are written twice: `by_tokens/<tag>` at step = tokens seen.

Writing events may fail (a full disk, a directory that is not one, a missing tensorboard package): the job
then logs one line and trains on without them. The train stage's code fingerprint leaves this module out
(ngptlab.plan.closure.OUTSIDE_FINGERPRINT) because the events change no result: an edit here reruns no run.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

# Events wait in memory for the writer's thread: room for many rows, so that a step never waits on a write.
QUEUE_EVENTS = 10_000
# The curves also written against the tokens seen, under TOKENS_PREFIX (runs of other batch sizes and the
# budgets of a sweep line up by tokens, not by steps).
BY_TOKENS = ("train_loss", "val_loss", "lr", "final_val_loss")
TOKENS_PREFIX = "by_tokens/"


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def scalars(row: dict[str, Any]) -> dict[str, float]:
    """The fields of a metrics row that are curves: its numbers, without the step they are plotted at, and
    the numbers of a field that maps names to numbers (angular_rate, kappa, ...) as `field/name`."""
    out: dict[str, float] = {}
    for key, value in row.items():
        if key != "step" and _number(value):
            out[key] = value
        elif isinstance(value, dict):
            out.update((f"{key}/{name}", number) for name, number in value.items() if _number(number))
    return out


class TensorBoardView:
    """The event files of one job, or nothing once writing them failed (or was never asked for)."""

    def __init__(self, directory: Path | None, rows: Iterable[dict], say: Callable[[str], None]):
        """Events under `directory` (None: none) from the kept metrics `rows` on; `say` logs the one line of a
        failure."""
        self.directory, self.say, self.writer = directory, say, None
        if directory is None:
            return
        self._guard(self._open, rows)

    def _open(self, rows: Iterable[dict]) -> None:
        # imported here: a job that writes no events never pays for (nor needs) the tensorboard package
        from torch.utils.tensorboard import SummaryWriter

        if self.directory.exists():  # events of rows the checkpoint did not keep: written again below
            shutil.rmtree(self.directory)
        self.writer = SummaryWriter(str(self.directory), max_queue=QUEUE_EVENTS)
        for row in rows:
            self._write(row)

    def _write(self, row: dict) -> None:
        for tag, value in scalars(row).items():
            self.writer.add_scalar(tag, value, row["step"])
            if tag in BY_TOKENS and "tokens" in row:
                self.writer.add_scalar(TOKENS_PREFIX + tag, value, row["tokens"])

    def add(self, row: dict) -> None:
        """One metrics row, at its step (and its BY_TOKENS curves at its tokens)."""
        if self.writer is not None:
            self._guard(self._write, row)

    def final(self, step: int, tokens: int, loss: float, se: float) -> None:
        """The run's final evaluation, at its last step: final_val_loss (also by tokens) and its standard
        error, flushed at once (the job ends here)."""
        if self.writer is not None:
            self._guard(self._final, step, tokens, loss, se)
            self.flush()

    def _final(self, step: int, tokens: int, loss: float, se: float) -> None:
        self.writer.add_scalar("final_val_loss", loss, step)
        self.writer.add_scalar(TOKENS_PREFIX + "final_val_loss", loss, tokens)
        if math.isfinite(se):  # none from a single window
            self.writer.add_scalar("final_val_loss_se", se, step)

    def flush(self) -> None:
        if self.writer is not None:
            self._guard(self.writer.flush)

    def close(self) -> None:
        writer, self.writer = self.writer, None
        if writer is not None:
            self._guard(writer.close)

    def _guard(self, action: Callable[..., None], *args: Any) -> None:
        """Do `action`; on any failure, say so once and write no more events (the run goes on)."""
        try:
            action(*args)
        except Exception as err:  # a view: no failure of it may end a run
            self.say(f"TensorBoard events in {self.directory} stopped ({type(err).__name__}: {err}); "
                     f"training goes on, metrics.jsonl is the record")
            writer, self.writer = self.writer, None
            if writer is not None:
                try:
                    writer.close()
                except Exception:  # the same failure again: said once already
                    pass
