"""The code revision recorded with every run and report: the git commit of this package's repository."""

from __future__ import annotations

import subprocess

from ngptlab.params import REPO_ROOT


def code_revision() -> str:
    """The git commit of the code, with '-dirty' if tracked files differ from it; 'unknown' outside git."""
    git = ["git", "-C", str(REPO_ROOT)]
    try:
        rev = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                             check=True).stdout.strip()
        dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{rev}-dirty" if dirty else rev
