"""Damaged outputs, seen by the workflow before any job: a truncated token shard or checkpoint.

Snakemake decides what to run from which files exist and their lineage keys; a file that exists but was cut
short (a full disk, a copy killed midway, a sync gone wrong) would stand as done, and only a later stage
would trip on it. So each start checks what can be checked cheaply: a shard's size against the bytes its
meta.json records, a checkpoint's safetensors structure (header, and the file as long as the header says).
A damaged file stops the workflow with one line that names it and the commands that repair it; nothing is
deleted here. A changed byte inside a file of the right size is DVC's to see: `dvc status` hashes every
output, and `dvc checkout` restores it.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable
from pathlib import Path

from ngptlab.errors import DataError
from ngptlab.prepare.shards import load_meta, verify_shards


def shard_damage(tokens_dir: Path) -> str | None:
    """Why a source's shards are damaged (prepare.shards.verify_shards without reading them: their sizes
    against meta.json), or None; nothing to check before prepare has written meta.json and both shards, or
    where meta.json is not one (prepare itself refuses it)."""
    if not all((tokens_dir / name).is_file() for name in ("meta.json", "train.bin", "val.bin")):
        return None
    try:
        load_meta(tokens_dir)
    except DataError:
        return None
    try:
        verify_shards(tokens_dir, hashes=False)
    except DataError as err:
        return str(err)
    return None


def checkpoint_damage(path: Path) -> str | None:
    """Why a safetensors file is damaged (its header unreadable, or the file shorter or longer than the
    tensors the header lists), or None; nothing to check where it does not exist."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            prefix = f.read(8)
            if len(prefix) < 8:
                return f"{path}: {size} bytes, too short for a safetensors header"
            (header_len,) = struct.unpack("<Q", prefix)
            if 8 + header_len > size:
                return f"{path}: its header claims {header_len:,} bytes of a {size:,}-byte file (truncated)"
            header = json.loads(f.read(header_len))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        return f"{path}: unreadable safetensors header ({err})"
    ends = [entry["data_offsets"][1] for name, entry in header.items() if name != "__metadata__"]
    expected = 8 + header_len + max(ends, default=0)
    if size != expected:
        return f"{path}: {size:,} bytes, but its header lists tensors up to {expected:,} (truncated)"
    return None


def damage(tokens_dir: Path, runs: Iterable[tuple[Path, Path]]) -> str | None:
    """The first damaged output, as one line with its repair; `runs` gives each run's (run directory,
    results directory), relative to the project root."""
    problem = shard_damage(tokens_dir)
    if problem:
        return (f"{problem}; restore it with `dvc checkout {tokens_dir}`, or delete {tokens_dir} and run "
                f"snakemake again (prepare writes the same bytes)")
    for run_dir, results_dir in runs:
        problem = checkpoint_damage(run_dir / "model.safetensors")
        if problem:
            return (f"{problem}; restore it with `dvc checkout {run_dir}/model.safetensors`, or delete "
                    f"{run_dir} and {results_dir} and run snakemake again (it retrains that run)")
    return None
