"""The bytes an arm's block saves for the backward pass, measured: what arms.yaml's `saved_bytes` rows hold
and plan/memory.py multiplies out by blocks and tokens.

torch.autograd.graph.saved_tensors_hooks sees every tensor the forward pass keeps for backward; their distinct
storages, parameters left out, are the saved bytes. One block's share per token is a double difference of
four forward passes, (2 blocks - 1 block) at (2 sequences - 1 sequence): the embedding, the LM head and the
rotary tables cancel, and so does what a block saves once whatever the tokens (under bf16 autocast the bf16
copy of each matrix, 2 bytes per parameter, which plan/memory.py counts apart).

What a block saves per token is a d_model x and d_mlp y bytes plus a few bytes per head (the attention's
log-sum-exp, each RMSNorm's 1/rms); a and b come from three widths (d 64 and 128 at 4 d of MLP, d 64 at 2 d)
and come out whole; the per-head rest (24-112 bytes at 4 heads, under 0.2% of a block at d 768) is left out.
It is the same at 32 and 64 tokens of context: torch's CPU attention is a flash kernel, which keeps no
T x T scores, as the flash and memory-efficient kernels on a GPU; the math kernel, which keeps them, is
not what training picks on either.

    python -m ngptlab.models.saved_tensors            the measured table against arms.yaml's rows
    python -m ngptlab.models.saved_tensors --write    rewrite arms.yaml's saved_bytes lines from it
"""

from __future__ import annotations

import argparse
import re
from contextlib import nullcontext

import torch

from ngptlab.models import arms
from ngptlab.models.registry import build
from ngptlab.models.scales import Scale

VOCAB = 64  # the LM head cancels in the difference; small keeps each pass quick
N_HEAD = 4
CONTEXT = 32
# (d_model, mlp_ratio) of the fit: a from the first and third, b from the first and second
FIT_SHAPES = ((64, 4), (64, 2), (128, 4))
REGENERATE = "python -m ngptlab.models.saved_tensors --write"


def saved_bytes(arm: str, shape: Scale, sequences: int, context: int, bf16: bool) -> int:
    """The bytes of the distinct storages one forward pass of `arm` saves for backward, parameters left out
    (they exist anyway), under bf16 autocast or in fp32."""
    torch.manual_seed(0)
    model, _ = build(arm, shape, VOCAB, context)
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:  # a view of a saved tensor shares its storage: counted once
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    idx = torch.randint(0, VOCAB, (sequences, context))
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else nullcontext()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor), autocast:
        model(idx)
    return sum(storages.values())


def block_bytes(arm: str, d_model: int, mlp_ratio: float, bf16: bool, context: int = CONTEXT,
                n_head: int = N_HEAD) -> tuple[float, int]:
    """(bytes one block saves per token, bytes it saves once whatever the tokens) at a width."""
    saved = {(layers, sequences): saved_bytes(arm, Scale(layers, d_model, n_head, mlp_ratio), sequences,
                                              context, bf16)
             for layers in (1, 2) for sequences in (1, 2)}
    per_sequence = saved[2, 2] - saved[1, 2] - saved[2, 1] + saved[1, 1]
    return per_sequence / context, saved[2, 1] - saved[1, 1] - per_sequence


def fitted(arm: str, bf16: bool) -> tuple[int, int]:
    """(a, b) of a d_model + b d_mlp, the bytes one block saves per token, for one precision."""
    (d, r), (_, r2), (d2, _) = FIT_SHAPES
    base, narrow, wide = (block_bytes(arm, width, ratio, bf16)[0] for width, ratio in FIT_SHAPES)
    b = (base - narrow) / (d * (r - r2))
    a = (wide - base - b * (d2 - d) * r) / (d2 - d)
    return round(a), round(b)


def expression(a: int, b: int) -> str:
    return f"{a} * d_model + {b} * d_mlp"


def measured_table() -> dict[str, dict[str, tuple[int, int]]]:
    """Every arm of the table: precision -> its measured (a, b)."""
    return {name: {precision: fitted(name, precision == "bf16") for precision in arms.PRECISIONS}
            for name in arms.names()}


def write(table: dict[str, dict[str, tuple[int, int]]]) -> list[str]:
    """Rewrite the `saved_bytes` line of each arm's row in arms.yaml; the arms whose line changed."""
    lines = arms.TABLE.read_text().splitlines(keepends=True)
    changed, arm = [], None
    for i, line in enumerate(lines):
        row = re.match(r"^([A-Za-z0-9_.-]+):", line)
        arm = row[1] if row else arm
        if arm in table and line.startswith("  saved_bytes:"):
            fields = ", ".join(f'{precision}: "{expression(*table[arm][precision])}"'
                               for precision in arms.PRECISIONS)
            new = f"  saved_bytes: {{{fields}}}\n"
            if new != line:
                lines[i], changed = new, [*changed, arm]
    arms.TABLE.write_text("".join(lines))
    arms.table.cache_clear()
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite arms.yaml's saved_bytes lines")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # tiny shapes: threads cost more than they save, and the sizes do not change
    table = measured_table()
    for name, row in table.items():
        written = arms.arm(name).saved_bytes
        cells = []
        for p, (a, b) in row.items():
            measured = expression(a, b)
            cells.append(f"{p}: {measured:<26} ({a + 4 * b:>3} d at 4 d of MLP)"
                         + ("" if measured == written[p] else f" arms.yaml: {written[p]}"))
        print(f"{name:<12} " + "  ".join(cells))
    if args.write:
        changed = write(table)
        print(f"rewrote {', '.join(changed)} in {arms.TABLE}" if changed else f"{arms.TABLE}: unchanged")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
