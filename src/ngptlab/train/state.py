"""Resumable training state, without pickle.

Layout under runs/<cell>/<run>/state/:
    latest.json                    {"checkpoint": "ckpt-00000040-<ns>", "step": 40}   (the commit point)
    ckpt-00000040-<ns>/model.safetensors       weights + run config (ngptlab.checkpoint format)
    ckpt-00000040-<ns>/optimizer.safetensors   AdamW moments and step counts, torch RNG states (and the
                                               rotational step's state: models/rotational.py)
    ckpt-00000040-<ns>/state.json              the job's progress record (train/progress.py), the
                                               optimizer's scalars and parameter groups
    ckpt-00000040-<ns>/interval.safetensors    where the angular update rate's interval starts: its step
                                               and, between evaluation points, the effective matrices
                                               there (observe/angular.py) and the per-step angles summed
                                               since (observe/step_angle.py), so the next row is the same
    metrics.jsonl                  the metrics log while the run is in progress

A checkpoint is written into a fresh directory and only then made current by atomically replacing
latest.json, so a kill -9 at any moment leaves either the previous checkpoint or the new one, never a mix.
Older checkpoint directories are deleted after the switch. The data position needs no saving: batches are a
pure function of (seed, step). The whole state/ directory is deleted once the run's final outputs exist.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import torch

from ngptlab import weight_dtype as weight_dtypes
from ngptlab.checkpoint import (
    atomic_save_tensors,
    load_weights,
    read_config,
    read_tensors,
    tensors_sha256,
    write_model,
)
from ngptlab.errors import CheckpointError
from ngptlab.files import read_json, write_json_atomic
from ngptlab.observe.angular import AngleSums, IntervalStart
from ngptlab.train.identity import mismatch
from ngptlab.train.progress import Progress

LATEST = "latest.json"
METRICS = "metrics.jsonl"
INTERVAL = "interval.safetensors"
STEP_ANGLE_SUMS = "step_angle.sums"  # in INTERVAL: the per-step angles summed so far (observe/step_angle.py)


def _optimizer_tensors(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Flatten optimizer.state_dict()['state'] into named tensors; non-tensor values go to JSON."""
    tensors, scalars = {}, {}
    for index, per_param in optimizer.state_dict()["state"].items():
        for key, value in per_param.items():
            if isinstance(value, torch.Tensor):
                tensors[f"state.{index}.{key}"] = value.detach().to("cpu", copy=True).contiguous()  # one copy
            else:
                scalars[f"{index}.{key}"] = value
    return tensors, scalars


def _group_layout(optimizer: torch.optim.Optimizer) -> list[dict[str, Any]]:
    """What must match for saved moments to belong to the same parameters: sizes and shapes per group."""
    return [{"shapes": [list(p.shape) for p in group["params"]], "weight_decay": group["weight_decay"]}
            for group in optimizer.param_groups]


def save_state(state_dir: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, config: dict,
               progress: Progress, interval: IntervalStart) -> None:
    """Write a complete checkpoint for step progress.step and make it the current one; `interval`: where the
    angular update rate's interval that the step falls in starts (observe/observer.py, interval_start)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    name = f"ckpt-{progress.step:08d}-{time.time_ns()}"
    ckpt = state_dir / name
    ckpt.mkdir()
    write_model(ckpt / "model.safetensors", model, config)  # the tensor hash only: each byte hashed once
    tensors, scalars = _optimizer_tensors(optimizer)
    tensors["rng.cpu"] = torch.get_rng_state()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for i, rng in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng.cuda.{i}"] = rng
    atomic_save_tensors(ckpt / "optimizer.safetensors", tensors, {"tensors_sha256": tensors_sha256(tensors)})
    write_json_atomic(ckpt / "state.json", {**progress.to_dict(), "optimizer_scalars": scalars,
                                            "optimizer_groups": _group_layout(optimizer)})
    _save_interval(ckpt / INTERVAL, interval)
    write_json_atomic(state_dir / LATEST, {"checkpoint": name, "step": progress.step})  # the commit point
    for old in state_dir.glob("ckpt-*"):
        if old.name != name:
            shutil.rmtree(old, ignore_errors=True)


def saved_identity(state_dir: Path) -> dict | None:
    """The identity (train/identity.py) the current checkpoint of `state_dir` was made under; None if it
    records none (CheckpointError if unreadable)."""
    latest = read_json(state_dir / LATEST, CheckpointError)
    record = read_json(state_dir / str(latest.get("checkpoint", "")) / "state.json", CheckpointError)
    return record.get("identity")


def _save_interval(path: Path, interval: IntervalStart) -> None:
    tensors = {name: matrix.detach().to("cpu", copy=True).contiguous()
               for name, matrix in interval.matrices.items()}
    metadata = {"step": str(interval.step)}
    if interval.step_angles is not None:  # a name no matrix has (theirs are module paths)
        tensors[STEP_ANGLE_SUMS] = interval.step_angles.sums.detach().to("cpu", copy=True)
        metadata["step_angle_steps"] = str(interval.step_angles.steps)
    atomic_save_tensors(path, tensors, {**metadata, "tensors_sha256": tensors_sha256(tensors)})


def load_interval(state_dir: Path) -> IntervalStart:
    """Where the angular interval of the current checkpoint's step starts (save_state's `interval`).

    CheckpointError if the checkpoint has none (written before checkpoints kept it: the resumed run's next
    evaluation row could not be the uninterrupted run's), or if it is unreadable or incomplete.
    """
    latest = read_json(state_dir / LATEST, CheckpointError)
    ckpt = state_dir / str(latest.get("checkpoint", ""))
    path = ckpt / INTERVAL
    if not path.is_file():
        raise CheckpointError(f"{ckpt}: no {INTERVAL}, where the angular update rate's interval starts (a "
                              f"checkpoint of an older ngptlab); resumed from it, the run's next evaluation "
                              f"row would differ from an uninterrupted run's: delete {state_dir} (or pass "
                              f"--fresh) to start this run over")
    tensors, metadata = read_tensors(path)
    step = int(metadata.get("step", -1))
    saved_at = int(latest.get("step", -1))
    sums = tensors.pop(STEP_ANGLE_SUMS, None)
    angles = None if sums is None else AngleSums(sums, int(metadata.get("step_angle_steps", -1)))
    if not 0 <= step <= saved_at or (step < saved_at and not tensors):
        raise CheckpointError(f"{path}: an interval starting at step {step} does not fit the checkpoint of "
                              f"step {saved_at}")
    if step < saved_at and (angles is None or angles.steps < 0):
        raise CheckpointError(f"{path}: no per-step angles summed over the interval (a checkpoint of an "
                              f"older ngptlab); resumed from it, the run's next evaluation row would differ "
                              f"from an uninterrupted run's: delete {state_dir} (or pass --fresh) to start "
                              f"this run over")
    return IntervalStart(step, tensors, angles)


def load_state(
    state_dir: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, identity: dict
) -> Progress | None:
    """Restore weights, optimizer moments and RNG from the current checkpoint; return its progress record.

    None if there is no checkpoint. CheckpointError naming the file if it is corrupt, or was made under
    another identity (train/identity.py: other settings that shape the job, or none recorded), or does not
    fit this model/optimizer.
    """
    latest_path = state_dir / LATEST
    if not latest_path.is_file():
        return None
    latest = read_json(latest_path, CheckpointError)
    ckpt = state_dir / str(latest.get("checkpoint", ""))
    if not latest.get("checkpoint") or not ckpt.is_dir():
        raise CheckpointError(f"{latest_path}: points to missing checkpoint {latest.get('checkpoint')!r}")
    model_path = ckpt / "model.safetensors"
    config = read_config(model_path)
    check_weight_dtype(model_path, config, identity, state_dir)
    record = read_json(ckpt / "state.json", CheckpointError)
    differs = mismatch(record.get("identity"), identity)
    if differs:
        raise CheckpointError(f"{ckpt / 'state.json'}: checkpoint belongs to a run with different settings "
                              f"({differs}); delete {state_dir} (or pass --fresh) to start this run over")
    if config.get("arm") != identity.get("arm"):
        raise CheckpointError(f"{model_path}: checkpoint is arm {config.get('arm')!r}, "
                              f"this run is {identity.get('arm')!r}")
    weights, _ = read_tensors(model_path)
    load_weights(model_path, model, weights, what=f"this run's {identity.get('arm')} model")

    opt_path = ckpt / "optimizer.safetensors"
    tensors, _ = read_tensors(opt_path)
    if record.get("optimizer_groups") != _group_layout(optimizer):
        raise CheckpointError(f"{opt_path}: optimizer parameter groups do not match this run's model")
    _restore_optimizer(opt_path, optimizer, tensors, record.get("optimizer_scalars", {}))
    torch.set_rng_state(tensors["rng.cpu"])
    cuda_states = [tensors[k] for k in sorted(tensors) if k.startswith("rng.cuda.")]
    if cuda_states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda_states[: torch.cuda.device_count()])
    return Progress.from_dict(record)


def check_weight_dtype(model_path: Path, config: dict, identity: dict, state_dir: Path) -> None:
    """Refuse a checkpoint whose weights and AdamW state are stored in another dtype than this run's
    (train.weight_dtype): resuming would silently change the run's precision."""
    saved, wanted = weight_dtypes.of_record(config.get("spec", {})), weight_dtypes.of_record(identity)
    if saved != wanted:
        raise CheckpointError(f"{model_path}: checkpoint stores its weights and optimizer state in {saved}, "
                              f"this run trains in {wanted} (train.weight_dtype); delete {state_dir} (or "
                              f"pass --fresh) to start this run over")


def _restore_optimizer(path: Path, optimizer: torch.optim.Optimizer, tensors: dict, scalars: dict) -> None:
    params = [p for group in optimizer.param_groups for p in group["params"]]
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        if key.startswith("state."):
            _, index, name = key.split(".", 2)
            state.setdefault(int(index), {})[name] = value
    for key, value in scalars.items():
        index, name = key.split(".", 1)
        state.setdefault(int(index), {})[name] = value
    for index, per_param in state.items():
        if index >= len(params):
            raise CheckpointError(f"{path}: optimizer state for parameter {index}, "
                                  f"but the model has {len(params)}")
        # master: a bf16 rotational matrix's (models/rotational.py); momentum_buffer: a Muon matrix's
        for name in ("exp_avg", "exp_avg_sq", "master", "momentum_buffer"):
            if name in per_param and per_param[name].shape != params[index].shape:
                raise CheckpointError(f"{path}: {name} of parameter {index} has shape "
                                      f"{list(per_param[name].shape)}, "
                                      f"parameter is {list(params[index].shape)}")
    # The current param_groups (lr set by the schedule each step anyway) with the saved per-parameter state.
    optimizer.load_state_dict({"state": state, "param_groups": optimizer.state_dict()["param_groups"]})


def discard_state(state_dir: Path) -> None:
    shutil.rmtree(state_dir, ignore_errors=True)
