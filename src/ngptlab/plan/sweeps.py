"""What the finished runs say, for `ngptlab plan --prune-sweeps`, `--add-seeds` and `--check-tuning`: the
results under a results root as a result lookup (ngptlab.speedup.lr_policy.ResultOf), read by the same
learning-rate policy as the speed-up stage, and which runs have trained (the pruning keeps those). A planted
world's runs held in memory (ngptlab.design) are read through a lookup of their own."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ngptlab.grid.runs import RunSpec
from ngptlab.results import RunResult, read_run_result, train_dir
from ngptlab.speedup.lr_policy import ResultOf


def trained_on_disk(root: str | Path) -> Callable[[RunSpec], bool]:
    """Whether a run has trained: its summary.json is under root (the train stage writes it last)."""
    return lambda spec: (train_dir(root, spec) / "summary.json").is_file()


def on_disk(root: str | Path) -> ResultOf:
    """The results under root (final losses only): None for a run without a summary yet."""
    trained = trained_on_disk(root)

    def result_of(spec: RunSpec) -> RunResult | None:
        return read_run_result(root, spec, with_curve=False) if trained(spec) else None
    return result_of
