"""reports/metrics.json: the numbers a researcher compares across experiments, for `dvc exp show` and
`dvc metrics diff` (the report stage's metrics). Per cell and arm: the best final validation loss at the
grid's largest budget (mean over seeds, the status table's figure) and the speed-up over the baseline (the
speedup stage's point estimate; null where it has none)."""

from __future__ import annotations

import json

from ngptlab.report.kit import views
from ngptlab.report.kit.load import Results


def headline_metrics(results: Results) -> dict:
    largest = views.budgets(results)[-1]
    out: dict[str, dict] = {}
    for cell in results.cells:
        best = views.best_runs(results, cell)
        doc = results.speedups.get(cell)
        out[cell] = {}
        for arm in views.arms(results):
            entry = doc.arms.get(arm) if doc else None
            out[cell][arm] = {"best_val_loss": views.mean_best_loss(best, arm, largest),
                              "speedup": entry.speedup.value if entry else None}
    return out


def to_json(metrics: dict) -> str:
    return json.dumps(metrics, indent=1, sort_keys=True) + "\n"
