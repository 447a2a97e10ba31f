"""Where a model's initialisation does its heavy linear algebra (gpt-orth's QR of every block matrix): on the
device the run trains on, set for the duration of a build (registry.build's `init_device`). The random draws
stay where they were, on the weights' own generator, so a seed gives the same Gaussian matrices wherever the
factorisation runs; on a CPU the bytes are those of a build without it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch

_DEVICE: ContextVar[torch.device | None] = ContextVar("ngptlab_init_device", default=None)


@contextmanager
def init_on(device: torch.device | str | None) -> Iterator[None]:
    """Within the block, initialisation factorises on `device` (None: on each weight's own device)."""
    token = _DEVICE.set(None if device is None else torch.device(device))
    try:
        yield
    finally:
        _DEVICE.reset(token)


def device_for(weight: torch.Tensor) -> torch.device:
    """The device to factorise `weight`'s initial matrix on."""
    return _DEVICE.get() or weight.device
