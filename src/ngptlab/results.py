"""Results I/O shared by every analysis stage (condition, speedup, report), below all of them.

Strict JSON for results/ files (no NaN/Infinity tokens), the spectra table (Parquet), and the reader of the
train stage's small outputs (results/train/<cell>/<run>/summary.json and metrics.jsonl). Anything missing or
malformed is a ResultsError naming the file and the key, since a silently skipped run would change the
speed-up.

Encoding of non-finite floats, used by every results/ file of the condition and speedup stages:
- +inf (a numerically singular matrix's condition number, see observe/metrics.py) -> the string "inf";
  `float(value)` reads it back as math.inf.
- nan (a metric that does not exist, e.g. the stable rank of a zero matrix) -> null.
null therefore means "not applicable / not measured", and "inf" means "measured: numerically singular".
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ngptlab import files, layout
from ngptlab.errors import ResultsError
from ngptlab.files import atomic_path, write_text_atomic
from ngptlab.grid.runs import RunSpec

if TYPE_CHECKING:  # pandas costs ~0.6 s to import, and the condition stage, once per run, never needs it
    import pandas as pd

STATUSES = ("completed", "diverged")

# ----------------------------------------------------------------------------------------------------------
# Strict JSON and CSV


def json_ready(obj: Any) -> Any:
    """Recursively turn numpy scalars/arrays, tuples and non-finite floats into strict-JSON values."""
    if isinstance(obj, dict):
        return {str(k): json_ready(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_ready(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [json_ready(v) for v in obj.tolist()]
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        value = float(obj)
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    return obj


def read_float(value: Any) -> float:
    """Inverse of the encoding above for one number: null -> nan, "inf" -> inf."""
    return math.nan if value is None else float(value)


def write_text(path: str | Path, text: str) -> None:
    """Any text file, written atomically."""
    write_text_atomic(path, text)


def write_json(path: str | Path, obj: Any) -> None:
    """Strict JSON (allow_nan=False), indented, written atomically."""
    text = json.dumps(json_ready(obj), indent=1, allow_nan=False) + "\n"
    write_text_atomic(path, text)


# The long spectra table of the condition stage: one row per singular value (or covariance eigenvalue) of
# every matrix, variant and head. Parquet, typed and compressed: a 1B checkpoint's table is ~120 MB as CSV,
# so it lives in the DVC cache, not in git. pyarrow writes the same bytes for the same rows.
SPECTRA_SCHEMA = pa.schema([("run", pa.string()), ("matrix", pa.string()), ("kind", pa.string()),
                            ("layer", pa.int32()), ("variant", pa.string()), ("head", pa.int32()),
                            ("quantity", pa.string()), ("index", pa.int32()), ("value", pa.float64()),
                            ("value_over_median", pa.float64())])


def write_spectra(path: str | Path, rows: Iterable[Sequence]) -> None:
    """The spectra table as Parquet (SPECTRA_SCHEMA's columns, in order), written atomically."""
    columns = list(zip(*rows, strict=True)) or [[] for _ in SPECTRA_SCHEMA]
    arrays = [pa.array(c, type=f.type) for c, f in zip(columns, SPECTRA_SCHEMA, strict=True)]
    table = pa.Table.from_arrays(arrays, schema=SPECTRA_SCHEMA)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def read_spectra(path: str | Path, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """The spectra table (or some of its columns); a ResultsError naming the file when it cannot be read."""
    try:
        return pq.read_table(path, columns=list(columns) if columns else None).to_pandas()
    except (OSError, pa.ArrowException) as e:
        raise ResultsError(f"{path}: not a readable spectra table ({e})") from e


def read_json(path: str | Path, what: str) -> Any:
    """A results JSON file (any JSON value); a ResultsError naming the file when it is missing or not JSON."""
    return files.read_json(path, ResultsError, what, mapping=False)


# ----------------------------------------------------------------------------------------------------------
# The train stage's outputs
def train_dir(root: str | Path, spec: RunSpec) -> Path:
    return Path(root) / layout.train_results_dir(spec.cell, spec.name)


def read_summary(root: str | Path, spec: RunSpec) -> dict:
    """summary.json of one run, checked to belong to this run and to carry a known status."""
    path = train_dir(root, spec) / "summary.json"
    if not path.is_file():
        raise ResultsError(f"{path}: train summary not found (train run {spec.name} first)")
    summary = files.read_json(path, ResultsError)
    if summary.get("run") != spec.name:
        raise ResultsError(f"{path}: summary is for run {summary.get('run')!r}, expected {spec.name!r}")
    if summary.get("status") not in STATUSES:
        raise ResultsError(f"{path}: status is {summary.get('status')!r}; allowed: {', '.join(STATUSES)}")
    if "final_val_loss" not in summary:
        raise ResultsError(f"{path}: missing key 'final_val_loss'")
    if summary["status"] == "completed" and summary["final_val_loss"] is None:
        # train writes a number for every completed run; skipping this one would change the speed-up.
        raise ResultsError(f"{path}: status is 'completed' but final_val_loss is null")
    return summary


OBSERVED = ("angular_rate", "relative_change", "kappa")  # what an evaluation point observes of the weights


def _metrics_rows(root: str | Path, spec: RunSpec, fields: Sequence[str]
                  ) -> dict[str, list[tuple[float, Any]]]:
    """{field: [(tokens, value)] over the rows of a run's metrics.jsonl that have it}, in one pass."""
    path = train_dir(root, spec) / "metrics.jsonl"
    if not path.is_file():
        raise ResultsError(f"{path}: train metrics not found (train run {spec.name} first)")
    out: dict[str, list[tuple[float, Any]]] = {name: [] for name in fields}
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ResultsError(f"{path}:{lineno}: not valid JSON: {err}") from None
            for name in fields:
                if row.get(name) is None:
                    continue
                if "tokens" not in row:
                    raise ResultsError(f"{path}:{lineno}: a row with {name} lacks 'tokens'")
                out[name].append((float(row["tokens"]), row[name]))
    return out


def _val_curve(rows: Iterable[tuple[float, Any]]) -> list[tuple[float, float]]:
    curve = [(tokens, float(loss)) for tokens, loss in rows]
    return sorted((tokens, loss) for tokens, loss in curve if math.isfinite(loss))


def _observed(rows: Iterable[tuple[float, Any]]) -> list[tuple[float, dict[str, float]]]:
    return sorted(((tokens, {name: read_float(v) for name, v in values.items() if v is not None})
                   for tokens, values in rows), key=lambda point: point[0])


def read_metrics(root: str | Path, spec: RunSpec, observed: Sequence[str] = OBSERVED
                 ) -> tuple[list[tuple[float, float]], dict[str, list[tuple[float, dict[str, float]]]]]:
    """(the validation curve: (tokens, val_loss) at every evaluation point in token order, non-finite losses
    dropped; {field: [(tokens, {name: value})] in token order ("inf" read as inf, null dropped; empty for a
    run trained before the observations existed)} for each of `observed`), from one pass over
    metrics.jsonl."""
    rows = _metrics_rows(root, spec, ["val_loss", *observed])
    return _val_curve(rows["val_loss"]), {name: _observed(rows[name]) for name in observed}


@dataclass(frozen=True)
class RunResult:
    """What the speed-up estimator needs from one run."""

    spec: RunSpec
    status: str
    final_val_loss: float  # nan when the run diverged before any evaluation
    curve: list[tuple[float, float]] = field(default_factory=list)
    # (tokens, {name: value}) per field of OBSERVED at the run's evaluation points; empty for a run trained
    # before the observations existed (or read without its curve)
    observed: dict[str, list[tuple[float, dict[str, float]]]] = field(default_factory=dict)

    @property
    def usable(self) -> bool:
        """Completed with a finite final loss: only such runs enter the speed-up (diverged: ignored)."""
        return self.status == "completed" and math.isfinite(self.final_val_loss)


def read_run_result(root: str | Path, spec: RunSpec, with_curve: bool = True) -> RunResult:
    summary = read_summary(root, spec)
    try:
        loss = math.nan if summary["final_val_loss"] is None else float(summary["final_val_loss"])
    except (TypeError, ValueError):
        path = train_dir(root, spec) / "summary.json"
        raise ResultsError(f"{path}: final_val_loss {summary['final_val_loss']!r} is not a number") from None
    curve, observed = read_metrics(root, spec) if with_curve else ([], {})
    return RunResult(spec=spec, status=summary["status"], final_val_loss=loss, curve=curve, observed=observed)
