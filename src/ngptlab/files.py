"""Writing and hashing artifacts, shared by every stage.

Every artifact is written to a temporary name in its own directory and renamed into place, so a reader (or
a rerun after a kill) never sees a half-written file under the real name.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def read_json(path: str | Path, error: type[Exception], what: str = "file", mapping: bool = True) -> Any:
    """A JSON file's content; `error` naming the file where it is missing, not valid JSON, or (`mapping`) not
    a JSON object. `what` names the file in the first case ("train summary", ...)."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: {what} not found")
    try:
        value = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise error(f"{path}: not valid JSON: {err}") from None
    if mapping and not isinstance(value, dict):
        raise error(f"{path}: expected a JSON object")
    return value


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes, read in chunks (checkpoints and shards can be GBs)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary sibling of `path` to write; on success it is fsynced and renamed onto `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the mode a plain open() would
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        with open(tmp, "w", newline="") as f:
            f.write(text)


def write_json_atomic(path: str | Path, obj: Any) -> None:
    # allow_nan=False: NaN/inf are not JSON; callers turn them into null (or "inf") first.
    write_text_atomic(path, json.dumps(obj, indent=2, allow_nan=False) + "\n")
