"""A new arm, written into a copy of the tree as a researcher would add one: its module and its one row of
models/arms.yaml. gpt-hyperball is gpt whose block matrices are rescaled to their initial Frobenius norm after
each step (Hyperball, arXiv 2606.16899, fixes the norm and lets the direction move). Not a test module."""

from __future__ import annotations

import shutil
from pathlib import Path

ARM = "gpt-hyperball"
MODULE = "gpt_hyperball.py"
SOURCE = '''"""gpt-hyperball: gpt whose block matrices keep their initial Frobenius norm, rescaled after each
step."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from ngptlab.models.gpt import GPT as Model
from ngptlab.models.gpt import Recipe


@dataclass
class HyperballRecipe(Recipe):
    norms: dict[str, float] = field(default_factory=dict)  # each block matrix's norm at build time

    @torch.no_grad()
    def post_step(self, model: nn.Module) -> None:
        for name, p in model.layers.named_parameters():
            if p.ndim == 2:
                target = self.norms.setdefault(name, float(p.norm()))
                p.mul_(target / p.norm().clamp_min(1e-12))


__all__ = ["HyperballRecipe", "Model"]
'''
ROW = '''
gpt-hyperball:
  train: {model: "ngptlab.models.gpt_hyperball:Model", recipe: "ngptlab.models.gpt_hyperball:HyperballRecipe",
          warmup: true}
  architecture: gpt
  norms: fixed (initial)
  conditioning: free
  summary: "gpt whose block matrices are rescaled to their initial Frobenius norm after each step"
  parameters: "0"
  saved_bytes: {bf16: "34 * d_model + 8 * d_mlp", fp32: "40 * d_model + 16 * d_mlp"}  # gpt's
  style: {color: "tab20:19", marker: v}
'''


def add_to(package: Path, row: str = ROW) -> None:
    """Write the arm into a package's tree (src/ngptlab): its module and its row, nothing else."""
    (package / "models" / MODULE).write_text(SOURCE)
    table = package / "models" / "arms.yaml"
    table.write_text(table.read_text() + row)


def copy_package(source: Path, dest: Path) -> Path:
    """A copy of src/ngptlab under dest/src; returns the copy's package folder."""
    shutil.copytree(source, dest / "src" / "ngptlab", ignore=shutil.ignore_patterns("__pycache__"))
    return dest / "src" / "ngptlab"
