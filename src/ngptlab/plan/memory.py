"""Peak memory of one training process, in closed form from the shape (torch-free, like the rest of plan).

    peak = 16 N                      fp32 weights (4 N), gradients (4 N), AdamW's two moments (8 N);
                                     bf16 autocast casts on the fly and keeps the fp32 master weights;
                                     8 N where train.weight_dtype stores all four in bf16 (2 bytes each),
                                     + 4 N_rot, the float32 master copy of an angle arm's N_rot rotational
                                     parameters (models/rotational.py), which bf16 would round the turns of
         + 4 N                       the previous evaluation point's effective matrices, float32, for the
                                     angular update rate (observe/angular.py; on rank 0, counted for all)
         + 2 N                       under bf16 autocast with fp32 weights: the bf16 copy of each matrix
                                     that autocast makes once per forward pass and the backward pass reads
         + tokens x L x S            the tensors each block saves for backward, for one micro-batch
         + tokens x V x h            the LM head: logits, their log-softmax and its gradient
         + L x P                     a PC arm's layer (models/gpt_pc.py): what it saves for backward to form
                                     each block's W_eff in float32, whatever the tokens (its iterates and
                                     Grams, by its level: models/pc_level.py; under checkpointing one
                                     block's, recomputed with its activations); 0 for every other arm

A step whose angle is measured (observe/step_angle.py) copies the matrices (4 N more) around the optimizer
step, once the backward pass has freed the activations and the LM head's tensors; those outweigh the copy
wherever the peak matters (1B, 8k tokens per pass, activation checkpointing: ~9.7 GB against 4.4 GB), so
the peak stays where the formula puts it.

S, the bytes one block saves per token, is measured per arm, not counted: its row's `saved_bytes` in
models/arms.yaml, a d_model + b d_mlp under bf16 autocast and in fp32, which models/saved_tensors.py measures
with torch's saved-tensor hooks (tests/test_memory.py measures it again, within 10%, for every arm). Under
bf16, per d at 4 d of MLP: gpt 66, gpt-rownorm and gpt-orth 58 (their frozen gains save no normalised
input), gpt-qknorm 82, gpt-scalar and gpt-angle 92, gpt-lrm 142 (x c and the fp32 product times r around
every matrix), the nGPT arms 90. It assumes an attention kernel that keeps no T x T scores: torch's CPU
kernel (the measurement) and the flash and memory-efficient kernels a GPU trains with; the math kernel,
which keeps B x H x T x T, is not counted.
h is 16 bytes per vocabulary entry in fp32 (the logits, which the caller holds, their log-softmax saved by
the cross-entropy, and in the backward pass the gradients of both), 18 under bf16 (plus the bf16 logits
before their fp32 copy).
With activation checkpointing a block keeps only its input (d fp32) and recomputes the rest during the
backward pass, when one block's activations exist at a time: tokens x (L x 4 d + S).

Measured against real CPU training steps (fp32, 50k vocabulary, 512-2048 tokens, cpu-4l and cpu-8l): the
estimate is 5-15% under the measured peak resident set; tests/test_memory.py holds it within a factor of 2.
A run that does not fit is given the largest micro-batch that does (memory is linear in its tokens):
`fitting_micro_tokens`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ngptlab.models import arms, pc_level
from ngptlab.models.scales import Scale
from ngptlab.models.size import rotational_parameters
from ngptlab.settings import Train

GPU_MEMORY_GB = 80.0  # default per-GPU memory: an H100 SXM's 80 GB (an H200 has 141, an A100 40 or 80)


@dataclass(frozen=True)
class Memory:
    weights_optimizer: float  # bytes: weights, gradients, AdamW state
    activations: float  # bytes: the blocks' saved tensors for one micro-batch
    head: float  # bytes: logits, log-softmax and gradient for one micro-batch
    observation: float = 0.0  # bytes: the previous evaluation point's matrices (angular update rate)
    casts: float = 0.0  # bytes: autocast's bf16 copies of the fp32 matrices
    pc_layer: float = 0.0  # bytes: a PC arm's saved float32 iterates of its effective matrices

    @property
    def total(self) -> float:
        return (self.weights_optimizer + self.activations + self.head + self.observation + self.casts
                + self.pc_layer)


def training_memory(arm: str, shape: Scale, n_params: int, vocab_rows: int, micro_tokens: int, bf16: bool,
                    checkpointing: bool = False, weight_bytes: int = 4) -> Memory:
    """The peak bytes of one process training `arm` at `shape` on micro-batches of `micro_tokens`, its
    weights, gradients and AdamW moments stored at `weight_bytes` each (ngptlab.weight_dtype.BYTES), the
    rotational matrices' float32 master copies with them below 4."""
    per_token = activation_bytes_per_token(arm, shape, bf16, checkpointing)
    head = micro_tokens * vocab_rows * (18 if bf16 else 16)
    masters = 4.0 * rotational_parameters(arm, shape, vocab_rows) if weight_bytes < 4 else 0.0
    casts = 2.0 * n_params if bf16 and weight_bytes > 2 else 0.0  # bf16 weights are used as they are
    pc = (1 if checkpointing else shape.n_layer) * pc_level.block_bytes(arm, shape, bf16, weight_bytes)
    return Memory(4.0 * weight_bytes * n_params + masters, float(micro_tokens * per_token), float(head),
                  4.0 * n_params, casts, float(pc))


def activation_bytes_per_token(arm: str, shape: Scale, bf16: bool, checkpointing: bool = False) -> int:
    """The bytes the blocks save for backward per token of a micro-batch: every block's measured share, or
    with checkpointing each block's fp32 input and one block's share, recomputed in the backward pass."""
    saved = arms.arm(arm).saved_per_token(bf16, shape.d_model, shape.d_mlp)
    return shape.n_layer * 4 * shape.d_model + saved if checkpointing else shape.n_layer * saved


def fitting_micro_tokens(arm: str, shape: Scale, n_params: int, vocab_rows: int, context: int, bf16: bool,
                         limit_bytes: float, checkpointing: bool = False, weight_bytes: int = 4) -> int:
    """The largest micro-batch, whole sequences of `context`, whose peak stays within `limit_bytes`; 0 where
    not even one sequence fits. The peak is linear in the micro-batch's tokens."""
    empty = training_memory(arm, shape, n_params, vocab_rows, 0, bf16, checkpointing, weight_bytes).total
    one = training_memory(arm, shape, n_params, vocab_rows, context, bf16, checkpointing, weight_bytes).total
    return max(0, int((limit_bytes - empty) // (one - empty))) * context


def micro_tokens(train: Train, context: int, world_size: int) -> int:
    """Tokens of one forward pass in one process (as train/batches.py's plan_batches splits the batch)."""
    seqs_per_rank = max(1, train.batch_sequences // world_size)
    return min(train.micro_batch_tokens // context, seqs_per_rank) * context
