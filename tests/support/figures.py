"""Checks on a report figure as matplotlib drew it (kit/plot.py's capture keeps the figures): a bar on a log
axis, a baseline not black or not drawn last, an index axis with a fractional tick, budget ticks that are not
the grid's budgets, text labels that overlap."""

from __future__ import annotations

import matplotlib.colors as mcolors
from matplotlib.collections import PathCollection
from matplotlib.container import BarContainer
from matplotlib.lines import Line2D

from ngptlab.report.kit import plot


def _colour(artist) -> tuple[float, float, float] | None:
    """An arm mark's colour: a line's, a scatter's face (its edge when hollow); None when it has no data."""
    if isinstance(artist, Line2D):
        if len(artist.get_xdata()) == 0:
            return None
        return mcolors.to_rgb(artist.get_color())
    faces = artist.get_facecolors()
    colours = faces if len(faces) and faces[0][3] > 0 else artist.get_edgecolors()
    return tuple(colours[0][:3]) if len(colours) and len(artist.get_offsets()) else None


def _is_black(rgb) -> bool:
    return max(rgb) < 1e-6


def _is_grey(rgb) -> bool:
    return max(rgb) - min(rgb) < 1e-6 and not _is_black(rgb)  # references, targets, keys


def arm_marks(ax) -> list:
    """The lines and points of the arms in the order matplotlib draws them (by z-order, then as added)."""
    marks = [a for a in ax.get_children() if isinstance(a, (Line2D, PathCollection)) and a.get_visible()
             and _colour(a) is not None and not _is_grey(_colour(a))]
    return sorted(marks, key=lambda a: a.get_zorder())


def check_figure(fig, baseline: str = "gpt", budgets: list[int] | None = None) -> None:
    legend_labels = {t.get_text(): h for lg in fig.legends for t, h in zip(lg.get_texts(), lg.legend_handles,
                                                                           strict=True)}
    if baseline in legend_labels:
        key = legend_labels[baseline]
        assert _is_black(mcolors.to_rgb(key.get_color())), "the baseline's key is not black"
    blacks = 0
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for which, scale in (("x", ax.get_xscale()), ("y", ax.get_yscale())):
            if scale == "log":
                assert not any(isinstance(c, BarContainer) for c in ax.containers), \
                    f"{ax.get_title()}: a bar on a log {which} axis"
        marks = arm_marks(ax)
        black = [i for i, m in enumerate(marks) if _is_black(_colour(m))]
        if black:
            blacks += 1
            assert black == list(range(len(marks) - len(black), len(marks))), \
                f"{ax.get_title()}: an arm is drawn over the baseline"
        for line in ax.get_lines():
            if line.get_label() == baseline:
                assert _is_black(mcolors.to_rgb(line.get_color())), f"{ax.get_title()}: baseline not black"
        for axis, label in ((ax.xaxis, ax.get_xlabel()), (ax.yaxis, ax.get_ylabel())):
            lo, hi = sorted(axis.get_view_interval())
            ticks = [t for t in axis.get_majorticklocs() if lo <= t <= hi]
            if label.startswith(("index", "layer")):
                assert ticks and all(float(t).is_integer() for t in ticks), f"{label}: ticks {ticks}"
            if label == "token budget" and budgets is not None:
                assert ticks == sorted(budgets), f"budget ticks {ticks}, not the grid's {budgets}"
                shown = [t.get_text() for t in axis.get_ticklabels() if t.get_text()]
                assert shown == [plot.fmt_budget(b) for b in sorted(budgets)]
    if baseline in legend_labels:
        assert blacks, "the baseline is in the legend but drawn nowhere in black"


def labels_overlap(fig, ax) -> list[tuple[str, str]]:
    renderer = fig.canvas.get_renderer()
    texts = [t for t in ax.texts if t.get_text()]
    boxes = [t.get_window_extent(renderer) for t in texts]
    return [(texts[i].get_text(), texts[j].get_text()) for i in range(len(texts)) for j in range(i)
            if boxes[i].overlaps(boxes[j])]
