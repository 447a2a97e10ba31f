"""The primary effect across the cells of the params file: Holm's step-down on each claim's one-sided
p-value (speedup/multiplicity.py), then the reading again from the adjusted p-values (speedup/reading.py).

It lives in the report because the speed-up stage runs one cell at a time and only the report reads every
cell's JSON. Cells without a reading (an older speed-up stage) or without an interval enter no family.
"""

from __future__ import annotations

from ngptlab.report.kit.load import Results
from ngptlab.speedup.equivalence import verdict_from_p_values
from ngptlab.speedup.multiplicity import holm_claims
from ngptlab.speedup.reading import reading_words

HOLM = ("Holm's step-down over the cells with an interval, for each claim (exceeds, falls short, equivalent) "
        "on its one-sided t-test p-value; a claim holds where its adjusted p is below (1 - level) / 2")


def primary_across_cells(results: Results) -> list[dict]:
    """Per cell with a reading: {cell, reading (the JSON's), holm_p {claim: p} | None, holm_verdict,
    holm_reading, n_cells (the family's size)}."""
    readings = {cell: doc["reading"] for cell, doc in results.speedups.items() if doc and "reading" in doc}
    adjusted = holm_claims({cell: r["p_values"] for cell, r in readings.items()})
    n_cells = sum(p is not None for p in adjusted.values())
    return [{"cell": cell, "reading": r, "holm_p": adjusted[cell], "n_cells": n_cells,
             "holm_verdict": verdict_from_p_values(adjusted[cell], r["margin"], r["level"]),
             "holm_reading": reading_words(r["primary"], adjusted[cell], r["level"])}
            for cell, r in readings.items()]
