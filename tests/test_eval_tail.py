"""A compiled model's evaluation pads its short last batch to the micro-batch: one eval graph, whatever the
number of windows, and the losses of the unpadded batches.

Graphs are counted with torch._dynamo.utils.counters["stats"]["unique_graphs"], the graphs Dynamo has traced
and handed to Inductor (each one compiled; a recompilation for a new shape is one more). The model is tiny
(1 layer, d 32, vocabulary 64, context 16) so each Inductor compile takes seconds on a CPU."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
from torch._dynamo.utils import counters

from ngptlab.models.registry import build
from ngptlab.models.scales import Scale
from ngptlab.train.data import final_eval_offsets
from ngptlab.train.dist import Topology
from ngptlab.train.evaluation import Evaluator, pad_rows

SHAPE, VOCAB, CONTEXT, MICRO = Scale(n_layer=1, d_model=32, n_head=2), 64, 16, 2
WINDOWS = 5  # batches of 2, 2 and a tail of 1
# fp32 on a CPU: Inductor fuses and may reorder the reductions (layer norm, softmax, the loss's logsumexp),
# which moves a per-token loss by a few float32 ulps (~5e-7 at a loss of 4.2); 1e-5 leaves room for that
# and is far below the 1e-3 nats at which two runs' losses are ever compared. Measured: 0 difference.
TOLERANCE = 1e-5
TOPO = Topology(rank=0, world_size=1, local_rank=0, device=torch.device("cpu"))


def tokens() -> np.ndarray:
    return np.random.default_rng(0).integers(0, VOCAB, WINDOWS * (CONTEXT + 1)).astype(np.uint16)


def seeded(arm: str) -> torch.nn.Module:
    torch.manual_seed(0)
    model, _ = build(arm, SHAPE, VOCAB, CONTEXT)
    return model


def compiled_loss(model: torch.nn.Module, pad_tail: bool) -> tuple[tuple[float, float], int]:
    """The compiled model's (loss, se) over every window of tokens(), twice (a curve's two evaluations),
    and the graphs compiled for it."""
    val = tokens()
    offsets = final_eval_offsets(len(val), CONTEXT, "all")
    assert len(offsets) == WINDOWS and WINDOWS % MICRO != 0
    torch._dynamo.reset()
    counters.clear()
    evaluator = Evaluator(torch.compile(model), val, VOCAB, CONTEXT, MICRO, contextlib.nullcontext(), TOPO,
                          pad_tail=pad_tail)
    first = evaluator.loss(offsets)
    assert evaluator.loss(offsets) == first
    return first, counters["stats"]["unique_graphs"]


def eager_loss(model: torch.nn.Module) -> tuple[float, float]:
    val = tokens()
    offsets = final_eval_offsets(len(val), CONTEXT, "all")
    return Evaluator(model, val, VOCAB, CONTEXT, MICRO, contextlib.nullcontext(), TOPO).loss(offsets)


@pytest.mark.parametrize("arm", ["gpt", "ngpt"])
def test_a_compiled_model_evaluates_a_short_tail_with_one_graph_and_the_eager_losses(arm):
    model = seeded(arm)
    (loss, se), graphs = compiled_loss(model, pad_tail=True)
    assert graphs == 1
    eager, eager_se = eager_loss(model)
    assert loss == pytest.approx(eager, abs=TOLERANCE)
    assert se == pytest.approx(eager_se, abs=TOLERANCE)


def test_without_padding_the_tail_compiles_a_second_graph():
    # what the padding saves: the same evaluation unpadded traces again for the tail's shape
    _, graphs = compiled_loss(seeded("gpt"), pad_tail=False)
    assert graphs == 2


def test_the_padding_is_token_zero_after_the_windows():
    windows = torch.arange(6).view(2, 3)
    padded = pad_rows(windows, 4)
    assert padded.dtype == windows.dtype
    assert torch.equal(padded, torch.tensor([[0, 1, 2], [3, 4, 5], [0, 0, 0], [0, 0, 0]]))
