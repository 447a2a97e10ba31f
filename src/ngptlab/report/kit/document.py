"""The report as a list of blocks, rendered twice (report/kit/render.py): markdown and self-contained HTML.

Writing the content once as blocks keeps report.md and report.html saying the same thing. Text blocks use
a tiny inline markup that both renderers understand: **bold**, `code` and [text](href).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ngptlab.report.kit.table import Table


@dataclass
class Figure:
    """A rendered figure: its SVG (report/kit/plot.py draws it) and the runs behind it, for the provenance."""

    id: str  # file stem under reports/figures/ and HTML anchor (fig-<id>)
    title: str
    caption: str
    svg: bytes
    runs: list[str] = field(default_factory=list)


@dataclass
class Heading:
    text: str
    anchor: str
    level: int = 2


@dataclass
class Text:
    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Callout:
    """A boxed statement the reader must not miss (e.g. 'too small to conclude anything')."""

    text: str
    kind: str = "warning"  # warning | note


@dataclass
class TableBlock:
    table: Table
    link_runs: bool = True  # show, per row, links to the runs behind it


@dataclass
class FigureBlock:
    figure: Figure


@dataclass
class Contents:
    """The table of contents: every level-2 and level-3 heading, filled in by the renderers."""


Block = Heading | Text | Bullets | Callout | TableBlock | FigureBlock | Contents


@dataclass
class Document:
    title: str
    blocks: list[Block] = field(default_factory=list)

    def add(self, *blocks: Block) -> None:
        self.blocks.extend(blocks)

    @property
    def tables(self) -> list[Table]:
        return [b.table for b in self.blocks if isinstance(b, TableBlock)]

    @property
    def figures(self) -> list[Figure]:
        return [b.figure for b in self.blocks if isinstance(b, FigureBlock)]

    @property
    def headings(self) -> list[Heading]:
        return [b for b in self.blocks if isinstance(b, Heading)]


def run_names(names: list[str], limit: int = 12) -> str:
    """`a`, `b`, ... and N more (see the table of every run)."""
    shown = ", ".join(f"`{n}`" for n in names[:limit])
    rest = len(names) - limit
    return shown + (f" and {rest} more (see [every run](#table-runs))" if rest > 0 else "")
