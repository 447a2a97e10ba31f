"""Which arms warm up their learning rate: a fact of each arm's recipe (registry.py builds every recipe with
it), kept torch-free so that the plan and the schedule read it without loading a model."""

from __future__ import annotations

# nGPT trains without warmup (paper Section 2.6; Table 3: 0 steps), and so do its free-weights and
# angle variants; the GPT arms warm up (Table 3: 2000 steps for GPT).
ARMS_WITHOUT_WARMUP = frozenset({"ngpt", "ngpt-freew", "ngpt-angle"})


def warms_up(arm: str) -> bool:
    return arm not in ARMS_WITHOUT_WARMUP
