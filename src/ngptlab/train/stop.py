"""When a training job stops early: a signal asks for a checkpoint, or the run diverges.

SIGTERM (Slurm preemption or time limit) and SIGINT ask for a checkpoint at the next step boundary; a second
signal acts as usual. A non-finite or too-large train loss, or a non-finite gradient norm, ends the run as
diverged, with the diagnostics its summary records.
"""

from __future__ import annotations

import math
import signal
from typing import Any


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
                 info: dict) -> dict:
    """What a diverged run's summary says: why, after how many updates, and the last finite val loss."""
    return {"reason": reason, "step": step, "tokens": step * batch_tokens, "loss": _num(loss),
            "grad_norm": _num(grad_norm), "last_finite_val_loss": info["last_val_loss"],
            "last_finite_val_step": info["last_val_step"]}


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
