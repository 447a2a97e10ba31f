"""Token shards on disk: data/tokens/<source>/{train.bin, val.bin, meta.json}.

Format (nanoGPT-compatible): each .bin is a flat little-endian uint16 array of GPT-2 token ids, each
document's tokens followed by one <|endoftext|> (50256), as nanoGPT's openwebtext/prepare.py writes them,
so `np.memmap(path, dtype=np.uint16, mode="r")` reads it and every document, the last included, ends in EOT.

Crash safety: a .bin is streamed to a hidden temporary name in the same directory (sha256 computed while
writing) and renamed into place only when complete; meta.json is written last, also by rename. The stage
deletes any old meta.json before it renames new shards in, so at every instant either there is no
meta.json, or meta.json describes the shards on disk (sizes and sha256). Readers call verify_shards().
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from ngptlab.errors import DataError
from ngptlab.files import sha256_file, write_bytes_atomic

META_NAME = "meta.json"
SPLITS = ("train", "val")
DTYPE = np.dtype("<u2")
TMP_MARK = ".tmp-"


class ShardWriter:
    """Streams uint16 tokens to `<dir>/.<name>.tmp-<pid>`, hashing as it goes; `close()` fsyncs,
    `publish()` renames to `<name>`."""

    def __init__(self, path: Path):
        self.path = path
        self.tmp_path = path.with_name(f".{path.name}{TMP_MARK}{os.getpid()}")
        self._file = open(self.tmp_path, "wb")
        self._sha = hashlib.sha256()
        self.tokens = 0
        self.documents = 0

    def write(self, tokens: np.ndarray, documents: int) -> None:
        data = tokens.astype(DTYPE, copy=False).tobytes()
        self._sha.update(data)
        self._file.write(data)
        self.tokens += tokens.size
        self.documents += documents

    def close(self) -> dict:
        """Flush and fsync the temporary file; return its record for meta.json (not yet renamed)."""
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        return {"file": self.path.name, "tokens": self.tokens, "documents": self.documents,
                "bytes": self.tokens * DTYPE.itemsize, "sha256": self._sha.hexdigest()}

    def publish(self) -> None:
        os.replace(self.tmp_path, self.path)

    def abort(self) -> None:
        if not self._file.closed:
            self._file.close()
        self.tmp_path.unlink(missing_ok=True)


def remove_stale_temporaries(out_dir: Path) -> list[Path]:
    """Delete temporaries left by killed runs (call only while holding the directory's lock)."""
    stale = [p for p in out_dir.glob(f".*{TMP_MARK}*") if p.is_file()]
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


def write_meta(out_dir: Path, meta: dict) -> Path:
    path = out_dir / META_NAME
    write_bytes_atomic(path, (json.dumps(meta, indent=2, sort_keys=False) + "\n").encode())
    return path


def load_meta(source_dir: str | Path) -> dict:
    """meta.json of a token directory, or DataError naming the file when it is missing or unreadable."""
    path = Path(source_dir) / META_NAME
    if not path.is_file():
        raise DataError(f"{path}: missing (the prepare stage has not completed for this source; run "
                        f"`ngptlab prepare`)")
    try:
        meta = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"{path}: unreadable: {err}") from None
    if not isinstance(meta, dict) or not all(isinstance(meta.get("splits", {}).get(s), dict) for s in SPLITS):
        raise DataError(f"{path}: not a token meta.json (no splits.train / splits.val records)")
    return meta


def verify_shards(source_dir: str | Path, hashes: bool = True, splits: tuple[str, ...] = SPLITS) -> dict:
    """Check every .bin (of `splits`) against meta.json (presence, size and, with `hashes`, sha256); return
    meta or raise DataError naming the file at fault. Without hashes it reads no shard: what the workflow
    checks at each start."""
    source_dir = Path(source_dir)
    meta = load_meta(source_dir)
    for split in splits:
        record = meta["splits"][split]
        path = source_dir / record.get("file", f"{split}.bin")
        if not path.is_file():
            raise DataError(f"{path}: missing, but {source_dir / META_NAME} lists it")
        size = path.stat().st_size
        if size % DTYPE.itemsize:
            raise DataError(f"{path}: {size} bytes is not a whole number of uint16 tokens (truncated?)")
        if size != record.get("bytes") or size // DTYPE.itemsize != record.get("tokens"):
            raise DataError(f"{path}: {size} bytes, but meta.json records {record.get('bytes')} bytes "
                            f"({record.get('tokens')} tokens)")
        digest = sha256_file(path) if hashes else record.get("sha256")
        if digest != record.get("sha256"):
            raise DataError(f"{path}: sha256 {digest} does not match meta.json ({record.get('sha256')})")
    return meta


def open_tokens(source_dir: str | Path, split: str) -> np.memmap:
    """Read-only view of one split's tokens (call verify_shards first when the files may be stale)."""
    if split not in SPLITS:
        raise DataError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    return np.memmap(Path(source_dir) / f"{split}.bin", dtype=DTYPE, mode="r")
