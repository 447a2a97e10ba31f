"""How an arm's parameters are split among optimizer groups and the steppers that update them, once for every
arm that takes some parameters out of gpt's AdamW groups (gpt-lrm's multipliers, the rotational matrices,
gpt-muon's hidden matrices)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import torch


def moved_to(groups: list[dict], new_groups: list[dict]) -> list[dict]:
    """`groups` without the parameters of `new_groups`, then `new_groups`; a group left empty is dropped."""
    moved = {id(p) for group in new_groups for p in group["params"]}
    for group in groups:
        group["params"] = [p for p in group["params"] if id(p) not in moved]
    return [group for group in [*groups, *new_groups] if group["params"]]


@contextlib.contextmanager
def gradients_held(params: Iterable[torch.Tensor]) -> Iterator[None]:
    """Within: these parameters have no gradient, so a torch optimizer stepping every group skips them (they
    are another stepper's); after: their gradients back."""
    held = [(p, p.grad) for p in params]
    for p, _ in held:
        p.grad = None
    try:
        yield
    finally:
        for p, grad in held:
            p.grad = grad
