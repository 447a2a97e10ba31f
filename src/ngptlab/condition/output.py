"""Writing results: strict JSON (no NaN/Infinity tokens) and CSV, always to a temp name then os.replace.

JSON encoding of non-finite floats, used by every results/ file of the condition and speedup stages:
- +inf (a numerically singular matrix's condition number, see condition/metrics.py) -> the string "inf";
  `float(value)` reads it back as math.inf.
- nan (a metric that does not exist, e.g. the stable rank of a zero matrix) -> null.
null therefore means "not applicable / not measured", and "inf" means "measured: numerically singular".
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ngptlab.files import atomic_path, write_text_atomic


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


def write_csv(path: str | Path, header: Sequence[str], rows: Iterable[Sequence]) -> None:
    """A CSV with a header row, written atomically; nan cells are left empty."""
    def write(f) -> None:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(header)
        for row in rows:
            writer.writerow(["" if isinstance(v, float) and math.isnan(v) else v for v in row])

    with atomic_path(path) as tmp, open(tmp, "w", newline="") as f:
        write(f)
