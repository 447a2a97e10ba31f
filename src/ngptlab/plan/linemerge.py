"""A three-way merge of lines, for editing a file through a parser that re-lays some lines it did not change.

base is the unedited document as the parser writes it, written the file as it is, edited the edited document
as the parser writes it. Each side's changes against base are difflib's hunks; where only the parser re-laid
a stretch the file's lines stay, where only the edit changed one the edit's lines come in, and where both
did the edit wins (a line the edit rewrites is written as the parser writes it).
"""

from __future__ import annotations

import difflib

Hunk = tuple[int, int, str]  # a stretch [lo, hi) of the dumped lines that one side changed, and which side


def _opcodes(base: list[str], other: list[str]) -> list[tuple[str, int, int, int, int]]:
    return difflib.SequenceMatcher(None, base, other, autojunk=False).get_opcodes()


def _position(opcodes: list, p: int, end: bool) -> int:
    """Where position p of the base falls in the other side: the first place it can (end: the last), so that
    an insertion at p falls after a stretch's start and before its end."""
    found = []
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal" and i1 <= p <= i2:
            found.append(j1 + (p - i1))
        found += [j for i, j in ((i1, j1), (i2, j2)) if tag != "equal" and i == p]
    if not found:  # two empty sides: difflib gives no opcode
        return p
    return max(found) if end else min(found)


def _regions(hunks: list[Hunk]) -> list[tuple[int, int, set[str]]]:
    """The hunks of both sides joined where they overlap, or insert at the same place: (lo, hi, sides). An
    insertion at either end of the other side's stretch is no overlap: it goes before or after it."""
    regions: list[tuple[int, int, set[str]]] = []
    for lo, hi, side in sorted(hunks):
        if regions:
            last_lo, last_hi, sides = regions[-1]
            if (lo < last_hi and hi > last_lo) or lo == hi == last_lo == last_hi:
                regions[-1] = (last_lo, max(last_hi, hi), sides | {side})
                continue
        regions.append((lo, hi, {side}))
    return regions


def merged(base: list[str], written: list[str], edited: list[str]) -> list[str]:
    """A three-way merge of lines: `base` the unedited document as dumped, `written` the file as it is,
    `edited` the edited document as dumped. A stretch only the dump re-laid keeps the file's text, a stretch
    only the edit changed takes the edit's, and where both did the edit wins."""
    to_written, to_edited = _opcodes(base, written), _opcodes(base, edited)
    hunks = [(i1, i2, side) for side, opcodes in (("written", to_written), ("edited", to_edited))
             for tag, i1, i2, _, _ in opcodes if tag != "equal"]
    out, at = [], 0  # `at`: how far into `written` the output has come
    for lo, hi, sides in _regions(hunks):
        out += written[at:_position(to_written, lo, end=False)]
        if sides == {"written"}:
            out += written[_position(to_written, lo, end=False):_position(to_written, hi, end=True)]
        else:
            out += edited[_position(to_edited, lo, end=False):_position(to_edited, hi, end=True)]
        at = _position(to_written, hi, end=True)
    return out + written[at:]
