"""Model FLOPs utilisation: achieved training FLOP/s over the accelerator's dense bf16 peak.

The peak comes from, in order: a declared value (params `train.peak_tflops`, or a bench's --peak-tflops),
else the GPU's name looked up in the table below, else nothing: an unknown device, or a CPU without a
declared peak, gets no MFU (null) rather than a wrong one.

Peaks are the vendors' dense (no 2:4 sparsity) bf16 tensor-core numbers for the SXM parts: H100/H200 SXM
989.4 TFLOP/s (NVIDIA H100 and H200 datasheets list 1,979 with sparsity), A100 312 (A100 datasheet),
B200 2,250 (HGX B200 at 1,000 W), L40S 362.05, A10G 70.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class Peak:
    """One device's peak FLOP/s (None: unknown) and where the number came from."""

    flops: float | None
    source: str  # "declared", "detected (<device name>)" or "unknown (<device name>)"
    device_name: str

    def as_dict(self) -> dict:
        return {"peak_tflops": None if self.flops is None else self.flops / 1e12, "peak_source": self.source,
                "device_name": self.device_name}


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return device.type


def detect_peak(device: torch.device, declared_tflops: float | None = None) -> Peak:
    """The peak to divide by: the declared one if given, else the table's entry for this GPU."""
    name = device_name(device)
    if declared_tflops is not None:
        return Peak(float(declared_tflops) * 1e12, "declared", name)
    if device.type == "cuda":
        for key, flops in sorted(_PEAK_BF16_FLOPS.items(), key=lambda kv: -len(kv[0])):  # GH200 before H200
            if key in name:
                return Peak(flops, f"detected ({name})", name)
    return Peak(None, f"unknown ({name}); declare train.peak_tflops for an MFU", name)


def peak_flops(device: torch.device, declared_tflops: float | None = None) -> float | None:
    return detect_peak(device, declared_tflops).flops


def mfu(flops_per_token: float, tokens_per_s: float, device: torch.device, world_size: int = 1,
        declared_tflops: float | None = None) -> float | None:
    """Fraction of the peak of all `world_size` devices that the measured throughput uses."""
    peak = peak_flops(device, declared_tflops)
    return mfu_of(flops_per_token, tokens_per_s, peak, world_size)


def mfu_of(flops_per_token: float, tokens_per_s: float, peak: float | None,
           world_size: int = 1) -> float | None:
    """MFU = flops_per_token x tokens/s / (peak x devices); None without a peak."""
    return None if peak is None else flops_per_token * tokens_per_s / (peak * world_size)
