"""torch.compile (fullgraph: no graph breaks) under bf16 autocast, on a CPU, for every arm at the tiniest
shape: the loss agrees with eager fp32 and every trainable parameter gets a finite gradient."""

from __future__ import annotations

import pytest
import torch

from ngptlab.models.arms import table as arm_table
from ngptlab.models.registry import build
from ngptlab.models.scales import Scale

SHAPE, VOCAB, CONTEXT = Scale(n_layer=1, d_model=32, n_head=2), 64, 16
TOLERANCE = 0.05  # nats: bf16 matmuls keep ~3 significant digits of a loss near log(64) = 4.2


@pytest.mark.slow  # nine inductor compilations on 2 CPU cores: over a minute
def test_every_arm_compiles_fullgraph_under_bf16_autocast():
    torch.manual_seed(0)
    idx = torch.randint(0, VOCAB, (2, CONTEXT + 1))
    x, y = idx[:, :-1], idx[:, 1:]
    for arm in arm_table():
        torch.manual_seed(0)
        model, _ = build(arm, SHAPE, VOCAB, CONTEXT)
        with torch.no_grad():
            _, eager32 = model(x, y)
        torch._dynamo.reset()
        compiled = torch.compile(model, fullgraph=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            _, loss = compiled(x, y)
        loss.backward()
        assert abs(loss.item() - eager32.item()) < TOLERANCE, (arm, loss.item(), eager32.item())
        trained = [p for p in model.parameters() if p.requires_grad]
        assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in trained), arm
