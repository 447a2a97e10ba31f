"""`bench gpu`'s parts, in the order a call runs them (most important first, so a call cut short keeps what
matters most), and its own estimate of each part's seconds on one H100.

The estimate is a count, not a measurement:

    seconds = cold graphs x COMPILE_COLD_S + warm graphs x COMPILE_WARM_S
            + bf16 FLOPs / (H100_BF16_PEAK x ASSUMED_MFU) + fp32 FLOPs / (H100_FP32_PEAK x ASSUMED_MFU)
            + runs x RUN_START_S + parameters built x BUILD_S_PER_PARAM
            + parameters built on the device x DEVICE_BUILD_S_PER_PARAM + fixed seconds (condition)

A graph is one torch.compile'd model (its forward and backward); it is cold the first time its arm, shape
and options compile in the call and warm when the same graph compiles again (Inductor's on-disk caches
hold its kernels: a resumed run, the DDP of one). FLOPs are train_flops_per_token (models/size.py, the
MFU's numerator) times the tokens each step carries.
"""

from __future__ import annotations

from dataclasses import dataclass

# the bf16 dense peak of an H100 SXM (train/throughput.py's table), the denominator of every MFU here
H100_BF16_PEAK = 989.4e12
# fp32 without tensor cores (H100 SXM datasheet, 67 TFLOP/s): the fp32 runs keep torch's "highest" matmul
# precision, so no TF32
H100_FP32_PEAK = 67e12
ASSUMED_MFU = 0.30  # below the 35% floor the compiled step must reach: short runs, small shapes, eager arms
# An assumption, not a GPU measurement: the CPU rehearsal measured 32 s for a cold compile of the 2-layer
# gpt on a loaded 2-core machine; a GPU host's 16 cores compile Inductor's kernels in parallel workers.
# The compile_s that the first GPU call records (steps rows, runs) is what to replace it with.
COMPILE_COLD_S = 40.0
COMPILE_WARM_S = 10.0  # the same graph again: tracing and AOT autograd, the kernels from Inductor's cache
RUN_START_S = 5.0  # a training run's own start-up and end: params, data, checkpoint and summary writes
BUILD_S_PER_PARAM = 4e-9  # a model built on the CPU and moved to the GPU: ~4 s per billion parameters
# a model built on the GPU itself (the memory part: its values do not matter): module construction and
# device-side init, no host work or copy; an assumption like the others, ~0.5 s per billion parameters
DEVICE_BUILD_S_PER_PARAM = 5e-10
CONDITION_S = 60.0  # condition's analysis of a 1B checkpoint (its threshold allows 600)
H100_BUDGET_S = 480.0  # what the default parts must fit by this estimate: 8 of a call's 10 minutes

# (a) steps, (b) first-light, (c) memory, (d) bf16, (e) angles, then path, ddp, condition
PARTS = ("steps", "first-light", "memory", "bf16", "angles", "path", "ddp", "condition")
DEFAULT_PARTS = PARTS[:5]  # the rest by name: `--parts path,ddp,condition` (a second call)
NEEDS = {"path": "first-light", "ddp": "first-light"}  # compared against first-light's gpt run


def parse_parts(text: str) -> tuple[str, ...]:
    """`steps,memory` -> the named parts in PARTS' order; an unknown name is an error naming the known."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in PARTS]
    if unknown or not names:
        raise ValueError(f"unknown part {', '.join(unknown) or '(none)'}; parts: {', '.join(PARTS)}")
    return tuple(p for p in PARTS if p in names)


@dataclass
class Work:
    """What a part does, counted for the estimate."""

    cold_graphs: int = 0
    warm_graphs: int = 0
    bf16_flops: float = 0.0
    fp32_flops: float = 0.0
    runs: int = 0
    built_params: float = 0.0
    device_built_params: float = 0.0  # built on the device (DEVICE_BUILD_S_PER_PARAM)
    fixed_s: float = 0.0

    def seconds(self) -> float:
        return (self.cold_graphs * COMPILE_COLD_S + self.warm_graphs * COMPILE_WARM_S
                + self.bf16_flops / (H100_BF16_PEAK * ASSUMED_MFU)
                + self.fp32_flops / (H100_FP32_PEAK * ASSUMED_MFU)
                + self.runs * RUN_START_S + self.built_params * BUILD_S_PER_PARAM
                + self.device_built_params * DEVICE_BUILD_S_PER_PARAM + self.fixed_s)

    def as_dict(self) -> dict:
        return {"estimate_s": self.seconds(), "cold_graphs": self.cold_graphs,
                "warm_graphs": self.warm_graphs, "bf16_tflop": self.bf16_flops / 1e12,
                "fp32_tflop": self.fp32_flops / 1e12, "runs": self.runs,
                "built_params": self.built_params, "device_built_params": self.device_built_params,
                "fixed_s": self.fixed_s}


def constants() -> dict:
    """The estimate's assumptions, stored beside it in the JSON."""
    return {"device": "one H100 SXM", "bf16_peak_tflops": H100_BF16_PEAK / 1e12,
            "fp32_peak_tflops": H100_FP32_PEAK / 1e12, "assumed_mfu": ASSUMED_MFU,
            "compile_cold_s": COMPILE_COLD_S, "compile_warm_s": COMPILE_WARM_S, "run_start_s": RUN_START_S,
            "build_s_per_billion_params": BUILD_S_PER_PARAM * 1e9,
            "device_build_s_per_billion_params": DEVICE_BUILD_S_PER_PARAM * 1e9, "condition_s": CONDITION_S,
            "note": "an estimate by count (bench/gpu_parts.py), not a measurement"}
