"""The one way to build an arm: (arm, scale, vocab size, context) -> (model, recipe).

The arms are the rows of arms.yaml (models/arms.py); an arm's model and recipe classes are loaded from its
row's "module:attr" strings when it is built, so this module imports no arm: a run's code key
(plan/closure.py) covers its own arm's module and what that imports, never another arm's.
"""

from __future__ import annotations

from importlib import import_module

import torch
from torch import nn

from ngptlab.errors import ParamsError
from ngptlab.models import arms
from ngptlab.models.gpt import GPT, Recipe
from ngptlab.models.init_device import init_on
from ngptlab.models.scales import Scale, resolve_scale


def load(reference: str) -> type:
    """The class a "module:attr" string names (an arm's train.model or train.recipe)."""
    module, _, attr = reference.partition(":")
    return getattr(import_module(module), attr)


def lookup_arm(name: str) -> arms.Arm:
    try:
        return arms.arm(name)
    except KeyError:
        raise ParamsError(f"unknown arm {name!r}; allowed: {', '.join(arms.names())}") from None


def recipe_of(name: str) -> Recipe:
    """How the arm is optimised, warming up or not as its row says."""
    training = lookup_arm(name).train
    return load(training.recipe)(warmup=training.warmup)


def build(arm: str, scale: Scale | str, vocab_size: int, context: int,
          vocab_multiple: int = 1, init_device: torch.device | None = None) -> tuple[GPT, Recipe]:
    """A freshly initialised model (post_step already applied) and its optimizer recipe.

    `scale` is a shape or the name of a named one (models/scales.py). Builds on torch's default device.
    `vocab_multiple` pads the embedding and LM-head rows to a multiple of it (params train.vocab_multiple).
    `init_device`: where the initialisation's factorisations run (models/init_device.py; the draws stay on
    the default generator, so a CPU build's bytes do not depend on it).
    """
    training = lookup_arm(arm).train
    shape = resolve_scale(scale) if isinstance(scale, str) else scale
    for key, value in (("vocab_size", vocab_size), ("context", context), ("vocab_multiple", vocab_multiple)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ParamsError(f"{key} must be a positive integer, got {value!r}")
    with init_on(init_device):
        model = load(training.model)(shape, vocab_size, context, vocab_multiple)
    recipe = recipe_of(arm)
    recipe.post_step(model)  # start on the arm's constraint set (unit rows, orthogonal matrices)
    return model, recipe


def build_seeded(arm: str, scale: Scale | str, vocab_size: int, context: int,
                 seed: int, vocab_multiple: int = 1,
                 init_device: torch.device | None = None) -> tuple[GPT, Recipe]:
    """The model a run starts from: torch.manual_seed(seed), then build. The train stage starts every run
    from it and the condition stage rebuilds the same step-0 weights from it as its reference (on a GPU
    run, equal up to the QR's rounding where train factorised on the GPU and condition on a CPU)."""
    torch.manual_seed(seed)
    return build(arm, scale, vocab_size, context, vocab_multiple, init_device)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
