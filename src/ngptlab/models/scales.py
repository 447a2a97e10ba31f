"""Model shapes: depth, width, heads and the MLP ratio. Torch-free, so `plan` can size any shape quickly.

The named scales below are defaults; params.yaml's `train.shapes` adds shapes or overrides a name. The
SwiGLU hidden size is mlp_ratio x d (4 d in the paper, Table 2).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ngptlab.errors import ParamsError


@dataclass(frozen=True)
class Scale:
    n_layer: int
    d_model: int
    n_head: int
    mlp_ratio: float = 4  # SwiGLU hidden size / d_model (paper Table 2: 4)

    def __post_init__(self) -> None:
        for key in ("n_layer", "d_model", "n_head"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{key} must be a positive integer, got {value!r}")
        if self.d_model % self.n_head:
            raise ValueError(f"d_model {self.d_model} is not a multiple of n_head {self.n_head}")
        if self.head_dim % 2:
            raise ValueError(f"head_dim {self.head_dim} (d_model / n_head) must be even for rotary "
                             "embeddings")
        hidden = self.mlp_ratio * self.d_model
        if isinstance(self.mlp_ratio, bool) or self.mlp_ratio <= 0 or hidden != int(hidden):
            raise ValueError(f"mlp_ratio {self.mlp_ratio!r} x d_model {self.d_model} must be a positive "
                             f"whole number of MLP units")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    @property
    def d_mlp(self) -> int:
        return int(self.mlp_ratio * self.d_model)

    def as_dict(self) -> dict:
        return asdict(self)


SCALES: dict[str, Scale] = {
    "cpu-4l": Scale(n_layer=4, d_model=64, n_head=4),  # CPU smoke scale: trains in seconds
    "cpu-8l": Scale(n_layer=8, d_model=128, n_head=4),  # a slightly deeper CPU scale
    "gpu-small": Scale(n_layer=12, d_model=768, n_head=12),  # GPT-2 small shape, one GPU
    "0.5B": Scale(n_layer=24, d_model=1024, n_head=16),  # paper Table 2
    "1B": Scale(n_layer=36, d_model=1280, n_head=20),  # paper Table 2
}


def shape_from_dict(name: str, fields: Mapping) -> Scale:
    """A Scale from the fields of params' train.shapes.<name> (or a checkpoint's record of them); one
    ParamsError naming the key on bad values."""
    try:
        return Scale(**fields)
    except (TypeError, ValueError) as err:
        raise ParamsError(f"train.shapes.{name}: {err}") from None


def resolve_scale(name: str, shapes: Mapping[str, Any] | None = None) -> Scale:
    """The shape called `name`: params' train.shapes first (settings.Shape dataclasses, not imported: the
    settings read the table of arms here, so models stand below them), then the named defaults above."""
    if shapes and name in shapes:
        return shape_from_dict(name, asdict(shapes[name]))
    if name in SCALES:
        return SCALES[name]
    defined = sorted(shapes or {})
    raise ParamsError(f"unknown scale {name!r}; named scales: {', '.join(SCALES)}"
                      + (f"; train.shapes: {', '.join(defined)}" if defined else "")
                      + " (define a new one under train.shapes)")
