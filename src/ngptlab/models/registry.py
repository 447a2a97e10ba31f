"""The arms and the one way to build them: (arm, scale, vocab size, context) -> (model, recipe).

Together gpt, gpt-rownorm, gpt-orth and ngpt are the 2x2 {norm free, fixed} x {conditioning free, fixed};
gpt-nowd, gpt-lrm and gpt-scalar control for weight decay and for learning the norms explicitly; gpt-qknorm
is the modern baseline (QK-norm) and ngpt-freew separates nGPT's hidden-state from its weight normalisation.
gpt, gpt-angle, ngpt-angle and ngpt are the angle square {architecture gpt, ngpt} x {angle per step gpt's,
ngpt's}: the effective learning rate set by intervention.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ngptlab.errors import ParamsError
from ngptlab.models import (
    gpt,
    gpt_angle,
    gpt_lrm,
    gpt_nowd,
    gpt_orth,
    gpt_qknorm,
    gpt_rownorm,
    gpt_scalar,
    ngpt,
    ngpt_angle,
    ngpt_freew,
)
from ngptlab.models.gpt import GPT, Recipe
from ngptlab.models.placement import NGPT_CONDITIONING
from ngptlab.models.scales import Scale, resolve_scale
from ngptlab.models.warmup import warms_up


@dataclass(frozen=True)
class Arm:
    name: str
    model: type[GPT]
    recipe_type: type[Recipe]
    norms: str  # DESIGN.md's "norms" column
    conditioning: str  # DESIGN.md's "conditioning" column
    summary: str

    def recipe(self) -> Recipe:
        """How the arm is optimised; whether it warms up is models/warmup.py's, which the plan reads too."""
        return self.recipe_type(warmup=warms_up(self.name))


ARMS: dict[str, Arm] = {
    arm.name: arm
    for arm in (
        Arm("gpt", gpt.GPT, gpt.Recipe, "free", "free",
            "the paper's baseline: pre-norm RMSNorm, RoPE, SwiGLU, AdamW wd 0.1, warmup"),
        Arm("gpt-nowd", gpt_nowd.Model, gpt_nowd.NoDecayRecipe, "free", "free",
            "gpt with weight decay 0"),
        Arm("ngpt", ngpt.NGPT, ngpt.NGPTRecipe, "fixed (unit)", NGPT_CONDITIONING,
            "the normalized transformer, every part of the paper's Section 2"),
        Arm("gpt-lrm", gpt_lrm.GPTLRM, gpt_lrm.MultiplierRecipe, "learned explicitly", "free",
            "gpt with learnable row and column multipliers on every matrix"),
        Arm("gpt-scalar", gpt_scalar.GPTScalar, gpt_scalar.ScalarRecipe, "learned explicitly", "free",
            "gpt with one learnable scalar per matrix"),
        Arm("gpt-rownorm", gpt_rownorm.GPTRowNorm, gpt_rownorm.RowNormRecipe, "fixed", "free",
            "gpt with nGPT's unit-norm weight constraint after every step"),
        Arm("gpt-orth", gpt_orth.GPTOrth, gpt_orth.OrthRecipe, "learned scalar", "fixed (kappa = 1)",
            "gpt whose attention and MLP matrices are a learned scalar times an orthogonal matrix"),
        Arm("gpt-qknorm", gpt_qknorm.GPTQKNorm, gpt.Recipe, "free", "free",
            "gpt with q and k RMS-normalised per head (QK-norm), the modern baseline"),
        Arm("ngpt-freew", ngpt_freew.NGPTFreeW, ngpt_freew.FreeWeightsRecipe, "free (weights)", "free",
            "nGPT's hidden-state normalisation and block update, weights left free"),
        Arm("gpt-angle", gpt_angle.GPTAngle, gpt_angle.AngleRecipe, "learned scalar", "free",
            "gpt with one learnable scalar per matrix, its directions turned at ngpt's angle per step"),
        Arm("ngpt-angle", ngpt_angle.NGPTAngle, ngpt_angle.AngleRecipe, "fixed (unit)", NGPT_CONDITIONING,
            "ngpt with its matrices turned at gpt's angle per step"),
    )
}


def lookup_arm(name: str) -> Arm:
    if name not in ARMS:
        raise ParamsError(f"unknown arm {name!r}; allowed: {', '.join(ARMS)}")
    return ARMS[name]


def build(arm: str, scale: Scale | str, vocab_size: int, context: int,
          vocab_multiple: int = 1) -> tuple[GPT, Recipe]:
    """A freshly initialised model (post_step already applied) and its optimizer recipe.

    `scale` is a shape or the name of a named one (models/scales.py). Builds on torch's default device.
    `vocab_multiple` pads the embedding and LM-head rows to a multiple of it (params train.vocab_multiple).
    """
    spec = lookup_arm(arm)
    shape = resolve_scale(scale) if isinstance(scale, str) else scale
    for key, value in (("vocab_size", vocab_size), ("context", context), ("vocab_multiple", vocab_multiple)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ParamsError(f"{key} must be a positive integer, got {value!r}")
    model = spec.model(shape, vocab_size, context, vocab_multiple)
    recipe = spec.recipe()
    recipe.post_step(model)  # start on the arm's constraint set (unit rows, orthogonal matrices)
    return model, recipe


def build_seeded(arm: str, scale: Scale | str, vocab_size: int, context: int,
                 seed: int, vocab_multiple: int = 1) -> tuple[GPT, Recipe]:
    """The model a run starts from: torch.manual_seed(seed), then build. The train stage starts every run
    from it and the condition stage rebuilds the same step-0 weights from it as its reference."""
    torch.manual_seed(seed)
    return build(arm, scale, vocab_size, context, vocab_multiple)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
