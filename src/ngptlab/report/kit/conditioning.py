"""A run's conditioning result as the report reads it (results/conditioning/<run>.json and its
.spectra.parquet, written by the condition stage): headline numbers, one matrix's entry, one spectrum, and
the references (the same run at initialisation, Gaussian matrices of the same shape)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from ngptlab.report.kit.load import RunRecord
from ngptlab.results import read_float, read_spectra


def headline_value(record: RunRecord | None, key: str, variant: str = "effective") -> float | None:
    """A headline number of a run as a float (inf for singular), None when absent."""
    if record is None:
        return None
    value = record.headline(variant).get(key)
    return None if value is None else read_float(value)


def matrix_entry(record: RunRecord, kind: str, layer: int | None, variant: str = "effective") -> dict | None:
    """The analysis of one matrix (kind, layer; layer None for the embeddings) in one variant, or None."""
    for entry in (record.conditioning or {}).get("matrices", {}).values():
        if entry["kind"] == kind and entry["layer"] == layer:
            return entry["variants"].get(variant)
    return None


def reference_value(record: RunRecord, source: str, key: str) -> float | None:
    """A headline κ of the effective matrices: trained, at initialisation (same seed) or the Gaussian median
    for the same shape; None where the conditioning result has no such number."""
    if source == "trained":
        value = record.headline("effective").get(key)
    else:
        ref = (record.conditioning or {}).get("reference", {}).get(source, {}).get("headline", {})
        value = ref.get("effective", {}).get(key) if source == "init" else ref.get(key)
    return None if value is None else read_float(value)


SPECTRA_COLUMNS = ["matrix", "kind", "layer", "variant", "head", "quantity", "index", "value",
                   "value_over_median"]


@lru_cache(maxsize=4)
def _read_spectra(path: str, mtime_ns: int, size: int) -> pd.DataFrame:
    # Keyed by mtime and size too, so a rewritten file is read again.
    return read_spectra(path, SPECTRA_COLUMNS)


def _spectra(path: Path) -> pd.DataFrame:
    stat = path.stat()
    return _read_spectra(str(path), stat.st_mtime_ns, stat.st_size)


def spectrum(record: RunRecord, kind: str, quantity: str, layer: int = -1, variant: str = "effective",
             head: int = -1) -> np.ndarray | None:
    """One spectrum (descending) from a run's spectra table, or None."""
    if record.spectra_path is None:
        return None
    df = _spectra(record.spectra_path)
    sel = df[(df["kind"] == kind) & (df["layer"] == layer) & (df["variant"] == variant) & (df["head"] == head)
             & (df["quantity"] == quantity)].sort_values("index")
    return sel["value_over_median"].to_numpy() if len(sel) else None
