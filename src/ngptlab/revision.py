"""The code revision recorded with every run and report: a hash of the code itself.

It is the sha256 of the pipeline's code (src/, workflow/, the Snakefile: every file git tracks there, as it
is on disk), not the git commit: committing results, docs or dvc.lock moves the commit and would change
every artifact that records it, although the code that made them is the same. An edit to the code changes
it, committed or not. Outside a git checkout it hashes the files under those paths directly.

A stage's code fingerprint, what decides when its jobs rerun, is narrower: the code its command imports
(ngptlab.plan.closure).
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Sequence
from pathlib import Path

from ngptlab.layout import REPO_ROOT

CODE_PATHS = ("src", "workflow", "Snakefile")
_SKIPPED_PARTS = {"__pycache__", ".pytest_cache"}


def _files_under(root: Path, paths: Sequence[str]) -> list[str]:
    """The files under `paths` (files or directories relative to root) as sorted relative names, bytecode
    and build metadata left out; a missing path adds nothing."""
    names = []
    for name in paths:
        path = root / name
        if path.is_dir():
            names += [p.relative_to(root).as_posix() for p in path.rglob("*")
                      if p.is_file() and not _SKIPPED_PARTS & set(p.parts) and ".egg-info" not in str(p)]
        elif path.is_file():
            names.append(name)
    return sorted(names)


def _code_files(root: Path) -> list[str]:
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--", *CODE_PATHS],
                                capture_output=True, timeout=30, check=True).stdout
        files = [name for name in listed.decode().split("\0") if name]
    except (OSError, subprocess.SubprocessError):
        files = []
    if not files:  # not a git checkout (an sdist, a copied tree): every file under the code paths
        files = _files_under(root, CODE_PATHS)
    return sorted(files)


def _digest(root: Path, names: list[str]) -> str | None:
    """16 hex digits of a sha256 over the files' names and bytes (in the given order); None if none exist."""
    digest = hashlib.sha256()
    found = False
    for name in names:
        path = root / name
        if not path.is_file():  # deleted in the working tree: it is not part of the code that runs
            continue
        found = True
        digest.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16] if found else None


def code_revision(root: str | Path = REPO_ROOT) -> str:
    """'code:' + 16 hex digits of a sha256 over the code's file names and bytes; 'unknown' if none."""
    digest = _digest(Path(root), _code_files(Path(root)))
    return f"code:{digest}" if digest else "unknown"
