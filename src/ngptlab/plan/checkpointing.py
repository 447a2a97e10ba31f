"""Which runs train with activation checkpointing: train.activation_checkpointing true, false, or `auto`,
where a run checkpoints exactly when plan's memory estimate of it without checkpointing does not fit the
memory it trains on. One decision, read by `plan` (its estimate, printout and warning) and by the trainer,
so the run does what its plan printed.

The memory a run trains on is plan's: one GPU's (GPU_MEMORY_GB, an H100's 80 GB; the trainer cannot know
plan's --gpu-memory-gb, so `auto` decides against the default on every GPU scale) or, on a CPU scale, one
process's share of the scale's mem_mb. A run fits when its estimate with ESTIMATE_MARGIN on top stays within
it: plan/memory.py's estimate came out 5-15% under measured peaks.

Torch-free, and importing no more of plan than plan/memory.py, so the trainer reads it without the planner.
"""

from __future__ import annotations

from dataclasses import dataclass

from ngptlab import weight_dtype as weight_dtypes
from ngptlab.grid.resources import run_shape, scale_layout
from ngptlab.models.scales import Scale
from ngptlab.models.size import padded_vocab, parameter_count
from ngptlab.plan.memory import GPU_MEMORY_GB, Memory, fitting_micro_tokens, micro_tokens, training_memory
from ngptlab.settings import Train
from ngptlab.vocabulary import VOCAB_SIZE  # GPT-2 BPE (r50k_base), what `prepare` writes

ESTIMATE_MARGIN = 1.15  # the estimate's measured shortfall at most (plan/memory.py): what a fit keeps free
AUTO = "auto"


@dataclass(frozen=True)
class RunMemory:
    """What one process of a run of (arm, scale, context, weight dtype) holds, as plan sizes it, and the
    memory it has."""

    arm: str
    shape: Scale
    n_params: int
    vocab_rows: int
    context: int
    tokens: int  # of one micro-batch in one process
    bf16: bool
    weight_bytes: int
    limit_gb: float  # GiB of one GPU, or one process's share of mem_mb
    on_gpu: bool

    def peak(self, checkpointing: bool) -> Memory:
        return training_memory(self.arm, self.shape, self.n_params, self.vocab_rows, self.tokens, self.bf16,
                               checkpointing, self.weight_bytes)

    def fits(self, checkpointing: bool) -> bool:
        return self.peak(checkpointing).total / 2**30 * ESTIMATE_MARGIN <= self.limit_gb

    def fitting_micro_tokens(self, checkpointing: bool) -> int:
        """The largest micro-batch, whole sequences, that fits with the margin; 0 where none does."""
        return fitting_micro_tokens(self.arm, self.shape, self.n_params, self.vocab_rows, self.context,
                                    self.bf16, self.limit_gb * 2**30 / ESTIMATE_MARGIN, checkpointing,
                                    self.weight_bytes)


def run_memory(train: Train, arm: str, scale: str, context: int, weight_dtype: str,
               gpu_memory_gb: float = GPU_MEMORY_GB) -> RunMemory:
    """The memory of one process of a run, or of a trunk of the same (arm, scale, context, weight dtype)."""
    shape = run_shape(train, scale)
    vocab_rows = padded_vocab(VOCAB_SIZE, train.vocab_multiple)
    layout = scale_layout(train, scale)
    on_gpu = layout.gpus_per_node > 0
    # bf16 weights compute under bf16 autocast on either device (train/trainer.py)
    bf16 = (train.precision == "bf16" or (on_gpu and train.precision == "auto")
            or weight_dtype == weight_dtypes.BF16)
    limit = gpu_memory_gb if on_gpu else train.resources[scale].mem_mb / 1024 / layout.processes_per_node
    return RunMemory(arm, shape, parameter_count(arm, shape, vocab_rows), vocab_rows, context,
                     micro_tokens(train, context, layout.world_size), bf16, weight_dtypes.BYTES[weight_dtype],
                     limit, on_gpu)


def checkpoints(train: Train, memory: RunMemory) -> bool:
    """Whether the run of `memory` trains with activation checkpointing (train.activation_checkpointing)."""
    setting = train.activation_checkpointing
    if setting == AUTO:
        return not memory.fits(checkpointing=False)
    return bool(setting)


def run_checkpoints(train: Train, arm: str, scale: str, context: int, weight_dtype: str) -> bool:
    """The trainer's reading of train.activation_checkpointing for a run or trunk: `auto` decided as plan
    decides it, against the default GPU memory."""
    if train.activation_checkpointing != AUTO:
        return bool(train.activation_checkpointing)  # no sizing where nothing is decided
    return checkpoints(train, run_memory(train, arm, scale, context, weight_dtype))
