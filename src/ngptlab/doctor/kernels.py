"""Which scaled-dot-product-attention kernel torch would pick here for the presets' shapes (and the params
file's): a run's causal call over (1 sequence, heads, context, head dim = d_model / n_head), with the dtype
`train.precision: auto` computes in (bf16 autocast on a GPU, fp32 on a CPU), asked of torch the way a run
records its kernel (ngptlab.train.attention). A CPU has no flash-attention-2, cuDNN or memory-efficient
CUDA kernel: there torch picks between its CPU flash kernel and math.

The shapes are read from the YAML files as written (train.scales, train.shapes, train.contexts), without
validating them: the validation needs jsonschema, which may be what is missing here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from ngptlab.models.scales import SCALES, Scale, shape_from_dict
from ngptlab.train.attention import Attention


@dataclass(frozen=True)
class Case:
    scale: str
    shape: Scale
    context: int
    files: tuple[str, ...]  # the presets (or params file) that train at it


def cases(files: list[Path]) -> list[Case]:
    """Every (scale, context) the files train at, with the files that do; in the files' order."""
    import yaml  # here, not at the top: a missing pyyaml is reported by packages.py, not a crash

    found: dict[tuple[str, int], tuple[Scale, list[str]]] = {}
    for path in files:
        train = (yaml.safe_load(path.read_text()) or {}).get("train") or {}
        shapes = train.get("shapes") or {}
        for name in train.get("scales") or []:
            shape = shape_from_dict(name, shapes[name]) if name in shapes else SCALES.get(name)
            if shape is None:
                continue  # an unknown scale: `ngptlab plan` names it; here there is nothing to ask about
            for context in train.get("contexts") or []:
                found.setdefault((name, int(context)), (shape, []))[1].append(path.stem)
    return [Case(name, shape, context, tuple(where)) for (name, context), (shape, where) in found.items()]


def device_and_dtype() -> tuple[torch.device, torch.dtype]:
    """Where a run computes with train.device auto, in the dtype train.precision auto gives it."""
    if torch.cuda.is_available():
        return torch.device("cuda", 0), torch.bfloat16
    return torch.device("cpu"), torch.float32


def chosen(case: Case, device: torch.device, dtype: torch.dtype) -> str:
    """The kernel's name (flash, efficient, cudnn, math), or why none can run the call."""
    shape = case.shape
    attention = Attention(device, (1, shape.n_head, case.context, shape.head_dim), dtype)
    try:
        return attention.chosen() or "none (no enabled kernel runs this call)"
    finally:
        attention.close()


def describe(case: Case, kernel: str) -> str:
    shape = case.shape
    return (f"{case.scale} at {case.context} tokens ({shape.n_head} heads of {shape.head_dim}): {kernel} "
            f"[{', '.join(case.files)}]")
