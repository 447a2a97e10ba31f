"""Each run's results as its evaluation finishes, so that a retried evaluate job continues where the last
one stopped instead of from zero.

results/evaluate/<cell>.partial/<run>.json holds one run's entry (exactly what goes into `runs[]` of
results/evaluate/<cell>.json) and what it was made from: the checkpoint's sha256, the settings, the tasks'
description (with their data hashes) and lm-eval's version. A later job reuses the entry only when all of
those equal its own; a retrained checkpoint or a changed setting means evaluating the run again. The
directory is working state: removed once the cell's document is written, never a DVC output (.dvcignore).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ngptlab import layout
from ngptlab.results import json_ready, write_json

# The document's keys that every run's results depend on, beside the run's own checkpoint.
BASIS_KEYS = ("lm_eval_version", "settings", "tasks")


def partial_dir(root: str | Path, cell: str) -> Path:
    return Path(root) / layout.evaluate_partial_dir(cell)


def partial_file(root: str | Path, cell: str, run: str) -> Path:
    return Path(root) / layout.evaluate_partial_file(cell, run)


def made_from(head: dict[str, Any], checkpoint_sha256: str) -> dict[str, Any]:
    """What a run's results are made from: its checkpoint and the cell document's `BASIS_KEYS`, as JSON
    reads them back (so that a stored basis compares equal to a fresh one)."""
    basis = {"checkpoint_sha256": checkpoint_sha256, **{key: head[key] for key in BASIS_KEYS}}
    return json.loads(json.dumps(json_ready(basis)))


def write(root: str | Path, cell: str, entry: dict[str, Any], basis: dict[str, Any]) -> Path:
    """Store one run's entry and its basis, atomically: a job killed while writing leaves no half file."""
    path = partial_file(root, cell, entry["run"])
    write_json(path, {"made_from": basis, "entry": entry})
    return path


def read(root: str | Path, cell: str, run: str, basis: dict[str, Any]) -> tuple[dict | None, str | None]:
    """(the stored entry, None) when it can be reused; (None, why not) when a partial file exists but was
    made from something else or is unreadable; (None, None) when there is none."""
    path = partial_file(root, cell, run)
    if not path.is_file():
        return None, None
    try:
        stored = json.loads(path.read_text())
        stored_basis, entry = stored["made_from"], stored["entry"]
        if not (isinstance(stored_basis, dict) and isinstance(entry.get("results"), dict)
                and entry.get("run") == run):
            raise ValueError("not a partial entry of this run")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as err:
        return None, f"{path} is unreadable ({type(err).__name__}: {err})"
    changed = [key for key in basis if stored_basis.get(key) != basis[key]]
    if changed:
        return None, f"{', '.join(changed)} changed since its partial results were made"
    return entry, None


def remove(root: str | Path, cell: str) -> None:
    """Drop the cell's partial results (and any temporary file a killed write left there)."""
    shutil.rmtree(partial_dir(root, cell), ignore_errors=True)
