"""The settle-it section's evidence on small documents built in memory: no grid is trained or rendered."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ngptlab.report.kit.load import Results
from ngptlab.report.sections import settle_evidence
from ngptlab.speedup.document import SpeedupDocument

CELL = "cpu-4l-ctx64"
KAPPA = "eff_attn_head_condition_median"


def speedup(value: float, bound: str | None = None) -> dict:
    return {"value": value, "bound": bound, "display": f"{bound or ''}{value:g}", "interval": None}


def tracked(speedups: dict[str, dict]) -> tuple[Results, pd.DataFrame, pd.DataFrame]:
    """(results, arm_rows, cross) of one cell whose arms have the given speed-ups; κ falls as S rises."""
    arms = list(speedups)
    doc = {"cell": CELL, "baseline": arms[0], "arms": {a: {"speedup": s, "per_seed": []}
                                                       for a, s in speedups.items()}}
    results = Results(Path("."), {}, None, {}, {CELL: SpeedupDocument.from_dict(doc)}, None)
    arm_rows = pd.DataFrame([{"cell": CELL, "arm": a, KAPPA: 100.0 / (i + 1), "budget": 8192}
                             for i, a in enumerate(arms)])
    cross = pd.DataFrame([{"cell": CELL, "arm": a, "best_lr_for_budget": True, "budget": 8192,
                           "run": f"{a}-run"} for a in arms])
    return results, arm_rows, cross


def test_the_tracking_table_lists_as_bounds_only_the_arms_whose_speedup_is_a_bound():
    results, arm_rows, cross = tracked({"gpt": speedup(1.0), "gpt-rownorm": speedup(1.3),
                                        "gpt-orth": speedup(2.2), "gpt-lrm": speedup(1.1),
                                        "ngpt": speedup(4.0, ">")})
    table = settle_evidence.tracking_table(results, arm_rows, cross)
    row = dict(zip(table.columns, table.rows[0], strict=True))
    assert row["n"] == 5 and row["bounds"] == f"{CELL} ngpt"


def test_the_tracking_table_without_bounds_lists_none():
    results, arm_rows, cross = tracked({"gpt": speedup(1.0), "gpt-rownorm": speedup(1.3),
                                        "gpt-orth": speedup(2.2), "ngpt": speedup(3.0)})
    table = settle_evidence.tracking_table(results, arm_rows, cross)
    assert dict(zip(table.columns, table.rows[0], strict=True))["bounds"] is None
