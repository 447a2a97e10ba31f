"""Peak memory of one training process, in closed form from the shape (torch-free, like the rest of plan).

    peak = 16 N                      fp32 weights (4 N), gradients (4 N), AdamW's two moments (8 N);
                                     bf16 autocast casts on the fly and keeps the fp32 master weights;
                                     8 N where train.weight_dtype stores all four in bf16 (2 bytes each),
                                     + 4 N_rot, the float32 master copy of an angle arm's N_rot rotational
                                     parameters (models/rotational.py), which bf16 would round the turns of
         + 4 N                       the previous evaluation point's effective matrices, float32, for the
                                     angular update rate (observe/angular.py; on rank 0, counted for all)
         + tokens x L x A d x b      the tensors each block saves for backward, for one micro-batch
         + tokens x V x h            the LM head: logits, their log-softmax and its gradient

A step whose angle is measured (observe/step_angle.py) copies the matrices (4 N more) around the optimizer
step, once the backward pass has freed the activations and the LM head's tensors; those outweigh the copy
wherever the peak matters (1B, 8k tokens per pass, activation checkpointing: ~9.7 GB against 4.4 GB), so
the peak stays where the formula puts it.

A d per token per block, counted from models/layers.py: RMSNorm input (d), the normalised input shared by
q, k, v (d), q, k, v and the attention output that scaled_dot_product_attention keeps (4 d; a flash or
memory-efficient kernel keeps no T x T scores), the second RMSNorm's input (d) and the MLP's input (d),
SwiGLU's u, v, SiLU(v) and their product (4 x 4 d = 16 d): A = 24. nGPT and ngpt-freew keep more: the
normalisations of q, k, the block outputs and the updates, about 8 d more (A = 32). Each arm's A is its
row's `saved_per_block` in models/arms.yaml.
b is the bytes of a saved element: 4 in fp32; 3 under bf16 autocast (the matmul outputs are bf16, the
residual stream and the normalisations stay fp32: about half and half).
h is 16 bytes per vocabulary entry in fp32 (the logits, which the caller holds, their log-softmax saved by
the cross-entropy, and in the backward pass the gradients of both), 18 under bf16 (plus the bf16 logits
before their fp32 copy).
With activation checkpointing a block keeps only its input (d fp32) and recomputes the rest during the
backward pass, when one block's activations exist at a time: tokens x (L x 4 d + A d x b).

Measured against real CPU training steps (fp32, 50k vocabulary, 512-2048 tokens, cpu-4l and cpu-8l): the
estimate is 5-15% under the measured peak resident set; tests/test_memory.py holds it within a factor of 2.
"""

from __future__ import annotations

from dataclasses import dataclass

from ngptlab.models import arms
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

    @property
    def total(self) -> float:
        return self.weights_optimizer + self.activations + self.head + self.observation


def training_memory(arm: str, shape: Scale, n_params: int, vocab_rows: int, micro_tokens: int, bf16: bool,
                    checkpointing: bool = False, weight_bytes: int = 4) -> Memory:
    """The peak bytes of one process training `arm` at `shape` on micro-batches of `micro_tokens`, its
    weights, gradients and AdamW moments stored at `weight_bytes` each (ngptlab.weight_dtype.BYTES), the
    rotational matrices' float32 master copies with them below 4."""
    saved = arms.arm(arm).saved_per_block * shape.d_model * (3 if bf16 else 4)
    if checkpointing:
        per_token = shape.n_layer * 4 * shape.d_model + saved
    else:
        per_token = shape.n_layer * saved
    head = micro_tokens * vocab_rows * (18 if bf16 else 16)
    masters = 4.0 * rotational_parameters(arm, shape, vocab_rows) if weight_bytes < 4 else 0.0
    return Memory(4.0 * weight_bytes * n_params + masters, float(micro_tokens * per_token), float(head),
                  4.0 * n_params)


def micro_tokens(train: Train, context: int, world_size: int) -> int:
    """Tokens of one forward pass in one process (as train/batches.py's plan_batches splits the batch)."""
    seqs_per_rank = max(1, train.batch_sequences // world_size)
    return min(train.micro_batch_tokens // context, seqs_per_rank) * context
