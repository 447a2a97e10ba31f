"""Where a run's artifacts live, what identifies its trajectory, and the final write of its outputs.

Final outputs (written only when the run ends, completed or diverged; summary.json last, so its presence
means the run is done and a rerun is a no-op):
    runs/<cell>/<run>/model.safetensors      final weights, run config in the header (ngptlab.checkpoint)
    runs/<cell>/<run>/config.json            the same config, for people and DVC
    results/train/<cell>/<run>/metrics.jsonl one row per logged step
    results/train/<cell>/<run>/summary.json  status, final val loss, tokens, provenance
    results/timing/<cell>/<run>.json                wall time, tokens/s and MFU per logged step

(paths from ngptlab.layout).

Everything under runs/ and results/train/ is a pure function of the run's inputs (the same run trained twice
gives the same bytes), so downstream stages that read it rerun only when it really changed. Timings differ
every time: they go to results/timing/, which only the report (the last stage) reads.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ngptlab import layout
from ngptlab.errors import CheckpointError

# Settings that change a run's trajectory or its final val loss. A checkpoint or a finished run written
# with other values belongs to a different run. (micro_batch_tokens, device, compile and world size only
# change float rounding or speed, so a run may resume under different ones.)
TRAJECTORY_KEYS = ("batch_sequences", "steps", "warmup_steps", "grad_clip", "diverge_loss",
                   "eval_windows", "eval_seed", "vocab_multiple")
TRAJECTORY_DEFAULTS = {"vocab_multiple": 1}  # optional keys: absent (older runs included) = this value


@dataclass(frozen=True)
class RunPaths:
    tokens_dir: Path
    run_dir: Path
    results_dir: Path
    timing: Path

    @classmethod
    def for_run(cls, root: str | Path, source: str, cell: str, run: str) -> RunPaths:
        root = Path(root)
        return cls(root / "data" / "tokens" / source, root / layout.run_dir(cell, run),
                   root / layout.train_results_dir(cell, run), root / layout.timing_file(cell, run))

    @property
    def state_dir(self) -> Path:
        return self.run_dir / "state"

    @property
    def model(self) -> Path:
        return self.run_dir / "model.safetensors"

    @property
    def config(self) -> Path:
        return self.run_dir / "config.json"

    @property
    def metrics(self) -> Path:
        return self.results_dir / "metrics.jsonl"

    @property
    def summary(self) -> Path:
        return self.results_dir / "summary.json"


def fingerprint(spec: dict, params: dict, data: dict) -> dict[str, Any]:
    """The identity of a run's trajectory: its spec, the trajectory settings, and the data hashes."""
    return {**spec, **{key: params.get(key, TRAJECTORY_DEFAULTS.get(key)) for key in TRAJECTORY_KEYS},
            "train_sha256": data.get("train_sha256"), "val_sha256": data.get("val_sha256")}


def finished(paths: RunPaths, run: str, expected: dict) -> bool:
    """True if this run's final outputs exist and match `expected` (a fingerprint); False if not there.

    Final outputs of a different trajectory are an error, not something to overwrite silently.
    """
    if not paths.summary.is_file():
        return False
    try:
        summary = json.loads(paths.summary.read_text())
        found = fingerprint(summary["spec"], summary["params"], summary["data"])
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise CheckpointError(f"{paths.summary}: unreadable summary ({err}); "
                              f"delete it to retrain {run}") from None
    if summary.get("run") != run or found != expected:
        differing = sorted(k for k in set(found) | set(expected) if found.get(k) != expected.get(k))
        what = ", ".join(differing) or "run name"
        raise CheckpointError(f"{paths.summary}: outputs of {run} exist for other settings ({what} differ); "
                              f"delete {paths.results_dir} and {paths.run_dir} to retrain")
    if not paths.model.is_file():
        raise CheckpointError(f"{paths.summary} says {run} is done but {paths.model} is missing; "
                              f"delete {paths.results_dir} to retrain")
    return True


def finite_or_none(value: float | None) -> float | None:
    """JSON has no NaN/inf: non-finite numbers are written as null (diagnostics keep them as strings)."""
    return value if value is not None and math.isfinite(value) else None
