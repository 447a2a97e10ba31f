"""A step's gradients, computed a second time on another attention kernel if the first were not finite.

The loop reads the step's loss and gradient norm before optimizer.step (its one host read per step), so a
non-finite step has changed nothing but the gradients: the weights, AdamW's moments and step counts, the
RNG and the staged batch are those the step started from. Why and how: train/attention.py.
"""

from __future__ import annotations

import math

import torch

OUTCOMES = ("recovered", "non-finite again", "no other backend")


def finite(loss: float, grad_norm: float) -> bool:
    return math.isfinite(loss) and math.isfinite(grad_norm)


def forward_backward(trainer, step: int, retries: list[dict], stop_requested: bool
                     ) -> tuple[float, float, bool, bool]:
    """(loss, grad norm, a stop asked on some rank, computed twice). A non-finite first try appends
    {step, tokens, backend_before, backend_after, outcome} to `retries` (step: its metrics row's number)."""
    loss, grad_norm, stop = trainer.forward_backward(step, stop_requested)
    if finite(loss, grad_norm):
        return loss, grad_norm, stop, False
    attention = trainer.attention
    before = attention.chosen()
    left, after = attention.alternative(before)
    entry = {"step": step + 1, "tokens": (step + 1) * trainer.plan.batch_tokens, "backend_before": before,
             "backend_after": after, "loss": str(loss), "grad_norm": str(grad_norm)}
    if after is None or after == before:
        retries.append({**entry, "backend_after": None, "outcome": "no other backend"})
        return loss, grad_norm, stop, False
    trainer.optimizer.zero_grad(set_to_none=True)  # the first try's gradients; nothing else was touched
    with attention.only(left):
        loss, grad_norm, again = trainer.forward_backward(step, stop_requested)
    recovered = finite(loss, grad_norm)
    if recovered:  # the rest of the job without the suspect kernel; compiled code recompiles without it
        attention.disable(before)
        if trainer.compiled:
            torch._dynamo.reset()
    retries.append({**entry, "outcome": "recovered" if recovered else "non-finite again",
                    "loss_after": loss if recovered else str(loss),
                    "grad_norm_after": grad_norm if recovered else str(grad_norm)})
    return loss, grad_norm, stop or again, True
