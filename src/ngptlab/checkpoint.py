"""Model checkpoints: one safetensors file that rebuilds the model on its own.

The file holds the model's state dict plus, in the safetensors header metadata, the run config as JSON
(arm, scale, vocab_size, context, the run spec, resolved train params, data hashes) and a sha256 over the
tensor bytes. safetensors has no checksum of its own, so the tensor hash is what catches flipped bytes.
Loading never executes code from the file: the header is JSON and the tensors are raw bytes.

Shared by the train stage (writes) and the condition stage (reads).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from ngptlab.errors import CheckpointError, NgptlabError
from ngptlab.files import atomic_path, sha256_file

FORMAT = "ngptlab.model/1"
CONFIG_KEY = "ngptlab_config"
HASH_KEY = "tensors_sha256"
REQUIRED_CONFIG = ("arm", "scale", "vocab_size", "context")


def tensors_sha256(tensors: dict[str, torch.Tensor]) -> str:
    """A hash of names, dtypes, shapes and raw bytes, in name order: independent of file layout."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().to("cpu").contiguous()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        if t.numel():
            digest.update(t.view(-1).view(torch.uint8).numpy().data)  # no copy; works for bf16 too
    return digest.hexdigest()


def atomic_save_tensors(path: str | Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> None:
    """safetensors save_file through a temporary name: never a half-written checkpoint; same tensors and
    metadata, same bytes."""
    with atomic_path(path) as tmp:
        save_file(tensors, tmp, metadata=metadata)
        _sort_metadata(Path(tmp))


def _sort_metadata(path: Path) -> None:
    """Rewrite the header with its metadata keys sorted.

    safetensors writes the metadata from a hash map, in an order that changes from one process to the next,
    so the same checkpoint would hash differently each time it is written. The tensor entries keep their
    order and offsets; the header is JSON padded with spaces, so sorting keeps its length and the tensor
    bytes stay where they are (else the data is copied behind a header of the new length).
    """
    with open(path, "r+b") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        metadata = header.pop("__metadata__", None)
        ordered = {"__metadata__": dict(sorted(metadata.items()))} if metadata else {}
        text = json.dumps({**ordered, **header}, separators=(",", ":"), ensure_ascii=False).encode()
        padded = text + b" " * (-(8 + len(text)) % 8)
        if len(padded) == length:
            f.seek(8)
            f.write(padded)
            return
        moved = path.with_name(path.name + ".sorted")
        with open(moved, "wb") as out:
            out.write(struct.pack("<Q", len(padded)) + padded)
            f.seek(8 + length)
            shutil.copyfileobj(f, out, 1 << 24)
    moved.replace(path)


def save_model(path: str | Path, model: torch.nn.Module, config: dict[str, Any]) -> str:
    """write_model, then the sha256 of the whole file, returned: a final output's, which its summary records
    and the condition stage checks. That hashes every byte twice; a resume checkpoint needs only the tensor
    hash in the header (write_model)."""
    write_model(path, model, config)
    return sha256_file(path)


def write_model(path: str | Path, model: torch.nn.Module, config: dict[str, Any]) -> str:
    """Write the model's weights and its config to `path` atomically; return the tensor hash its header
    records (each byte hashed once)."""
    missing = [key for key in REQUIRED_CONFIG if key not in config]
    if missing:
        raise CheckpointError(f"{path}: config lacks {missing}, so the model could not be rebuilt from it")
    # Copies on CPU (one, from a GPU too): safetensors refuses shared storage, and the file must not alias
    # live parameters.
    tensors = {name: t.detach().to("cpu", copy=True).contiguous() for name, t in model.state_dict().items()}
    metadata = {
        "format": FORMAT,
        CONFIG_KEY: json.dumps(config, sort_keys=True),
        HASH_KEY: tensors_sha256(tensors),
    }
    atomic_save_tensors(path, tensors, metadata)
    return metadata[HASH_KEY]


def read_tensors(path: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """All tensors and the header metadata of a safetensors file, with its tensor hash verified."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint file not found")
    try:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            metadata = f.metadata() or {}
            tensors = {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118 (safe_open has no iter)
    except (SafetensorError, OSError, ValueError, RuntimeError) as err:
        raise _unreadable(path, err) from None
    expected = metadata.get(HASH_KEY)
    if expected is None:
        raise CheckpointError(f"{path}: header has no {HASH_KEY!r}; not written by ngptlab")
    actual = tensors_sha256(tensors)
    if actual != expected:
        raise CheckpointError(f"{path}: tensor data is corrupt "
                              f"(sha256 {actual[:12]}... != recorded {expected[:12]}...)")
    return tensors, metadata


def read_config(path: str | Path) -> dict[str, Any]:
    """The run config stored in a checkpoint's header (reads only the header, not the tensors)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint file not found")
    try:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            metadata = f.metadata() or {}
    except (SafetensorError, OSError, ValueError, RuntimeError) as err:
        raise _unreadable(path, err) from None
    return _parse_config(path, metadata)


def _unreadable(path: Path, err: Exception) -> CheckpointError:
    return CheckpointError(f"{path}: not a readable safetensors file (corrupt or truncated?): {err}")


def _parse_config(path: Path, metadata: dict[str, str]) -> dict[str, Any]:
    if metadata.get("format") != FORMAT:
        raise CheckpointError(f"{path}: header format is {metadata.get('format')!r}, expected {FORMAT!r}")
    try:
        config = json.loads(metadata[CONFIG_KEY])
    except (KeyError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{path}: header has no valid {CONFIG_KEY!r} JSON: {err}") from None
    missing = [key for key in REQUIRED_CONFIG if key not in config]
    if missing:
        raise CheckpointError(f"{path}: config in header lacks {missing}")
    return config


def load_model(
    path: str | Path, device: str | torch.device = "cpu", expected_arm: str | None = None
) -> tuple[torch.nn.Module, dict[str, Any]]:
    """Rebuild the model a checkpoint describes and load its weights (strict: names, shapes, dtypes), in fp32:
    weights a run stored in bf16 (train.weight_dtype) are loaded as bf16, then widened, which is exact.

    Raises CheckpointError naming the file and what is wrong: unreadable or truncated file, corrupt tensor
    bytes, missing config, an arm other than `expected_arm`, or weights that do not fit the rebuilt model.
    """
    from ngptlab import weight_dtype as weight_dtypes
    from ngptlab.models.registry import build  # here, so that hashing helpers do not pull in the models
    from ngptlab.models.scales import shape_from_dict

    path = Path(path)
    tensors, metadata = read_tensors(path)
    config = _parse_config(path, metadata)
    if expected_arm is not None and config["arm"] != expected_arm:
        raise CheckpointError(f"{path}: checkpoint is arm {config['arm']!r}, expected {expected_arm!r}")
    try:
        with torch.random.fork_rng(devices=[]):  # building initialises weights; leave the caller's RNG alone
            # the recorded shape where there is one (any shape from params), else the named scale
            recorded, shape = config.get("shape"), config["scale"]
            if isinstance(recorded, dict):
                shape = shape_from_dict(config["scale"], recorded)
            model, _ = build(config["arm"], shape, int(config["vocab_size"]),
                             int(config["context"]), int(config.get("vocab_multiple", 1)))
    except NgptlabError as err:
        raise CheckpointError(f"{path}: cannot rebuild the model its config describes: {err}") from None
    stored = weight_dtypes.of_record(config.get("spec", {}))
    weight_dtypes.store(model, stored)
    load_weights(path, model, tensors, what=f"a {config['arm']} {config['scale']} model")
    weight_dtypes.store(model, weight_dtypes.FP32)
    return model.to(device), config


def load_weights(
    path: str | Path, model: torch.nn.Module, tensors: dict[str, torch.Tensor], what: str
) -> None:
    """Strict load: the same names, shapes and dtypes as the model's state dict, else CheckpointError."""
    expected = model.state_dict()
    problems = [f"missing {name}" for name in expected if name not in tensors]
    problems += [f"unexpected {name}" for name in tensors if name not in expected]
    for name, t in tensors.items():
        if name in expected and (t.shape != expected[name].shape or t.dtype != expected[name].dtype):
            problems.append(f"{name} is {t.dtype}{list(t.shape)}, model wants "
                            f"{expected[name].dtype}{list(expected[name].shape)}")
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise CheckpointError(f"{path}: weights do not match {what}: {shown}")
    model.load_state_dict(tensors, strict=True)
