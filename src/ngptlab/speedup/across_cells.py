"""The primary effect across the cells of one params file: Holm's step-down on each claim's one-sided p-value
(speedup/multiplicity.py), then the verdict from the adjusted p-values and the reading again: the cell's
pattern reading, "consistent" only where the primary effect's adjusted claim holds too
(speedup/equivalence.py, speedup/reading.py family_words).

The speed-up stage writes one cell at a time, so the family is formed by whoever reads every cell's document:
the report, and the design for a planted world. Cells without a reading (an older speed-up stage) or without
an interval enter no family.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ngptlab.speedup.document import SpeedupDocument
from ngptlab.speedup.effect_records import Reading
from ngptlab.speedup.equivalence import verdict_from_p_values
from ngptlab.speedup.multiplicity import holm_claims
from ngptlab.speedup.reading import family_words

HOLM = ("Holm's step-down over the cells with an interval, for each claim (exceeds, falls short, equivalent) "
        "on its one-sided t-test p-value; a claim holds where its adjusted p is below (1 - level) / 2")


@dataclass(frozen=True)
class AcrossCells:
    """One cell's primary effect in the family: its own reading, the Holm-adjusted claim p-values (None: no
    interval, so outside the family), the verdict and reading from them, and the family's size."""

    cell: str
    reading: Reading
    holm_p: Mapping[str, float] | None
    holm_verdict: str
    holm_reading: str
    n_cells: int


def primary_across_cells(documents: Mapping[str, SpeedupDocument | None]) -> list[AcrossCells]:
    """Per cell whose document has a reading, in the given order, its place in the family (module
    docstring)."""
    readings = {cell: doc.reading for cell, doc in documents.items() if doc and doc.reading}
    adjusted = holm_claims({cell: r.effect.p_values for cell, r in readings.items()})
    n_cells = sum(p is not None for p in adjusted.values())
    rows = []
    for cell, r in readings.items():
        p = adjusted[cell]
        rows.append(AcrossCells(cell, r, p, verdict_from_p_values(p, r.margin, r.effect.level),
                                family_words(r.pattern_words, r.primary, p, r.effect.level), n_cells))
    return rows
