"""Progress as lines on stderr, for a verb that works for minutes without a bar of its own (`ngptlab
design`): one line per finished part, with the seconds since the verb started. stdout stays the result's
alone (a table, or JSON to pipe), and `--no-progress` silences the lines.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressLines:
    """`ngptlab <verb>: <what> (<seconds> s)` on stderr per call, or nothing when not shown."""

    def __init__(self, verb: str, shown: bool = True, stream: TextIO | None = None):
        self.verb, self.shown, self.stream = verb, shown, stream
        self.started = time.perf_counter()

    def __call__(self, what: str) -> None:
        if self.shown:
            seconds = time.perf_counter() - self.started
            print(f"ngptlab {self.verb}: {what} ({seconds:.0f} s)", file=self.stream or sys.stderr,
                  flush=True)
