"""When a training job stops early: a signal asks for a checkpoint, or the run diverges.

SIGTERM (Slurm preemption or time limit) and SIGINT ask for a checkpoint at the next step boundary; a second
signal acts as usual.

Over several processes every rank must stop after the same step. The flag travels with the step's loss: the
trainer all-reduces [loss, stop flag] in one collective it makes anyway (train/trainer.py), so no step pays a
collective or a host synchronisation for the flag. The flag is sampled before the step's forward pass and
acted on after its update: a signal that arrives during a step stops the run after the next one, at most
one step later than a check after each update would. That fits in Slurm's grace between SIGTERM and
SIGKILL (KillWait, 30 s by default) for the step times here; a run whose steps and checkpoint take longer
needs `--signal=TERM@<seconds>` ahead of its time limit anyway. A single process reads its own flag after
every update.

A too-large train loss, or a train loss or gradient norm still non-finite after a second try on another
attention kernel (train/attention.py), ends the run as diverged, with the diagnostics its summary records.
"""

from __future__ import annotations

import math
import signal
from typing import Any

from ngptlab.train.progress import Progress


class StopRequest:
    def __init__(self) -> None:
        self.signal: int | None = None
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        self.signal = signum
        # A second signal acts as usual (kills), so a stuck run can still be stopped.
        self.restore()

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()


def diagnostics(reason: str, step: int, batch_tokens: int, loss: float, grad_norm: float,
                 progress: Progress) -> dict:
    """What a diverged run's summary says: why, after how many updates, and the last finite val loss."""
    return {"reason": reason, "step": step, "tokens": step * batch_tokens, "loss": _num(loss),
            "grad_norm": _num(grad_norm), "last_finite_val_loss": progress.last_val_loss,
            "last_finite_val_step": progress.last_val_step}


def _num(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


def divergence(loss: float, grad_norm: float, limit: float) -> str | None:
    if not math.isfinite(loss):
        return f"train loss is {loss}"
    if loss > limit:
        return f"train loss {loss:.4g} > train.diverge_loss {limit:g}"
    if not math.isfinite(grad_norm):
        return f"gradient norm is {grad_norm}"
    return None
