"""Reading the train stage's small outputs: results/train/<run>/summary.json and metrics.jsonl.

Only the fields the analysis needs are checked; anything missing or malformed is a ResultsError naming the
file and the key, since a silently skipped run would change the speed-up.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ngptlab.errors import ResultsError
from ngptlab.params import RunSpec

STATUSES = ("completed", "diverged")



def train_dir(root: str | Path, run: str) -> Path:
    return Path(root) / "results" / "train" / run


def read_summary(root: str | Path, spec: RunSpec) -> dict:
    """summary.json of one run, checked to belong to this run and to carry a known status."""
    path = train_dir(root, spec.name) / "summary.json"
    if not path.is_file():
        raise ResultsError(f"{path}: train summary not found (train run {spec.name} first)")
    try:
        summary = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ResultsError(f"{path}: not valid JSON: {err}") from None
    if not isinstance(summary, dict):
        raise ResultsError(f"{path}: expected a JSON object")
    if summary.get("run") != spec.name:
        raise ResultsError(f"{path}: summary is for run {summary.get('run')!r}, expected {spec.name!r}")
    if summary.get("status") not in STATUSES:
        raise ResultsError(f"{path}: status is {summary.get('status')!r}; allowed: {', '.join(STATUSES)}")
    if "final_val_loss" not in summary:
        raise ResultsError(f"{path}: missing key 'final_val_loss'")
    return summary


def read_val_curve(root: str | Path, spec: RunSpec) -> list[tuple[float, float]]:
    """(tokens, val_loss) at every evaluation point of a run, in token order; non-finite losses dropped."""
    path = train_dir(root, spec.name) / "metrics.jsonl"
    if not path.is_file():
        raise ResultsError(f"{path}: train metrics not found (train run {spec.name} first)")
    curve = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ResultsError(f"{path}:{lineno}: not valid JSON: {err}") from None
            loss = row.get("val_loss")
            if loss is None:
                continue
            if "tokens" not in row:
                raise ResultsError(f"{path}:{lineno}: a row with val_loss lacks 'tokens'")
            loss = float(loss)
            if math.isfinite(loss):
                curve.append((float(row["tokens"]), loss))
    return sorted(curve)


@dataclass(frozen=True)
class RunResult:
    """What the speed-up estimator needs from one run."""

    spec: RunSpec
    status: str
    final_val_loss: float  # nan when the run diverged before any evaluation
    curve: list[tuple[float, float]] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        """Completed with a finite final loss: only such runs enter the speed-up (diverged: ignored)."""
        return self.status == "completed" and math.isfinite(self.final_val_loss)


def read_run_result(root: str | Path, spec: RunSpec, with_curve: bool = True) -> RunResult:
    summary = read_summary(root, spec)
    try:
        loss = math.nan if summary["final_val_loss"] is None else float(summary["final_val_loss"])
    except (TypeError, ValueError):
        path = train_dir(root, spec.name) / "summary.json"
        raise ResultsError(f"{path}: final_val_loss {summary['final_val_loss']!r} is not a number") from None
    curve = read_val_curve(root, spec) if with_curve else []
    return RunResult(spec=spec, status=summary["status"], final_val_loss=loss, curve=curve)
