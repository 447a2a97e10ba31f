"""What the finished runs say, for `ngptlab plan --prune-sweeps` and `--add-seeds`: the results under a
results root as a result lookup (ngptlab.speedup.lr_policy.ResultOf), read by the same learning-rate
policy as the speed-up stage. A planted world's runs held in memory (ngptlab.design) are read through a
lookup of their own."""

from __future__ import annotations

from pathlib import Path

from ngptlab.grid.runs import RunSpec
from ngptlab.results import RunResult, read_run_result, train_dir
from ngptlab.speedup.lr_policy import ResultOf


def on_disk(root: str | Path) -> ResultOf:
    """The results under root (final losses only): None for a run without a summary yet."""
    def result_of(spec: RunSpec) -> RunResult | None:
        if not (train_dir(root, spec) / "summary.json").is_file():
            return None
        return read_run_result(root, spec, with_curve=False)
    return result_of
