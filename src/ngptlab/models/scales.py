"""Named model scales: depth, width and heads. The MLP hidden size is always 4 d (paper Table 3)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scale:
    n_layer: int
    d_model: int
    n_head: int

    def __post_init__(self) -> None:
        if self.d_model % self.n_head:
            raise ValueError(f"d_model {self.d_model} is not a multiple of n_head {self.n_head}")
        if self.head_dim % 2:
            raise ValueError(f"head_dim {self.head_dim} must be even for rotary embeddings")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    @property
    def d_mlp(self) -> int:
        return 4 * self.d_model  # SwiGLU hidden size 4d (paper Table 3)


SCALES: dict[str, Scale] = {
    "cpu-4l": Scale(n_layer=4, d_model=64, n_head=4),  # CPU smoke scale: trains in seconds
    "cpu-8l": Scale(n_layer=8, d_model=128, n_head=4),  # a slightly deeper CPU scale
    "gpu-small": Scale(n_layer=12, d_model=768, n_head=12),  # GPT-2 small shape, one GPU
    "0.5B": Scale(n_layer=24, d_model=1024, n_head=16),  # paper Table 2/3
    "1B": Scale(n_layer=36, d_model=1280, n_head=20),  # paper Table 2/3
}
