"""A report table: raw values for the CSV, display strings for markdown and HTML, the runs behind each row.

CSV conventions (reports/tables/<id>.csv, byte-stable: no timestamps, floats written with repr, which is the
shortest string that reads back to the same float): empty cell = not available; "inf" = numerically
singular (condition numbers); a last column `runs` lists the runs behind the row, space separated.
"""

from __future__ import annotations

import csv
import io
import math
import numbers
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

MISSING = "—"


def fmt_num(x: Any, digits: int = 3) -> str:
    """A number for people: 3 significant digits, compact exponents (1.6e6), ∞ for singular, — for none."""
    if x is None or x == "":
        return MISSING
    if isinstance(x, str):
        try:
            x = float(x)
        except ValueError:
            return x
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}"
    if math.isnan(x):
        return MISSING
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    text = f"{x:.{digits}g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{int(exponent)}"
    return text


def fmt_sig(x: Any, digits: int = 3) -> str:
    """fmt_num with its trailing zeros kept (1.00, 0.985, 1.20e3): a column of them reads at one precision,
    never "1" beside "0.985". Integers stay integers (1,234)."""
    text = fmt_num(x, digits)
    if isinstance(x, numbers.Integral) or not re.fullmatch(r"-?[0-9.]+(e-?[0-9]+)?", text):
        return text
    mantissa, _, exponent = text.partition("e")
    mantissa = f"{float(mantissa):#.{digits}g}".rstrip(".")
    return mantissa + (f"e{exponent}" if exponent else "")


def seeds_text(seeds: list[int] | tuple[int, ...]) -> str:
    """Seeds in words: "seed 0", "seeds 0-2", "seeds 0, 3 and 5"."""
    seeds = sorted(seeds)
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    if seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"seeds {seeds[0]}-{seeds[-1]}"
    return "seeds " + ", ".join(map(str, seeds[:-1])) + f" and {seeds[-1]}"


def fmt_budget(x: float) -> str:
    """A token budget as the grid names it: exact, never rounded (2048, not 2.05k), in k/M/B only where that
    is exact to two decimals (16k for 16,000, 1.25B), digits grouped from 100,000 on (2,097,152)."""
    n = round(x)
    for unit, size in (("B", 10**9), ("M", 10**6), ("k", 10**3)):
        if n >= size and (100 * n) % size == 0:
            return f"{n / size:g}{unit}"
    return f"{n:,}" if n >= 100_000 else str(n)


def fmt_short(x: float) -> str:
    """Token counts for axes and prose: 16.4k, 262k, 1.5B."""
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= size:
            return f"{x / size:.3g}{unit}"
    return f"{x:g}"


def fmt_loss(x: Any) -> str:
    return MISSING if x is None or (isinstance(x, float) and math.isnan(x)) else f"{float(x):.4f}"


def fmt_int(x: Any) -> str:
    return MISSING if x is None else f"{int(x):,}"


def fmt_lr(x: Any) -> str:
    return MISSING if x is None else f"{float(x):g}"


def fmt_sha(x: Any) -> str:
    return MISSING if not x else str(x)[:12]


def fmt_levels(levels: Iterable[float | None]) -> str | None:
    """The confidence levels files state, as a header or note says them: '95%', '90% and 95%' where files
    differ; None where no file states one."""
    found = sorted({level for level in levels if level is not None})
    if not found:
        return None
    words = [f"{level:.0%}" for level in found]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + f" and {words[-1]}"


def levelled(level: str | None, what: str) -> str:
    """'95% interval' for what with the level files state (fmt_levels), plain what where none states one."""
    return f"{level} {what}" if level else what


def fmt_text(x: Any) -> str:
    return MISSING if x is None or x == "" else str(x)


def csv_value(x: Any) -> str:
    if x is None:
        return ""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, float):
        if math.isnan(x):
            return ""
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return repr(x)
    return str(x)


@dataclass
class Table:
    id: str  # file stem under reports/tables/ and HTML anchor (table-<id>)
    title: str
    columns: list[str]  # machine names: the CSV header
    headers: dict[str, str] = field(default_factory=dict)  # column -> display header (default: the name)
    formats: dict[str, Callable[[Any], str]] = field(default_factory=dict)  # column -> display formatter
    key: list[str] = field(default_factory=list)  # columns that identify a row (provenance ids)
    shown: list[str] | None = None  # columns shown in the report (None: all); the CSV always has all
    note: str = ""
    rows: list[list[Any]] = field(default_factory=list)
    runs: list[list[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if "runs" in self.columns:
            raise ValueError(f"table {self.id}: 'runs' is the CSV's own last column; name this one otherwise")

    def add(self, values: dict[str, Any], runs: list[str] | None = None) -> None:
        unknown = set(values) - set(self.columns)
        if unknown:
            raise KeyError(f"table {self.id}: unknown columns {sorted(unknown)}")
        self.rows.append([values.get(c) for c in self.columns])
        self.runs.append(sorted(set(runs or [])))

    def __len__(self) -> int:
        return len(self.rows)

    def _shared_note(self) -> str | None:
        """The value of a column "note" when every row has the same one: said once, under the table."""
        if "note" not in self.columns or len(self.rows) < 2:
            return None
        notes = {row[self.columns.index("note")] for row in self.rows}
        return notes.pop() if len(notes) == 1 and None not in notes and "" not in notes else None

    def shown_columns(self) -> list[str]:
        shown = self.shown if self.shown is not None else self.columns
        return [c for c in shown if not (c == "note" and self._shared_note() is not None)]

    def full_note(self) -> str:
        """The table's note, with a note every row shares (said once here instead of on every row)."""
        shared = self._shared_note()
        if shared is None or "note" not in (self.shown if self.shown is not None else self.columns):
            return self.note
        shared = shared[0].upper() + shared[1:] + ("" if shared.endswith(".") else ".")
        return f"{self.note} Every row: {shared}" if self.note else f"Every row: {shared}"

    def header(self, column: str) -> str:
        return self.headers.get(column, column)

    def display(self, row: list[Any], column: str) -> str:
        value = row[self.columns.index(column)]
        return self.formats.get(column, fmt_sig)(value)

    def row_key(self, i: int) -> str:
        row = self.rows[i]
        return "/".join(str(row[self.columns.index(c)]) for c in self.key) if self.key else str(i)

    def to_csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow([*self.columns, "runs"])
        for row, runs in zip(self.rows, self.runs, strict=True):
            writer.writerow([*(csv_value(v) for v in row), " ".join(runs)])
        return out.getvalue()
