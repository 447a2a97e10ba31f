"""The report's plotting kit: deterministic SVG from matplotlib, one style per arm, and the axes every figure
shares. The sections draw their figures with it; nothing else in the report imports matplotlib.

Determinism: matplotlib's Agg/SVG backend with a fixed `svg.hashsalt` (element ids derive from it instead of
a random uuid), no Date in the metadata, text kept as text (svg.fonttype "none": small files, no font
subsetting), and every colour and marker fixed per arm (ARM_STYLE: one colour and one marker per arm, the
same in every figure, no two arms alike and none grey, which marks references, targets and legend keys).

The baseline (speedup.baseline; build_document names it with use_baseline) is drawn in black, last and on
top (drawing_order, arm_zorder) in every figure: every speed-up is read against it, and the arms closest to
it (gpt-nowd, gpt-scalar, gpt-lrm) would otherwise hide it.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure as MplFigure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    FixedLocator,
    FuncFormatter,
    LogLocator,
    MaxNLocator,
    NullFormatter,
    NullLocator,
)

from ngptlab.models import arms  # noqa: E402
from ngptlab.report.kit.table import fmt_budget, fmt_num, fmt_short  # noqa: E402

RC = {
    "svg.hashsalt": "ngptlab-report",
    "svg.fonttype": "none",
    "font.family": "DejaVu Sans",
    "font.size": 8,
    "axes.titlesize": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "figure.dpi": 100,
    "legend.fontsize": 7,
    "legend.frameon": False,
}



def _style(arm: arms.Arm) -> tuple[tuple[float, float, float], str]:
    colormap, index = arm.color
    return plt.get_cmap(colormap).colors[index], arm.marker


# Every arm's colour and marker, from its row of models/arms.yaml (tab10 without its grey; the angle arms take
# tab20's light hues). The 2x2 arms keep the paper's shapes; no arm has a triangle, which marks a bound.
ARM_STYLE: dict[str, tuple[tuple[float, float, float], str]] = {name: _style(arm)
                                                                  for name, arm in arms.table().items()}
KEY_COLOR = "0.35"  # legend entries that stand for a shape, not an arm: grey, unlike any arm
BASELINE_COLOR = (0.0, 0.0, 0.0)
MIN_WIDTH = 7.0  # inches (96 px each in a browser): no figure narrower, so its ticks and legend stay readable
_baseline = ["gpt"]  # speedup.baseline's default; the report sets its own (use_baseline)


@contextmanager
def use_baseline(arm: str) -> Iterator[None]:
    """Draw `arm` as the baseline (black, on top) in the figures made inside the block."""
    _baseline.append(arm)
    try:
        yield
    finally:
        _baseline.pop()


def is_baseline(arm: str) -> bool:
    return arm == _baseline[-1]


def arm_color(arm: str) -> tuple[float, float, float]:
    return BASELINE_COLOR if is_baseline(arm) else ARM_STYLE[arm][0]


def drawing_order(arms: Iterable[str]) -> list[str]:
    """The arms in the order to draw them: as given, the baseline last, so that no arm covers it."""
    arms = list(arms)
    return [a for a in arms if not is_baseline(a)] + [a for a in arms if is_baseline(a)]


def arm_zorder(arm: str, z: float = 2.0) -> float:
    """The z-order of an arm's artists (z: the others'); the baseline's above every arm's."""
    return z + 1.0 if is_baseline(arm) else z


def arm_marker(arm: str) -> str:
    return ARM_STYLE[arm][1]


@contextmanager
def panels(n: int, ncols: int, width: float = 3.2, height: float = 2.5
           ) -> Iterator[tuple[MplFigure, list[Axes]]]:
    """A figure of n panels, ncols to a row (constrained layout), at least MIN_WIDTH wide, drawn and saved
    under the report's style (RC): use save() or discard() on it before the block ends."""
    with plt.rc_context(RC):
        ncols = max(1, min(ncols, n))
        nrows = math.ceil(n / ncols)
        width = max(width, MIN_WIDTH / ncols)
        fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False,
                                 layout="constrained")
        flat = list(axes.flat)
        for ax in flat[n:]:
            ax.set_visible(False)
        yield fig, flat[:n]


_captured: list[list[MplFigure]] = []


@contextmanager
def capture() -> Iterator[list[MplFigure]]:
    """The figures saved inside the block, kept (closed, still drawn) for tests to inspect."""
    figures: list[MplFigure] = []
    _captured.append(figures)
    try:
        yield figures
    finally:
        _captured.remove(figures)


def save(fig: MplFigure) -> bytes:
    """The figure as SVG bytes; the figure is closed."""
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})  # constrained layout: no "tight" redraw
    plt.close(fig)
    if _captured:
        FigureCanvasAgg(fig).draw()  # closed figures lose their canvas: a new one, drawn, to measure text on
    for figures in _captured:
        figures.append(fig)
    return buf.getvalue()


def discard(fig: MplFigure) -> None:
    plt.close(fig)


def arm_handle(arm: str, marker: bool = True, line: bool = True) -> Line2D:
    """A legend entry for an arm in its colour and marker."""
    return Line2D([], [], color=arm_color(arm), marker=arm_marker(arm) if marker else None,
                  ls="-" if line else "", label=arm)


def key_handle(marker: str, label: str, hollow: bool = False) -> Line2D:
    """A legend entry for a shape (a bound, a series), in KEY_COLOR."""
    return Line2D([], [], ls="", marker=marker, color=KEY_COLOR, label=label,
                  **({"markerfacecolor": "none"} if hollow else {}))


def key_line(label: str, ls: str = "-", **style) -> Line2D:
    """A legend entry for a line that is not an arm's (a target, a reference, a line style), in KEY_COLOR."""
    return Line2D([], [], color=KEY_COLOR, ls=ls, label=label, **{"lw": 0.9, **style})


def arm_legend(fig: MplFigure, arms: list[str], markers: bool = False) -> None:
    """One legend for the whole figure, outside the panels, in arm order."""
    fig.legend(handles=[arm_handle(a, marker=markers) for a in arms], loc="outside right center")


def legend(fig: MplFigure, handles: list | None = None, labels: list[str] | None = None) -> None:
    """The figure's legend outside the panels: the handles given, or those of the figure's artists."""
    if handles is None:
        fig.legend(loc="outside right center")
    elif labels is None:
        fig.legend(handles=handles, loc="outside right center")
    else:
        fig.legend(handles, labels, loc="outside right center")


def budget_axis(ax: Axes, budgets: list[int], which: str = "x") -> None:
    """Log axis with a tick at every budget of the grid and none elsewhere, each labelled with its exact
    number (fmt_budget): matplotlib's default ticks fall between budgets and round them."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    axis.set_major_locator(FixedLocator(budgets))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda x, _: fmt_budget(x)))
    lo, hi = min(budgets), max(budgets)
    pad = (hi / lo) ** 0.08 if hi > lo else 1.5  # the end budgets' ticks inside the axis, their labels apart
    (ax.set_xlim if which == "x" else ax.set_ylim)(lo / pad, hi * pad)


def index_axis(ax: Axes, which: str = "x") -> None:
    """An axis of indices (layers, sorted positions): integer ticks only."""
    (ax.xaxis if which == "x" else ax.yaxis).set_major_locator(MaxNLocator(integer=True, nbins="auto"))


class LogTicks(LogLocator):
    """Major ticks of a log axis, always at least two inside the range: powers of ten over a long range, 1, 2
    and 5 x 10^k over a shorter one, every integer x 10^k over less than a decade, and round, evenly spaced
    numbers where even those give fewer than two (a range like 3.1 to 3.9)."""

    SUBS = ((1.0,), (1.0, 2.0, 5.0), tuple(float(s) for s in range(1, 10)))

    def tick_values(self, vmin: float, vmax: float):
        vmin, vmax = sorted((vmin, vmax))
        if not (vmin > 0 and vmax > vmin):
            self.set_params(subs=(1.0,), numticks=8)
            return super().tick_values(vmin, vmax)
        long = math.log10(vmax / vmin) > 2.5
        for subs in self.SUBS[0 if long else 1:]:
            self.set_params(subs=subs, numticks=8)
            ticks = super().tick_values(vmin, vmax)
            if sum(vmin <= t <= vmax for t in ticks) >= 2:
                return ticks
        return [t for t in MaxNLocator(nbins=4).tick_values(vmin, vmax) if t > 0]


def log_axis(ax: Axes, which: str = "y", fmt: Callable[[float], str] = lambda v: fmt_num(v, 2)) -> None:
    """A log axis whose major ticks are always labelled (LogTicks), in plain numbers by default (matplotlib's
    minor labels read 6x10^0), or with `fmt` (fmt_short for tokens); minor ticks unlabelled."""
    axis = ax.yaxis if which == "y" else ax.xaxis
    (ax.set_yscale if which == "y" else ax.set_xscale)("log")
    axis.set_major_locator(LogTicks())
    axis.set_major_formatter(FuncFormatter(lambda v, _: fmt(v)))
    axis.set_minor_formatter(NullFormatter())


def tokens_axis(ax: Axes) -> None:
    """Log x axis of training tokens, labelled 16k, 1M, ..."""
    log_axis(ax, "x", fmt_short)


def dodge_labels(fig: MplFigure, groups: list[list], gap: float = 1.0, rounds: int = 50) -> None:
    """Move annotations (placed in offset points) apart until no two of a group (a panel's) overlap: of two
    that do, the later moves away from the earlier, vertically, by the overlap plus `gap` points. Call it
    last: the figure is laid out (drawn) once first, so the extents are those the saved figure has."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    points = 72 / fig.dpi
    for texts in groups:
        for _ in range(rounds):
            boxes = [t.get_window_extent(renderer) for t in texts]
            moved = False
            for i in range(len(texts)):
                for j in range(i):
                    if not boxes[i].overlaps(boxes[j]):
                        continue
                    below = boxes[i].y0 + boxes[i].y1 < boxes[j].y0 + boxes[j].y1
                    shift = -(boxes[i].y1 - boxes[j].y0) if below else boxes[j].y1 - boxes[i].y0
                    x, y = texts[i].get_position()
                    texts[i].set_position((x, y + shift * points + (-gap if below else gap)))
                    boxes[i] = texts[i].get_window_extent(renderer)
                    moved = True
            if not moved:
                break


def empty(ax: Axes, text: str) -> None:
    """A panel with nothing to draw: says so instead."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=8, color="0.4",
            wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])
