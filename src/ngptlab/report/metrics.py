"""reports/metrics/<cell>/<arm>.json: the numbers a researcher compares across experiments, the pipeline's
only DVC metrics (`dvc metrics show/diff`, `dvc exp show`). One flat file of numbers per cell and arm, so
that `dvc metrics show` prints one short row each, where whole result documents (their text fields, their
per-run tables) made one column per key of every file:

  best_val_loss              the best final validation loss at the grid's largest budget, mean over seeds
                             (the status table's figure)
  speedup                    the speedup stage's point estimate over the (primary) baseline
  speedup_low, speedup_high  the bounds of its interval over seeds

A number the cell does not have (no speed-up yet, an interval of one seed, an infinite bound) is left out,
never written as null or text: DVC shows "-".
"""

from __future__ import annotations

import json
import math

from ngptlab.report.kit import views
from ngptlab.report.kit.load import Results

DIRECTORY = "metrics"  # under the report's output directory: reports/metrics/
FIELDS = ("best_val_loss", "speedup", "speedup_low", "speedup_high")


def relative_path(cell: str, arm: str) -> str:
    """A cell and arm's file, relative to the report's output directory."""
    return f"{DIRECTORY}/{cell}/{arm}.json"


def headline_metrics(results: Results) -> dict[str, dict[str, dict[str, float]]]:
    """{cell: {arm: {field: number}}}, every arm of every cell, each with the FIELDS it has."""
    largest = views.budgets(results)[-1]
    out: dict[str, dict[str, dict[str, float]]] = {}
    for cell in results.cells:
        best = views.best_runs(results, cell)
        doc = results.speedups.get(cell)
        out[cell] = {}
        for arm in views.arms(results):
            entry = doc.arms.get(arm) if doc else None
            speedup = entry.speedup if entry else None
            low, high = (speedup.interval if speedup and speedup.interval else (None, None))
            values = {"best_val_loss": views.mean_best_loss(best, arm, largest),
                      "speedup": speedup.value if speedup else None, "speedup_low": low, "speedup_high": high}
            out[cell][arm] = {key: float(value) for key, value in values.items()
                              if value is not None and math.isfinite(value)}
    return out


def files(metrics: dict[str, dict[str, dict[str, float]]]) -> dict[str, bytes]:
    """{relative path: JSON} of each cell and arm's numbers."""
    return {relative_path(cell, arm): (json.dumps(numbers, indent=1, sort_keys=True) + "\n").encode()
            for cell, arms in metrics.items() for arm, numbers in arms.items()}
