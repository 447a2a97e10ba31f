"""The code revision recorded with every run and report: a hash of the code itself.

It is the sha256 of the pipeline's code (src/, workflow/, the Snakefile: every file git tracks there, as it
is on disk), not the git commit: committing results, docs or dvc.lock moves the commit and would change
every artifact that records it, although the code that made them is the same. An edit to the code changes
it, committed or not. Outside a git checkout it hashes the files under those paths directly.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from ngptlab.params import REPO_ROOT

CODE_PATHS = ("src", "workflow", "Snakefile")
_SKIPPED_PARTS = {"__pycache__", ".pytest_cache"}


def _code_files(root: Path) -> list[str]:
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--", *CODE_PATHS],
                                capture_output=True, timeout=30, check=True).stdout
        files = [name for name in listed.decode().split("\0") if name]
    except (OSError, subprocess.SubprocessError):
        files = []
    if not files:  # not a git checkout (an sdist, a copied tree): every file under the code paths
        files = [str(p.relative_to(root)) for name in CODE_PATHS for p in sorted((root / name).rglob("*"))
                 if p.is_file() and not _SKIPPED_PARTS & set(p.parts) and ".egg-info" not in str(p)]
        files += [name for name in CODE_PATHS if (root / name).is_file()]
    return sorted(files)


def code_revision(root: str | Path = REPO_ROOT) -> str:
    """'code:' + 16 hex digits of a sha256 over the code's file names and bytes; 'unknown' if none."""
    root = Path(root)
    digest = hashlib.sha256()
    found = False
    for name in _code_files(root):
        path = root / name
        if not path.is_file():  # deleted in the working tree: it is not part of the code that runs
            continue
        found = True
        digest.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return f"code:{digest.hexdigest()[:16]}" if found else "unknown"
