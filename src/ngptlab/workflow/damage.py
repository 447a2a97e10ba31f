"""Damaged outputs, seen by the workflow before any job: a truncated token shard or checkpoint.

Snakemake decides what to run from which files exist and their lineage keys; a file that exists but was cut
short (a full disk, a copy killed midway, a sync gone wrong) would stand as done, and only a later stage
would trip on it. So each start checks what can be checked cheaply: a shard's size against the bytes its
meta.json records, a checkpoint's safetensors structure (header, and the file as long as the header says).
A damaged file stops the workflow with one line that names it and the commands that repair it, each working
as printed in the project root; nothing is deleted here. A changed byte inside a file of the right size is
DVC's to see: `dvc status` hashes every output, and `dvc checkout --force` restores it.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ngptlab.errors import DataError
from ngptlab.prepare.shards import META_NAME, SPLITS, load_meta, verify_shards


@dataclass(frozen=True)
class Damage:
    path: Path  # the damaged file
    problem: str  # why, naming it


def shard_damage(tokens_dir: Path) -> Damage | None:
    """The first shard whose size disagrees with meta.json (prepare.shards.verify_shards without reading
    them), or None; nothing to check before prepare has written meta.json and both shards, or where meta.json
    is not one (prepare itself refuses it)."""
    if not all((tokens_dir / name).is_file() for name in (META_NAME, *(f"{s}.bin" for s in SPLITS))):
        return None
    try:
        meta = load_meta(tokens_dir)
    except DataError:
        return None
    for split in SPLITS:
        try:
            verify_shards(tokens_dir, hashes=False, splits=(split,))
        except DataError as err:
            return Damage(tokens_dir / meta["splits"][split].get("file", f"{split}.bin"), str(err))
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


def damage(root: str | Path, tokens_dir: str | Path, run_dirs: Iterable[str | Path]) -> str | None:
    """The first damaged output under `root` (`tokens_dir` and `run_dirs` relative to it), as one line with
    its two repairs, each a command to run in `root` as printed."""
    root = Path(root)
    found = shard_damage(root / tokens_dir)
    if found:
        return repair(found.problem, Path(tokens_dir) / found.path.name, "prepare writes the same bytes")
    for run_dir in run_dirs:
        model = Path(run_dir) / "model.safetensors"
        problem = checkpoint_damage(root / model)
        if problem:
            return repair(problem, model, "it retrains that run")
    return None


def repair(problem: str, path: Path, remade: str) -> str:
    """`problem` and the commands that repair `path`: DVC's recorded copy (a DVC output is a file, and
    `--force` replaces one that differs without asking), or the file deleted, alone, and made again by its
    job: the file is a target of the workflow (Snakefile, rule all), so Snakemake runs the job that makes it,
    which first deletes its other outputs (meta.json beside a shard is git-tracked: it is rewritten, not
    deleted by hand)."""
    return (f"{problem}; restore it with `dvc checkout --force {path}` (the copy DVC recorded), or make it "
            f"again with `rm {path} && snakemake --cores all {path}` ({remade}; add --profile slurm on a "
            f"cluster)")
