"""This machine as ngptlab sees it: torch's version and build, Python, the GPUs torch sees, and the peak
dense bf16 FLOP/s that a run's MFU will divide by (ngptlab.train.throughput's table, the runs' own)."""

from __future__ import annotations

import platform
import sys

import torch

from ngptlab.train.throughput import peak_of


def torch_build() -> str:
    """'CUDA 13.0, cuDNN 91300', 'ROCm 6.4' or 'cpu': what this torch was built for."""
    if torch.version.cuda:
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        return f"CUDA {torch.version.cuda}" + (f", cuDNN {cudnn}" if cudnn else "")
    if getattr(torch.version, "hip", None):
        return f"ROCm {torch.version.hip}"
    return "cpu"


def python_line() -> str:
    return f"{platform.python_version()} ({sys.executable})"


def gpus() -> list[str]:
    """One description per GPU torch sees: 'NVIDIA H100 80GB HBM3, 79.2 GiB, compute capability 9.0'."""
    if not torch.cuda.is_available():
        return []
    found = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        found.append(f"{props.name}, {props.total_memory / 2**30:.1f} GiB, compute capability "
                     f"{props.major}.{props.minor}")
    return found


def peak_line() -> str:
    """The peak of the first GPU (every process of a run has one of the same model), or why there is none."""
    if torch.cuda.is_available():
        peak = peak_of(torch.cuda.get_device_name(0), is_gpu=True)
    else:
        peak = peak_of("cpu", is_gpu=False)
    if peak.flops is None:
        return f"none: {peak.source}"
    return f"{peak.flops / 1e12:g} TFLOP/s dense bf16, {peak.source}"
