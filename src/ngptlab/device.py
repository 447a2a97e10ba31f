"""The device a params setting asks for (train.device, condition.device, evaluate.device, bench --device)."""

from __future__ import annotations

import torch

from ngptlab.errors import ParamsError


def resolve_device(setting: str, key: str = "device", local_rank: int = 0) -> torch.device:
    """auto (cuda if torch sees one, else cpu), cpu, or cuda: an error naming `key` when there is no GPU."""
    if setting == "cuda" or (setting == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise ParamsError(f"{key} is 'cuda' but torch sees no CUDA device")
        return torch.device("cuda", local_rank)
    return torch.device("cpu")
