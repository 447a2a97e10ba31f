"""The settle-it section's evidence on small documents built in memory: no grid is trained or rendered."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd
from test_separation import CELL as SEPARATION_CELL
from test_separation import planted_cell

from ngptlab.cli import main
from ngptlab.config.load import load_params
from ngptlab.grid.enumeration import compared_runs
from ngptlab.report.kit.load import Results, load_results
from ngptlab.report.sections import settle, settle_evidence
from ngptlab.results import train_dir
from ngptlab.speedup.document import SpeedupDocument
from ngptlab.speedup.reading import EFFECTIVE_LR, short
from ngptlab.speedup.rivals import RATE_KINDS
from ngptlab.speedup.separation import clause as separation_clause

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


def angle_square_cell(tmp_path) -> Results:
    """A planted cell that runs the angle square and logged its angular rate (test_separation's world, every
    run turning its matrices at a planted rate), through the real `ngptlab speedup`."""
    planted_cell(tmp_path, {"gpt-angle": 250.0, "ngpt-angle": 260.0})
    params = load_params(tmp_path / "params.yaml")
    for spec in compared_runs(params):
        path = train_dir(tmp_path, spec) / "metrics.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        for row in rows:
            row["angular_rate"] = dict.fromkeys(RATE_KINDS, 0.01 * planted_speedup_of(spec.arm))
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["speedup", SEPARATION_CELL, "--params", str(tmp_path / "params.yaml"), "--root",
                 str(tmp_path)]) == 0
    return load_results(params, tmp_path)


def planted_speedup_of(arm: str) -> float:
    return {"ngpt": 4.0, "gpt-angle": 4.0}.get(arm, 1.0)


def test_with_the_angle_square_the_effective_learning_rate_column_gives_the_squares_reading(tmp_path):
    results = angle_square_cell(tmp_path)
    doc = results.speedups[SEPARATION_CELL]
    assert doc.rivals.primary.note is None and doc.reading.effective_lr_clause is None  # null by design
    table = settle.primary_table(results)
    said = dict(zip(table.columns, table.rows[0], strict=True))["confound"]
    angle = doc.reading.accounts[EFFECTIVE_LR.name]
    assert "older" not in said and "rerun" not in said
    # every arm's angle measured: the angle line reads the account
    assert angle["source"] == "measured" and said == (
        f"read from every arm's measured angle per step (the angle line): {angle['words']}")
    # where the angle arms' angles were not measured, the square's label pattern reads it
    by_labels = {**doc.reading.accounts, EFFECTIVE_LR.name: {**angle, "source": "labels",
                                                            "reading": angle["by_labels"]}}
    unmeasured = dataclasses.replace(doc, reading=dataclasses.replace(doc.reading, accounts=by_labels))
    said = settle.confound_text(unmeasured)
    assert said.startswith("tested by the angle square") and short(angle["by_labels"]) in said
    assert said.endswith(separation_clause(doc.separation))
    # a file whose reading has no accounts (written before the angle square was read) is the older file
    old = dataclasses.replace(doc, reading=dataclasses.replace(doc.reading, accounts={}))
    assert "an older speed-up file" in settle.confound_text(old)


def test_every_interval_states_the_level_its_file_states():
    """A planted speed-up file at level 0.9 (arms, contrasts, bootstrap, the angle square's separation): every
    header, note and caption that names an interval's level says 90%, none 95%."""
    from support import fixture_params

    from ngptlab.report.sections import accounts
    from ngptlab.report.sections import speedup as speedup_section
    from ngptlab.settings import Params

    def interval(mean: float) -> dict:
        return {"mean": mean, "interval": [mean - 0.1, mean + 0.1], "claim": None, "method": "paired t",
                "level": 0.9, "n_seeds": 3}

    arms = ["gpt", "gpt-rownorm", "gpt-orth", "ngpt"]
    entry = {"value": 2.0, "bound": None, "display": "2", "interval": [1.5, 2.7], "level": 0.9, "n_seeds": 3,
             "method": "t-interval on ln S over seeds", "bootstrap_interval": [1.6, 2.5]}
    doc = SpeedupDocument.from_dict({
        "cell": CELL, "baseline": "gpt", "arms_order": arms, "bootstrap": {"level": 0.9, "min_seeds": 3},
        "arms": {arm: {"speedup": speedup(1.0) if arm == "gpt" else entry, "per_seed": []} for arm in arms},
        "contrasts": [{"a": "gpt-orth", "b": "ngpt", "label": "gpt-orth vs ngpt", "n_seeds": 3,
                       "seeds": [1, 2, 3], "difference_log": interval(-0.2), "ratio": 0.82,
                       "interval": [0.74, 0.9], "level": 0.9, "method": "paired t",
                       "verdict": "falls short"}],
        "separation": {"kappa_tokens": 8192, "verdict": "separates",
                       "arms": {"gpt-angle": {"own": "gpt", "other": "ngpt", "to_own": interval(0.0),
                                              "to_other": interval(2.0), "margin": 1.5,
                                              "verdict": "keeps"}}}})
    results = Results(Path("."), Params.of(fixture_params()), None, {}, {CELL: doc}, None)
    tables = [settle.comparisons_table(results), settle.contrasts_table(results),
              accounts.separation_table(results), speedup_section.speedup_table(results)]
    said = [text for t in tables for text in (*t.headers.values(), t.note)]
    assert not [text for text in said if "95%" in text]
    assert settle.comparisons_table(results).headers["speedup_display"] == "speed-up [90% interval]"
    contrasts = settle.contrasts_table(results)
    assert contrasts.headers["ratio_display"] == "S_a / S_b [90% interval]"
    assert "with the 90% t-interval on mean D" in contrasts.note
    separation = accounts.separation_table(results).headers
    assert separation["to_own"] == "κ heads vs its architecture's [90% interval]"
    assert separation["to_other"] == "κ heads vs the other's [90% interval]"
    table = speedup_section.speedup_table(results)
    assert table.headers["display"] == "speed-up [90% interval]"
    assert table.headers["bootstrap_display"] == "bootstrap 90% interval"
    assert table.note.startswith("90% t-interval on ln S over seeds")
    arm_rows = pd.DataFrame([{"cell": CELL, "arm": a, KAPPA: 100.0 / (i + 1), "budget": 8192}
                             for i, a in enumerate(arms)])
    figure = settle_evidence.settle_figure(results, arm_rows, {KAPPA: "κ"})
    assert "Vertical lines: 90% t-intervals on ln S over seeds" in figure.caption
    assert "95%" not in figure.caption
