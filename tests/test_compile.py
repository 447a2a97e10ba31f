"""torch.compile (fullgraph: no graph breaks) under bf16 autocast, on a CPU, for every arm at the tiniest
shape: the loss agrees with eager fp32 and every trainable parameter gets a finite gradient.

In `make test` the graphs go to AOT autograd's eager backend: dynamo captures each arm's forward as one graph
and AOT autograd traces its forward and backward, the graphs inductor would receive, where an arm's Python
would break (about 20 s for all fifteen arms). Inductor's own code generation for every arm is the
`inductor`-marked test, left out of `make test` (`make test-inductor`): its C++ compilations took 192 s of the
suite on two cores with a cold cache, 114 s with a partly warm one and 19 s once inductor's caches held every
arm's graphs, and a GPU's inductor generates Triton, not C++, so the CPU's code says little about a GPU run.
Inductor still runs in `make test` on gpt and ngpt: `ngptlab bench gpu`'s CPU rehearsal
(tests/test_bench_gpu.py) and the compiled runs of tests/test_train_timing.py.
"""

from __future__ import annotations

import pytest
import torch

from ngptlab.models.arms import table as arm_table
from ngptlab.models.registry import build
from ngptlab.models.scales import Scale

SHAPE, VOCAB, CONTEXT = Scale(n_layer=1, d_model=32, n_head=2), 64, 16
TOLERANCE = 0.05  # nats: bf16 matmuls keep ~3 significant digits of a loss near log(64) = 4.2


def compiles(backend: str) -> None:
    """Every arm compiled fullgraph by `backend`, run forward and backward under bf16 autocast."""
    torch.manual_seed(0)
    idx = torch.randint(0, VOCAB, (2, CONTEXT + 1))
    x, y = idx[:, :-1], idx[:, 1:]
    for arm in arm_table():
        torch.manual_seed(0)
        model, _ = build(arm, SHAPE, VOCAB, CONTEXT)
        with torch.no_grad():
            _, eager32 = model(x, y)
        torch._dynamo.reset()
        compiled = torch.compile(model, fullgraph=True, backend=backend)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            _, loss = compiled(x, y)
        loss.backward()
        assert abs(loss.item() - eager32.item()) < TOLERANCE, (arm, loss.item(), eager32.item())
        trained = [p for p in model.parameters() if p.requires_grad]
        assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in trained), arm


def test_every_arm_compiles_fullgraph_under_bf16_autocast():
    compiles("aot_eager")


@pytest.mark.inductor  # an inductor compilation per arm: about 3 minutes on 2 cores
def test_every_arm_compiles_with_inductor_under_bf16_autocast():
    compiles("inductor")
