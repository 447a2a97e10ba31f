"""The dtype a run stores its weights and AdamW state in: train.weight_dtype, fp32 or bf16, or both.

fp32 (the default): fp32 master weights and AdamW moments; on a GPU the forward and backward run under bf16
autocast (train.precision). bf16: the weights AND the optimizer state stored in bf16, as the paper's
reference code trains (model.to(torch.bfloat16), AdamW's moments created like the parameters). Its README
warns that this storage inflates the speed-ups, since it hurts the GPT baseline more than nGPT; so the grid
can train both and compare each dtype's arms among themselves.

A list of both is a grid axis: every run exists once per dtype. A bf16 run belongs to a cell of its own,
`<scale>-ctx<context>-bf16`, so that every per-cell stage (speedup, evaluate, the report's tables) compares
bf16 arms with the bf16 baseline and never mixes the dtypes; its run name starts with that cell like any
run's. fp32 runs keep their cells, names, records and lineage keys: nothing of theirs says fp32.

This module is the one that tells the dtypes apart by name; the rest of the code asks it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ngptlab.settings import Train

if TYPE_CHECKING:
    import torch

FP32, BF16 = "fp32", "bf16"
DTYPES = (FP32, BF16)
BYTES = {FP32: 4, BF16: 2}  # per stored value: a weight, its gradient, each AdamW moment


def of(train: Train) -> list[str]:
    """train.weight_dtype as a list: one dtype, or the grid's axis in its given order."""
    value = train.weight_dtype
    return [value] if isinstance(value, str) else list(value)


def name_suffix(dtype: str) -> str:
    """What a cell's name (and so its runs' and trunks') adds for the dtype: nothing for fp32, so names
    from before bf16 runs existed stay valid."""
    return "" if dtype == FP32 else f"-{dtype}"


def from_suffix(suffix: str | None) -> str:
    """The dtype of a cell whose name ends in `suffix` ("-bf16", or nothing for fp32)."""
    return BF16 if suffix == f"-{BF16}" else FP32


def spec_record(dtype: str) -> dict:
    """What a run's record (its spec: summary, checkpoint config, fingerprint) adds for its dtype: an fp32
    run's carries none, so its records and fingerprint stay those of before."""
    return {} if dtype == FP32 else {"weight_dtype": dtype}


def of_record(spec: dict) -> str:
    """The dtype a run's recorded spec names (none: fp32)."""
    return spec.get("weight_dtype", FP32)


def lineage_group(schedule: str, dtype: str) -> str:
    """The per-run lineage key a run shares with every run of its schedule and dtype: "cosine", "wsd",
    "cosine-bf16", "wsd-bf16" (ngptlab.plan.lineage)."""
    return f"{schedule}{name_suffix(dtype)}"


def describe(train: Train) -> str:
    """The report's words for the grid's dtypes."""
    words = {FP32: "fp32 (master weights; bf16 autocast on a GPU)",
             BF16: "bf16 (weights and AdamW state, as the paper's reference code; cells -bf16)"}
    return " and ".join(words[dtype] for dtype in of(train))


def torch_dtype(dtype: str) -> torch.dtype:
    import torch  # here: sizing a grid never loads torch

    return {FP32: torch.float32, BF16: torch.bfloat16}[dtype]


def store(model: torch.nn.Module, dtype: str) -> None:
    """Store the model's parameters in `dtype`, in place. Parameters only: the rotary tables (buffers,
    never checkpointed) keep their fp32 angles."""
    import torch

    wanted = torch_dtype(dtype)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dtype != wanted:
                parameter.data = parameter.data.to(wanted)
