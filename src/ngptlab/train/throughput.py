"""Model FLOPs utilisation: achieved training FLOP/s over the accelerator's dense bf16 peak.

The peak comes from, in order: a declared value (params `train.peak_tflops`, or a bench's --peak-tflops),
else the exact GPU model read from its name (torch.cuda.get_device_name) in the table below, else nothing:
an unknown device, a GPU model or form factor the table does not list (an H100 whose name does not say SXM,
PCIe or NVL; a MIG slice), or a CPU without a declared peak, gets no MFU (null) and a note, never a wrong one.

A name is matched whole, after normalising it (case, the "NVIDIA " prefix, '-' and '_' as spaces): one
pattern per model and form factor, since one chip family spans peaks 30% apart (H100 SXM 989, NVL 835, PCIe
756). Peaks are the vendors' dense (no 2:4 sparsity: half the datasheets' starred numbers) bf16 tensor-core
TFLOP/s: H100 and H200 datasheets 1,979 (SXM), 1,671 (NVL), H100 PCIe 1,513; GH200 1,979; A100 312 (every
form factor and memory size); B200 2,250 (HGX B200 at 1,000 W); L40S 362.05; L4 121; A10G 70.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

# The FLOP count MFU divides by the peak, in words, for the timing record (ngptlab.models.size).
MFU_NOTE = ("MFU = flops_per_token x tokens/s / (dense bf16 peak x devices). The FLOP count includes the "
            "full T x T attention square: flops_per_token is 6 N + 12 L d T (PaLM, Appendix B), attention "
            "over every query-key pair though a causal kernel computes about half of them; norms, RoPE and "
            "softmax are not counted")

# (pattern a normalised device name must match whole, model and form factor, dense bf16 FLOP/s)
_GPU_MODELS: tuple[tuple[str, str, float], ...] = (
    (r"H100 80GB HBM3|H100 SXM5?( \d+GB)?( HBM3)?", "H100 SXM", 989.4e12),
    (r"H100 NVL", "H100 NVL", 835.5e12),
    (r"H100 PCIE( \d+GB)?", "H100 PCIe", 756.5e12),
    (r"H200( SXM5?)?( 141GB)?( HBM3E)?", "H200 SXM", 989.4e12),
    (r"H200 NVL", "H200 NVL", 835.5e12),
    (r"GH200( \d+GB?)?( HBM3E?)?", "GH200", 989.4e12),
    (r"A100 SXM4? (40|80)GB", "A100 SXM", 312e12),
    (r"A100 PCIE (40|80)GB|A100 (40|80)GB PCIE", "A100 PCIe", 312e12),
    (r"B200", "B200", 2250e12),
    (r"L40S", "L40S", 362.05e12),
    (r"L4", "L4", 121e12),
    (r"A10G", "A10G", 70e12),
)


def normalise_name(name: str) -> str:
    """'NVIDIA A100-SXM4-80GB' -> 'A100 SXM4 80GB': upper case, no vendor prefix, one space between words."""
    words = re.sub(r"[-_\s]+", " ", name.upper()).split()
    return " ".join(words[1:] if words[:1] == ["NVIDIA"] else words)


def gpu_model(name: str) -> tuple[str, float] | None:
    """(model and form factor, dense bf16 FLOP/s) of a torch.cuda.get_device_name() string; None: unlisted."""
    normal = normalise_name(name)
    for pattern, model, flops in _GPU_MODELS:
        if re.fullmatch(pattern, normal):
            return model, flops
    return None


@dataclass(frozen=True)
class Peak:
    """One device's peak FLOP/s (None: unknown) and where the number came from."""

    flops: float | None
    source: str  # "declared", "detected (<model>: <device name>)" or "unknown (<device name>)..."
    device_name: str

    def as_dict(self) -> dict:
        return {"peak_tflops": None if self.flops is None else self.flops / 1e12, "peak_source": self.source,
                "device_name": self.device_name}


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return device.type


def peak_of(name: str, is_gpu: bool, declared_tflops: float | None = None) -> Peak:
    """The peak for a device of this name: the declared one if given, else the table's entry."""
    if declared_tflops is not None:
        return Peak(float(declared_tflops) * 1e12, "declared", name)
    found = gpu_model(name) if is_gpu else None
    if found:
        return Peak(found[1], f"detected ({found[0]}: {name})", name)
    why = "; not an exact GPU model of ngptlab.train.throughput's table" if is_gpu else ""
    return Peak(None, f"unknown ({name}){why}; declare train.peak_tflops for an MFU", name)


def detect_peak(device: torch.device, declared_tflops: float | None = None) -> Peak:
    """The peak to divide by: the declared one if given, else the table's entry for this GPU."""
    return peak_of(device_name(device), device.type == "cuda", declared_tflops)


def peak_flops(device: torch.device, declared_tflops: float | None = None) -> float | None:
    return detect_peak(device, declared_tflops).flops


def mfu(flops_per_token: float, tokens_per_s: float, device: torch.device, world_size: int = 1,
        declared_tflops: float | None = None) -> float | None:
    """Fraction of the peak of all `world_size` devices that the measured throughput uses."""
    peak = peak_flops(device, declared_tflops)
    return mfu_of(flops_per_token, tokens_per_s, peak, world_size)


def mfu_of(flops_per_token: float, tokens_per_s: float | None, peak: float | None,
           world_size: int = 1) -> float | None:
    """MFU = flops_per_token x tokens/s / (peak x devices); None without a peak or a throughput."""
    if peak is None or tokens_per_s is None:
        return None
    return flops_per_token * tokens_per_s / (peak * world_size)
