"""Where a run's artifacts live, whether they are done, and the final write of its outputs.

Final outputs (written only when the run ends, completed or diverged; summary.json last, so its presence
means the run is done and a rerun is a no-op):
    runs/<cell>/<run>/model.safetensors      final weights, run config in the header (ngptlab.checkpoint)
    runs/<cell>/<run>/config.json            the same config, for people and DVC
    results/train/<cell>/<run>/metrics.jsonl one row per logged step
    results/train/<cell>/<run>/summary.json  status, final val loss, tokens, provenance
    results/timing/<cell>/<run>.json         wall time, tokens/s and MFU per logged step, how they were
                                             measured, peak GPU memory, the execution settings it ran with

(paths from ngptlab.layout).

The summary's final_val_loss (with final_val_loss_se and final_eval: which windows) is the run's final
evaluation, on windows of its own (ngptlab.train.final_eval). The metrics' val_loss is the cheap eval windows'
loss at every evaluation, the last one at the budget included, so the curve stays one series: its last point
is not final_val_loss.

Everything under runs/ and results/train/ is a pure function of the run's inputs (the same run trained twice
gives the same bytes), so downstream stages that read it rerun only when it really changed. Timings differ
every time: they go to results/timing/, which only the report (the last stage) reads, and so do the
settings of how a run ran (train/execution.py), which change none of its other bytes.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

from ngptlab import layout
from ngptlab.checkpoint import save_model
from ngptlab.errors import CheckpointError
from ngptlab.files import write_json_atomic, write_text_atomic
from ngptlab.grid.runs import RunSpec
from ngptlab.models.registry import count_parameters
from ngptlab.train import final_eval, state, timing
from ngptlab.train.identity import mismatch
from ngptlab.train.outcome import Outcome
from ngptlab.train.throughput import MFU_NOTE, mfu_of

# Measured, not computed: they differ from one identical run to the next, so they are written to the run's
# timing file (RunPaths.timing), which only the report reads, never to the metrics or summary that the
# stages between train and the report read.
TIMING_KEYS = ("tokens_per_s", "mfu")


@dataclass(frozen=True)
class RunPaths:
    tokens_dir: Path
    run_dir: Path
    results_dir: Path
    timing: Path
    tensorboard: Path  # the curves as event files (ngptlab.tensorboard_view)

    @classmethod
    def for_run(cls, root: str | Path, source: str, cell: str, run: str) -> RunPaths:
        root = Path(root)
        return cls(root / layout.tokens_dir(source), root / layout.run_dir(cell, run),
                   root / layout.train_results_dir(cell, run), root / layout.timing_file(cell, run),
                   root / layout.tensorboard_dir(cell, run))

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


def finished(paths: RunPaths, run: str, expected: dict) -> bool:
    """True if this run's final outputs exist and were made as `expected` (its identity, train/identity.py);
    False if not there.

    Final outputs made otherwise (other settings, or before summaries recorded an identity) are an error
    naming what differs, not something to overwrite silently nor to call done.
    """
    if not paths.summary.is_file():
        return False
    try:
        summary = json.loads(paths.summary.read_text())
        found = summary.get("identity")
    except (json.JSONDecodeError, AttributeError) as err:
        raise CheckpointError(f"{paths.summary}: unreadable summary ({err}); "
                              f"delete it to retrain {run}") from None
    differs = (f"run {summary.get('run')!r} on disk" if summary.get("run") != run
               else mismatch(found, expected))
    if differs:
        raise CheckpointError(f"{paths.summary}: outputs of {run} exist for other settings ({differs}); "
                              f"delete {paths.results_dir} and {paths.run_dir} to retrain")
    if not paths.model.is_file():
        raise CheckpointError(f"{paths.summary} says {run} is done but {paths.model} is missing; "
                              f"delete {paths.results_dir} to retrain")
    return True


def finite_or_none(value: float | None) -> float | None:
    """JSON has no NaN/inf: non-finite numbers are written as null (diagnostics keep them as strings)."""
    return value if value is not None and math.isfinite(value) else None


def unmeasured_timing(run: str) -> dict:
    """The timing file of a run that finished before timing files existed: nothing measured."""
    return {"run": run, "tokens_per_s": None, "mfu": None,
            "note": "not measured: the run finished before timing files existed"}


def timing_record(run: str, outcome: Outcome, rows: list[dict]) -> dict:
    """results/timing/<cell>/<run>.json: the run's throughput and MFU overall and per logged row, and the
    tokens it trained itself (a WSD branch: from its trunk's state on).

    tokens_per_s is the tokens of the timed steps over the time spent in them (forward, backward, update;
    not the evaluations and checkpoints, which wall_s includes, nor the steps of excluded_steps: compiling,
    recompiling, warming up a GPU, computed twice; train/timing.py), so train_s times timed_steps = steps -
    the excluded ones; timing_method says how they were timed, mfu_note what FLOPs MFU counts. mfu divides
    tokens_per_s by the peak named beside it. The final evaluation, after the last step, is in neither:
    final_eval_s is its own. A row's tokens_per_s covers the timed steps read since the row before it (on a
    GPU, up to the one before the row's own step, whose CUDA events may not have completed yet); null if
    none (a row of compile steps only). execution: the settings of how it ran (train/execution.py), those of
    its last job.
    """
    progress, params, tokens = outcome.progress, outcome.params, outcome.tokens
    train_s = progress.train_s or 0.0
    timed = int(progress.timed_steps)
    tokens_per_s = timed * params["batch_tokens"] / train_s if train_s > 0 and timed else None
    world = params["world_size"]
    utilisation = mfu_of(outcome.flops_per_token, tokens_per_s, outcome.peak.flops, world)
    started = progress.started_at or 0  # a WSD branch: the trunk's step it started from
    excluded = {reason: int(progress.excluded_steps.get(reason, 0)) for reason in timing.REASONS}
    return {"run": run, "wall_s": round(outcome.wall_s, 3), "train_s": round(train_s, 6),
            "steps": outcome.steps, "tokens": tokens, "started_at_step": started,
            "trained_tokens": tokens - started * params["batch_tokens"],  # by this run's own jobs
            "timed_steps": timed, "excluded_steps": excluded,
            "excluded_s": round(progress.excluded_s or 0.0, 6),
            "timing_method": outcome.timing_method,
            "tokens_per_s": tokens_per_s, "mfu": utilisation, "mfu_note": MFU_NOTE,
            "final_eval_s": round(outcome.final.seconds, 6) if outcome.final else None,
            "flops_per_token": outcome.flops_per_token, "world_size": world, "device": params["device"],
            "precision": params["precision"], "compile": params["compile"], **outcome.peak.as_dict(),
            "attention_backend": outcome.attention_backend,
            "nonfinite_retries": len(progress.nonfinite_retries),
            "max_memory_allocated_mib": progress.max_memory_allocated_mib,
            "max_memory_reserved_mib": progress.max_memory_reserved_mib,
            "execution": outcome.execution,
            "rows": [{key: row[key] for key in ("step", "tokens", *TIMING_KEYS) if key in row}
                     for row in rows]}


def write_run_outputs(spec: RunSpec, paths: RunPaths, outcome: Outcome, identity: dict) -> None:
    """Weights, config, metrics, then the summary last: its presence marks the run as done, as made from
    `identity` (train/identity.py), which a rerun compares."""
    config, progress, diagnostics = outcome.config, outcome.progress, outcome.diagnostics
    status = "diverged" if diagnostics else "completed"
    sha = save_model(paths.model, outcome.model, config)
    write_json_atomic(paths.config, config)
    rows = [json.loads(line) for line in (paths.state_dir / state.METRICS).read_text().splitlines()]
    write_json_atomic(paths.timing, timing_record(spec.name, outcome, rows))
    write_text_atomic(paths.metrics, "".join(
        json.dumps({k: v for k, v in row.items() if k not in TIMING_KEYS}, allow_nan=False) + "\n"
        for row in rows))
    eval_hash = hashlib.sha256(outcome.eval_offsets.tobytes()).hexdigest()
    final = None if diagnostics else outcome.final  # a completed run's (train/final_eval.py)
    summary = {
        "run": spec.name,
        "spec": spec.as_dict(),
        "status": status,
        "final_val_loss": None if final is None else final.loss,  # finite, or the run diverged
        "final_val_loss_se": None if final is None else finite_or_none(final.se),
        "final_eval": final_eval.record(outcome.final_offsets, spec.context),  # diverged: never read
        "tokens": outcome.tokens,
        "steps": outcome.steps,
        "n_params": count_parameters(outcome.model),
        "flops_per_token": outcome.flops_per_token,
        "train_flops": outcome.flops_per_token * outcome.tokens,
        "checkpoint_sha256": sha,
        "data": config["data"],
        "eval_windows_sha256": eval_hash,
        "code_revision": config["code_revision"],
        "params": outcome.params,  # what the run used, derived values included: for people and the report
        "identity": identity,  # what it is made from: a rerun under another is refused (train/identity.py)
        "resumed_from": progress.resumed_from,
        "diagnostics": diagnostics,
        # the attention kernel the run ended on, and the steps computed again after a non-finite loss or
        # gradient norm (train/attention.py): [{step, tokens, backend_before, backend_after, outcome, ...}]
        "attention_backend": outcome.attention_backend,
        "nonfinite_retries": progress.nonfinite_retries,
        "threads": outcome.threads,  # the CPU threads each process computed with (train/threads.py)
    }
    write_json_atomic(paths.summary, summary)
    state.discard_state(paths.state_dir)
