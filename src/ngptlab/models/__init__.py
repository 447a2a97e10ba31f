"""The seven arms (model + optimizer recipe) at named scales. See registry.py for the table of arms."""

from ngptlab.models.flops import train_flops_per_token
from ngptlab.models.gpt import Recipe
from ngptlab.models.layers import MATRIX_KINDS, MatrixInfo
from ngptlab.models.registry import ARMS, Arm, build, count_parameters
from ngptlab.models.scales import SCALES, Scale

__all__ = [
    "ARMS",
    "MATRIX_KINDS",
    "SCALES",
    "Arm",
    "MatrixInfo",
    "Recipe",
    "Scale",
    "build",
    "count_parameters",
    "train_flops_per_token",
]
