"""HF `datasets`: imported only when documents are read, without its torch integration; and the revision a
dataset resolved to, for meta.json."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

COMMIT = re.compile(r"^[0-9a-f]{40}$")


def import_datasets():
    """HF `datasets`, imported without its torch integration unless the user asked for it.

    A streaming IterableDataset makes itself a subclass of torch's IterableDataset when torch is installed,
    which imports torch: about 1.5 s and 250 MB for nothing in this stage. USE_TORCH is datasets' own switch,
    read once at import; it is set only for that import, so subprocesses do not inherit it."""
    if "datasets" not in sys.modules and "USE_TORCH" not in os.environ:
        os.environ["USE_TORCH"] = "0"
        try:
            import datasets
        finally:
            del os.environ["USE_TORCH"]
    import datasets

    return datasets


def resolved_revision(builder_hash: str | None, dataset: str) -> dict:
    """What a dataset builder's `hash` says about the data read, as meta.json fields.

    For a Hub dataset, datasets resolves the requested revision (a branch, tag or ref such as
    refs/convert/parquet) to a commit once, reads every file at that commit, and keeps the commit as the
    builder's hash: recording it pins the run after the fact, even when the branch moves later. For a local
    dataset directory the hash is datasets' own digest of its configuration and data files (paths and
    modification times), not a commit; when datasets falls back to its cache (offline) it is "auto"."""
    if Path(dataset).is_dir():
        return {"resolved_revision": None, "resolved_revision_reason": "a local dataset directory has no "
                "commit", "datasets_hash": builder_hash}
    if isinstance(builder_hash, str) and COMMIT.match(builder_hash):
        return {"resolved_revision": builder_hash}
    return {"resolved_revision": None, "resolved_revision_reason": f"datasets reported {builder_hash!r}, not "
            f"a commit (read from its local cache rather than the Hub?)"}
