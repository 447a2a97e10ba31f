"""Model FLOPs utilisation: achieved training FLOP/s over the accelerator's dense bf16 peak.

Peaks are the vendors' dense (no sparsity) bf16 tensor-core numbers for the SXM parts; an unknown device
gets no MFU rather than a wrong one.
"""

from __future__ import annotations

import torch

_PEAK_BF16_FLOPS = {  # substring of torch.cuda.get_device_name() -> FLOP/s
    "H200": 989.4e12,
    "H100": 989.4e12,
    "GH200": 989.4e12,
    "B200": 2250e12,
    "A100": 312e12,
    "L40S": 362.05e12,
    "A10G": 70e12,
}


def peak_flops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    for key, flops in sorted(_PEAK_BF16_FLOPS.items(), key=lambda kv: -len(kv[0])):  # GH200 before H200
        if key in name:
            return flops
    return None


def mfu(
    flops_per_token: float, tokens_per_s: float, device: torch.device, world_size: int = 1
) -> float | None:
    """Fraction of the peak of all `world_size` devices that the measured throughput uses."""
    peak = peak_flops(device)
    return None if peak is None else flops_per_token * tokens_per_s / (peak * world_size)
