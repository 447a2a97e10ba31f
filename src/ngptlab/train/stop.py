"""When a training job stops early: a signal asks for a checkpoint, or the run diverges.

SIGTERM (Slurm preemption or time limit) and SIGINT ask for a checkpoint at the next step boundary. A
repeated SIGTERM is ignored until the run exits: Slurm signals every process of a job step at once and
torchrun's agent forwards its own SIGTERM to its workers a moment later, so each worker sees two, and the
second must not kill it mid-checkpoint (Slurm's SIGKILL after KillWait still ends a stuck run). A second
SIGINT (Ctrl-C pressed again) kills as usual.

Over several processes every rank must stop after the same step. The flag travels with the step's loss: the
trainer all-reduces [loss, stop flag] in one collective it makes anyway (train/trainer.py), so no step pays a
collective or a host synchronisation for the flag. The flag is sampled before the step's forward pass and
acted on after its update: a signal that arrives during a step stops the run after the next one, at most
one step later than a check after each update would. That fits in Slurm's grace between SIGTERM and
SIGKILL (KillWait, 30 s by default) for the step times here; a run whose steps and checkpoint take longer
needs `--signal=TERM@<seconds>` ahead of its time limit anyway. A single process reads its own flag after
every update.

A too-large train loss, or a train loss or gradient norm still non-finite after a second try on another
attention kernel (train/attention.py), ends the run as diverged, with the diagnostics its summary records,
the matrix kinds whose gradients blew up among them.
"""

from __future__ import annotations

import math
import signal
from typing import Any

import torch
from torch import nn

from ngptlab.train.progress import Progress


class StopRequest:
    def __init__(self) -> None:
        self.signal: int | None = None
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signal is None:
            self.signal = signum
        # A second Ctrl-C kills, so a stuck run can still be stopped by hand; SIGTERM stays caught.
        if signal.SIGINT in self._previous:
            signal.signal(signal.SIGINT, self._previous.pop(signal.SIGINT))

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()


def diagnostics(reason: str, step: int, batch_tokens: int, loss: float, grad_norm: float,
                 progress: Progress, model: nn.Module | None = None) -> dict:
    """What a diverged run's summary says: why, after how many updates, the last finite val loss, and with
    the model, which matrix kinds blew up (blown_up)."""
    out = {"reason": reason, "step": step, "tokens": step * batch_tokens, "loss": _num(loss),
           "grad_norm": _num(grad_norm), "last_finite_val_loss": progress.last_val_loss,
           "last_finite_val_step": progress.last_val_step}
    return out | (blown_up(model) if model is not None else {})


@torch.no_grad()
def blown_up(model: nn.Module) -> dict:
    """{grad_norm_by_kind, blew_up}: per matrix kind the largest gradient norm of its matrices at the step
    that diverged, and the kinds that blew up: those whose gradient is not finite, or, where every one is,
    those within a factor 2 of the largest (an angle arm that cannot take its matched angle says here
    which matrices could not)."""
    by_kind: dict[str, list[float]] = {}
    for info in model.matrices():
        grad = model.get_submodule(info.name).weight.grad
        if grad is not None:
            by_kind.setdefault(info.kind, []).append(float(torch.linalg.vector_norm(grad.float())))
    # a kind's largest, or its non-finite one (max() would pass a NaN by)
    norms = {kind: next((n for n in values if not math.isfinite(n)), max(values))
             for kind, values in by_kind.items()}
    if not norms:
        return {}
    bad = [kind for kind, norm in norms.items() if not math.isfinite(norm)]
    largest = max(norms.values()) if not bad else None
    blew = bad or [kind for kind, norm in norms.items() if norm >= largest / 2]
    return {"grad_norm_by_kind": {kind: _num(norm) for kind, norm in norms.items()}, "blew_up": blew}


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
