"""Holm's step-down adjustment, for the primary effect's claims across the cells of one params file.

Choice: Holm-adjusted p-values rather than a pooled estimate, because cells differ in scale and context and
the question is per cell; rather than Holm intervals, because Holm's step-down has no simple matching
interval. For each claim (exceeds, falls short, equivalent: speedup/equivalence.py) separately, over the K
cells that have an interval: order their one-sided p-values p_(1) <= ... <= p_(K); the adjusted
p_(i) = max_{j <= i} min(1, (K - j + 1) p_(j)). A claim holds across cells where its adjusted p-value is
below (1 - level) / 2, which controls the family-wise error of that claim over the cells at that alpha.
Within a cell the claims are exclusive and equivalence is an intersection-union test (the larger of its
two one-sided p-values), which needs no adjustment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ngptlab.speedup.equivalence import CLAIMS


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's adjusted p-values, in the order given."""
    k = len(p_values)
    adjusted = [0.0] * k
    running = 0.0
    for rank, index in enumerate(sorted(range(k), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (k - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def holm_claims(per_cell: Mapping[str, Mapping[str, float] | None]) -> dict[str, dict[str, float] | None]:
    """{cell: {claim: Holm-adjusted p}} over the cells with claim p-values; None for a cell without."""
    tested = [cell for cell, p in per_cell.items() if p is not None]
    out: dict[str, dict[str, float] | None] = {cell: None for cell in per_cell}
    for cell in tested:
        out[cell] = {}
    for claim in CLAIMS:
        for cell, p in zip(tested, holm([per_cell[c][claim] for c in tested]), strict=True):
            out[cell][claim] = p
    return out
