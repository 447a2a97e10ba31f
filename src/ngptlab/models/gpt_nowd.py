"""gpt-nowd: the baseline GPT with weight decay 0.

Design role: a control. Weight decay itself shrinks norms and lowers rank, and nGPT trains without it; this
arm separates "no weight decay" from "normalised" (norms free, conditioning free).
"""

from __future__ import annotations

from dataclasses import dataclass

from ngptlab.models.gpt import GPT, Recipe

Model = GPT  # the architecture is the baseline's


@dataclass
class NoDecayRecipe(Recipe):
    weight_decay: float = 0.0  # the one difference from gpt
