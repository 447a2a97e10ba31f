"""The report's figures, as deterministic SVG: the same inputs give the same bytes.

Determinism: matplotlib's Agg/SVG backend with a fixed `svg.hashsalt` (element ids derive from it instead of
a random uuid), no Date in the metadata, text kept as text (svg.fonttype "none": small files, no font
subsetting), and every colour and marker fixed per arm. Each function returns a Figure, or None when there
is nothing to draw (the report then says so instead of showing an empty plot).

The figures mirror the paper's (numbers in paper_numbers.yaml, `figures`): loss against tokens (Fig. 1),
final loss against budget (Fig. 2), embeddings (Fig. 4), condition numbers of every layer (Figs. 5, 10),
layers 3 and 4 (Figs. 11-12), post-hoc renormalization, and the settle-it plot of speed-up against
conditioning.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    FixedLocator,
    FuncFormatter,
    LogLocator,
    NullFormatter,
    NullLocator,
)

from ngptlab.report import views  # noqa: E402
from ngptlab.report.load import Results, RunRecord  # noqa: E402
from ngptlab.report.table import fmt_num, fmt_short  # noqa: E402
from ngptlab.results import read_float, read_spectra  # noqa: E402
from ngptlab.settings import allowed_arms  # noqa: E402

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
PALETTE = plt.get_cmap("tab10").colors
MARKERS_2X2 = {"gpt": "o", "gpt-rownorm": "s", "gpt-orth": "D", "ngpt": "*"}
CELL_MARKERS = ("o", "s", "D", "^", "v", "P", "X", "<", ">", "h")
KINDS = ("q", "k", "v", "o", "mlp_u", "mlp_v", "mlp_o")


def arm_color(arm: str) -> tuple:
    arms = allowed_arms()
    return PALETTE[arms.index(arm) % len(PALETTE)] if arm in arms else (0.3, 0.3, 0.3)


@dataclass
class Figure:
    id: str  # file stem under reports/figures/ and HTML anchor (fig-<id>)
    title: str
    caption: str
    svg: bytes
    runs: list[str] = field(default_factory=list)


def _save(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})  # constrained layout: no "tight" redraw
    plt.close(fig)
    return buf.getvalue()


def _subplots(n: int, ncols: int, width: float = 3.2, height: float = 2.5):
    ncols = max(1, min(ncols, n))
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False,
                             layout="constrained")
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _arm_legend(fig, arms: list[str], markers: bool = False) -> None:
    """One legend for the whole figure, outside the panels, in arm order."""
    handles = [plt.Line2D([], [], color=arm_color(a), marker=MARKERS_2X2.get(a, ".") if markers else None,
                          label=a) for a in arms]
    fig.legend(handles=handles, loc="outside right center")


def _budget_axis(ax, budgets: list[int]) -> None:
    """Log x axis with a tick at every budget, labelled 16k, 1M, ... (matplotlib's default overlaps)."""
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(budgets))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: fmt_short(x)))


class _Log125Locator(LogLocator):
    """Ticks at 1, 2, 5 x 10^k over a short range, at powers of ten over a long one."""

    def tick_values(self, vmin, vmax):
        decades = math.log10(vmax / vmin) if vmin > 0 and vmax > vmin else 99.0
        self.set_params(subs=(1.0, 2.0, 5.0) if decades <= 2.5 else (1.0,), numticks=8)
        return super().tick_values(vmin, vmax)


def _log_y(ax, which: str = "y") -> None:
    """Log axis labelled in plain numbers (matplotlib's minor labels read 6x10^0)."""
    axis = ax.yaxis if which == "y" else ax.xaxis
    (ax.set_yscale if which == "y" else ax.set_xscale)("log")
    axis.set_major_locator(_Log125Locator())
    axis.set_major_formatter(FuncFormatter(lambda v, _: fmt_num(v, 2)))
    axis.set_minor_formatter(NullFormatter())


def _log_tokens_x(ax) -> None:
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: fmt_short(x)))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=8, color="0.4",
            wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


SPECTRA_COLUMNS = ["matrix", "kind", "layer", "variant", "head", "quantity", "index", "value",
                   "value_over_median"]


@lru_cache(maxsize=4)
def _read_spectra(path: str, mtime_ns: int, size: int) -> pd.DataFrame:
    # Keyed by mtime and size too, so a rewritten file is read again.
    return read_spectra(path, SPECTRA_COLUMNS)


def _spectra(path: Path) -> pd.DataFrame:
    stat = path.stat()
    return _read_spectra(str(path), stat.st_mtime_ns, stat.st_size)


def spectrum(record: RunRecord, kind: str, quantity: str, layer: int = -1, variant: str = "effective",
             head: int = -1) -> np.ndarray | None:
    """One spectrum (descending) from a run's spectra table, or None."""
    if record.spectra_path is None:
        return None
    df = _spectra(record.spectra_path)
    sel = df[(df["kind"] == kind) & (df["layer"] == layer) & (df["variant"] == variant) & (df["head"] == head)
             & (df["quantity"] == quantity)].sort_values("index")
    return sel["value_over_median"].to_numpy() if len(sel) else None


def _matrix(record: RunRecord, kind: str, layer: int | None, variant: str = "effective") -> dict | None:
    for entry in (record.conditioning or {}).get("matrices", {}).values():
        if entry["kind"] == kind and entry["layer"] == layer:
            return entry["variants"].get(variant)
    return None


# ----------------------------------------------------------------------------------------------------------
# Loss


def loss_curves(results: Results, cell: str) -> Figure | None:
    from ngptlab.report import schedule  # not at the top: that module's section imports this one

    best = views.best_runs(results, cell)
    largest = views.budgets(results)[-1]
    with plt.rc_context(RC):
        fig, (ax,) = _subplots(1, 1, width=5.5, height=3.4)
        runs, drawn = [], False
        for arm in views.arms(results):
            seeds = sorted(s for (a, s) in best if a == arm)
            per = best[(arm, seeds[0])] if seeds else {}
            for budget, r in sorted(per.items()):
                if not r.curve:
                    continue
                t, loss = zip(*schedule.shown_curve(results, r, list(per.values())), strict=True)
                last = budget == max(per)
                ax.plot(t, loss, color=arm_color(arm), lw=1.6 if last else 0.8, alpha=1.0 if last else 0.45,
                        label=arm + ("" if budget == largest else f" (to {budget:,})") if last else None)
                runs.append(r.name)
                drawn = True
            for r in results.compared_runs(cell):
                if r.spec.arm == arm and r.status == "diverged" and r.curve:
                    t, loss = zip(*schedule.shown_curve(results, r, list(per.values())), strict=True)
                    ax.plot(t, loss, color=arm_color(arm), lw=0.8, ls=":", marker="x", markevery=[len(t) - 1],
                            label=f"{arm} lr {r.spec.lr:g}, {r.spec.budget:,} (diverged)")
                    runs.append(r.name)
                    drawn = True
        if not drawn:
            plt.close(fig)
            return None
        _log_tokens_x(ax)
        ax.set_xlabel("training tokens")
        ax.set_ylabel("validation loss")
        ax.set_title(f"{cell}: validation loss, best learning rate per budget")
        fig.legend(loc="outside right center")
        svg = _save(fig)
    return Figure(f"loss_{cell}", f"Validation loss against tokens, {cell}", schedule.loss_caption(results),
                  svg, sorted(set(runs)))


def final_loss_vs_budget(results: Results) -> Figure | None:
    cells = results.cells
    with plt.rc_context(RC):
        fig, axes = _subplots(len(cells), 3, width=3.6, height=2.8)
        runs, drawn = [], False
        for ax, cell in zip(axes, cells, strict=True):
            best = views.best_runs(results, cell)
            any_arm = False
            for arm in views.arms(results):
                per_budget: dict[int, list[float]] = {}
                for (a, _seed), per in best.items():
                    if a == arm:
                        for budget, r in per.items():
                            per_budget.setdefault(budget, []).append(r.final_val_loss)
                            runs.append(r.name)
                if per_budget:
                    b = sorted(per_budget)
                    ax.plot(b, [float(np.mean(per_budget[x])) for x in b], marker=MARKERS_2X2.get(arm, "."),
                            color=arm_color(arm), lw=1, ms=4, label=arm)
                    any_arm = drawn = True
            doc = results.speedups.get(cell)
            if doc and doc.get("targets"):
                target = float(np.mean([read_float(t["loss"]) for t in doc["targets"]]))
                ax.axhline(target, color="0.3", ls="--", lw=0.8, label="target")
            if not any_arm:
                _empty(ax, f"{cell}: no completed runs")
                continue
            _budget_axis(ax, views.budgets(results))
            ax.set_title(cell)
            ax.set_xlabel("token budget")
            ax.set_ylabel("final validation loss")
        if not drawn:
            plt.close(fig)
            return None
        _arm_legend(fig, views.arms(results), markers=True)
        svg = _save(fig)
    return Figure("final_loss_vs_budget", "Final validation loss against token budget",
                  "Best final loss over the learning-rate sweep at each budget, mean over seeds (the "
                  "paper's Fig. 2 method). Dashed: the target, the baseline's best loss at its largest "
                  "budget; an arm's speed-up is read where its curve crosses it.", svg, sorted(set(runs)))


# ----------------------------------------------------------------------------------------------------------
# Conditioning


def _reps(results: Results, cell: str) -> list[views.Representative]:
    return [rep for rep in views.representatives(results, cell)
            if rep.record is not None and rep.record.conditioning is not None]


def embeddings(results: Results, cell: str) -> Figure | None:
    reps = _reps(results, cell)
    if not reps:
        return None
    with plt.rc_context(RC):
        fig, axes = _subplots(6, 3, width=3.2, height=2.6)
        for row, kind in enumerate(("embed_in", "embed_out")):
            ax_norm, ax_eig, ax_cos = axes[3 * row], axes[3 * row + 1], axes[3 * row + 2]
            for rep in reps:
                rec = _matrix(rep.record, kind, None)
                hist = (rec or {}).get("row_norms", {}).get("histogram")
                if hist:
                    edges, counts = np.asarray(hist["edges"], float), np.asarray(hist["counts"], float)
                    # Fraction of rows per bin, not a density: unit-norm arms are a spike of width ~0.
                    ax_norm.stairs(counts / max(counts.sum(), 1), edges, color=arm_color(rep.arm),
                                   label=rep.arm)
                eig = spectrum(rep.record, kind, "cov_eigenvalue")
                if eig is not None:
                    ax_eig.plot(np.arange(1, len(eig) + 1), eig, color=arm_color(rep.arm), lw=1,
                                label=rep.arm)
                cos = (rec or {}).get("pairwise_cosine", {}).get("histogram")
                if cos:
                    counts = np.asarray(cos["counts"], float)
                    ax_cos.stairs(counts / max(counts.sum(), 1), np.asarray(cos["edges"], float),
                                  color=arm_color(rep.arm), label=rep.arm)
            name = "input" if kind == "embed_in" else "output"
            ax_norm.set_title(f"{name} embeddings: row norms")
            ax_norm.set_xlabel("norm")
            ax_norm.set_ylabel("fraction of rows")
            ax_eig.set_title(f"{name} embeddings: covariance eigenvalues")
            ax_eig.set_xlabel("index (sorted)")
            ax_eig.set_ylabel("eigenvalue / median")
            _log_y(ax_eig)
            ax_cos.set_title(f"{name} embeddings: pairwise dot products")
            ax_cos.set_xlabel("cosine of two rows")
            ax_cos.set_ylabel("fraction of pairs")
        _arm_legend(fig, [rep.arm for rep in reps])
        svg = _save(fig)
    return Figure(f"embeddings_{cell}", f"Embeddings, {cell}",
                  "As the paper's Fig. 4: distribution of the embedding row norms, the eigenvalues of "
                  "the mean-centred covariance of the embeddings, sorted, over their median (a flat "
                  "spectrum is a well-conditioned embedding), and the distribution of the dot products of "
                  "pairs of unit-normalised rows of a fixed sample (centred on 0 = isotropic).", svg,
                  [r.record.name for r in reps])


def every_layer(results: Results, cell: str) -> Figure | None:
    reps = _reps(results, cell)
    if not reps:
        return None
    skipped_inf = False
    with plt.rc_context(RC):
        fig, axes = _subplots(len(KINDS), 4, width=2.7, height=2.2)
        for ax, kind in zip(axes, KINDS, strict=True):
            for rep in reps:
                points = []
                for entry in rep.record.conditioning["matrices"].values():
                    if entry["kind"] != kind:
                        continue
                    v = entry["variants"].get("effective") or {}
                    value = (v.get("heads") or {}).get("condition_number_median") if kind in ("q", "k", "v") \
                        else v.get("condition_number")
                    if value is None:
                        continue
                    value = read_float(value)
                    if math.isinf(value):
                        skipped_inf = True
                        continue
                    points.append((entry["layer"] + 1, value))
                if points:
                    x, y = zip(*sorted(points), strict=True)
                    ax.plot(x, y, marker=MARKERS_2X2.get(rep.arm, "."), ms=3, lw=1, color=arm_color(rep.arm),
                            label=rep.arm)
            _log_y(ax)
            ax.set_title(f"{kind}: κ" + (" (median over heads)" if kind in ("q", "k", "v") else ""))
            ax.set_xlabel("layer (1-based)")
        _arm_legend(fig, [rep.arm for rep in reps], markers=True)
        svg = _save(fig)
    caption = ("As the paper's Figs. 5 and 10: condition number σmax/σmin of every attention and MLP matrix "
               "of every layer, per head (median over heads) for Q, K, V, each arm's best run at the "
               "largest budget.")
    if skipped_inf:
        caption += " Numerically singular matrices (κ = ∞) are not drawn; the tables list them."
    return Figure(f"layers_{cell}", f"Condition numbers of every layer, {cell}", caption, svg,
                  [r.record.name for r in reps])


def layers34(results: Results, cell: str) -> Figure | None:
    reps = _reps(results, cell)
    if not reps:
        return None
    with plt.rc_context(RC):
        fig, axes = _subplots(4, 2, width=3.6, height=2.6)
        for ax, (layer, kind) in zip(axes, [(3, "q"), (3, "k"), (4, "q"), (4, "k")], strict=True):
            drawn = False
            for rep in reps:
                entry = _matrix(rep.record, kind, layer - 1)
                for head in range(len((entry or {}).get("heads", {}).get("condition_number", []))):
                    sv = spectrum(rep.record, kind, "singular_value", layer=layer - 1, head=head)
                    if sv is None:
                        continue
                    ax.plot(np.arange(1, len(sv) + 1), sv, color=arm_color(rep.arm), lw=0.8, alpha=0.7,
                            label=rep.arm if head == 0 else None)
                    drawn = True
            if not drawn:
                _empty(ax, f"no layer {layer} in this model")
                continue
            _log_y(ax)
            ax.set_title(f"layer {layer}: sorted singular values for heads of {kind.upper()}")
            ax.set_xlabel("index (sorted)")
            ax.set_ylabel("σ / median σ of the head")
        _arm_legend(fig, [rep.arm for rep in reps])
        svg = _save(fig)
    return Figure(f"layers34_{cell}", f"Layers 3 and 4, {cell}",
                  "As the paper's Figs. 11-12: the sorted singular values of every head of the query and "
                  "key matrices at layers 3 and 4 (1-based), one line per head, each over its median; the "
                  "table below gives the whole-matrix and per-head-median condition numbers beside the "
                  "paper's.",
                  svg, [r.record.name for r in reps])


def _bar_panels(reps: list, panels, series: list[tuple[str, str, str]], value) -> str:
    """One panel per (metric, title), on a log axis: a group of bars per arm, one bar per series (key, label,
    colour) at value(rep, series key, metric); missing and infinite values are left out. Returns the SVG."""
    width = 0.27
    with plt.rc_context(RC):
        fig, axes = _subplots(len(panels), 2, width=4.6, height=2.8)
        for ax, (metric, title) in zip(axes, panels, strict=True):
            for j, (key, label, color) in enumerate(series):
                xs, ys = [], []
                for i, rep in enumerate(reps):
                    v = value(rep, key, metric)
                    if v is not None and not math.isinf(v):
                        xs.append(i + (j - 1) * width)
                        ys.append(v)
                if xs:
                    ax.bar(xs, ys, width, color=color, edgecolor="black", lw=0.4, label=label)
            ax.set_xticks(range(len(reps)), [rep.arm for rep in reps], rotation=30, ha="right")
            _log_y(ax)
            ax.set_title(title)
        fig.legend(*axes[0].get_legend_handles_labels(), loc="outside right center")
        return _save(fig)


def renormalization(results: Results, cell: str) -> Figure | None:
    reps = _reps(results, cell)
    if not reps:
        return None
    variants = ("effective", "renormalized", "underlying")
    metrics = (("attn_head_condition_median", "attention κ, median over heads"),
               ("embed_in_cov_condition", "input embedding covariance κ"))
    series = [(variant, variant, color) for variant, color in zip(variants, ("0.25", "0.6", "0.85"),
                                                                    strict=True)]

    def value(rep: views.Representative, variant: str, key: str) -> float | None:
        found = rep.record.headline(variant).get(key)
        return None if found is None else read_float(found)

    svg = _bar_panels(reps, metrics, series, value)
    return Figure(f"renormalization_{cell}", f"Post-hoc renormalization, {cell}",
                  "Condition numbers of the linear maps the forward pass applies to its normalised inputs "
                  "(effective), the same after nGPT's normalization applied after training (renormalized; "
                  "the paper's Fig. 10 dotted lines), and the raw parameters (underlying). Renormalizing a "
                  "GPT after the fact shows how much of "
                  "nGPT's conditioning the normalization alone explains.", svg, [r.record.name for r in reps])


REFERENCE_METRICS = (("attn_head_condition_median", "attention κ, median over heads"),
                     ("attn_condition_median", "attention κ (whole), median"),
                     ("mlp_condition_median", "MLP κ, median"),
                     ("embed_in_cov_condition", "input embedding covariance κ"))


def reference_value(record: RunRecord, source: str, key: str) -> float | None:
    """A headline κ of the effective matrices: trained, at initialisation (same seed) or the Gaussian median
    for the same shape; None where the conditioning result has no such number."""
    if source == "trained":
        value = record.headline("effective").get(key)
    else:
        ref = (record.conditioning or {}).get("reference", {}).get(source, {}).get("headline", {})
        value = ref.get("effective", {}).get(key) if source == "init" else ref.get(key)
    return None if value is None else read_float(value)


def references(results: Results, cell: str) -> Figure | None:
    reps = _reps(results, cell)
    if not reps:
        return None
    series = [("trained", "trained", "0.25"), ("init", "at initialisation", "0.6"),
              ("gaussian", "Gaussian, same shape", "0.88")]
    svg = _bar_panels(reps, REFERENCE_METRICS, series,
                      lambda rep, source, key: reference_value(rep.record, source, key))
    return Figure(f"references_{cell}", f"Trained against initialisation and random, {cell}",
                  "Condition numbers of each arm's effective matrices after training, the same run's "
                  "matrices at initialisation (rebuilt from its seed), and the median for Gaussian "
                  "matrices of the same shape: a difference between arms that the references share is the "
                  "shape or the initialisation, not learning.", svg, [r.record.name for r in reps])


# ----------------------------------------------------------------------------------------------------------
# Settle it


def settle(results: Results, arm_rows: pd.DataFrame, metrics: dict[str, str]) -> Figure | None:
    """Speed-up against conditioning, one point per (cell, arm); the 2x2 arms marked and labelled."""
    if arm_rows.empty:
        return None
    cells = list(results.cells)
    runs: list[str] = []
    with plt.rc_context(RC):
        fig, axes = _subplots(len(metrics), 2, width=4.4, height=3.4)
        drawn = False
        for ax, (metric, label) in zip(axes, metrics.items(), strict=True):
            ys: list[float] = []
            for _, row in arm_rows.iterrows():
                doc = results.speedups.get(row["cell"])
                entry = (doc or {}).get("arms", {}).get(row["arm"])
                if entry is None or entry["speedup"]["value"] is None:
                    continue
                x = float(row.get(metric, math.nan))
                if not math.isfinite(x):
                    continue
                s = entry["speedup"]
                y = read_float(s["value"])
                in_2x2 = row["arm"] in MARKERS_2X2
                color = arm_color(row["arm"])
                ys += [1.0, y, y * 1.5 if s["bound"] == ">" else y / 1.5 if s["bound"] else y]
                if s["bound"]:
                    # A bound is not a point: a hollow triangle with an arrow toward where the value lies.
                    ax.scatter([x], [y], marker="^" if s["bound"] == ">" else "v", s=60 if in_2x2 else 30,
                               facecolors="none", edgecolors=color, linewidths=1.2, zorder=3)
                    ax.annotate("", (x, y * (1.5 if s["bound"] == ">" else 1 / 1.5)), xytext=(x, y),
                                arrowprops={"arrowstyle": "->", "color": color, "lw": 1.0})
                else:
                    ax.scatter([x], [y], marker=CELL_MARKERS[cells.index(row["cell"]) % 10],
                               s=60 if in_2x2 else 25, color=color, edgecolors="black" if in_2x2 else "none",
                               linewidths=0.6, zorder=3)
                if s.get("interval"):
                    lo, hi = (read_float(v) for v in s["interval"])
                    ys += [lo, hi]
                    ax.plot([x, x], [lo, hi], color=arm_color(row["arm"]), lw=1, zorder=2)
                if in_2x2:
                    name = row["arm"] + (f" ({s['display']})" if s["bound"] else "")
                    # Each 2x2 arm its own label offset, so arms at the same point stay readable.
                    dy = (4, -11, 15, -22)[list(MARKERS_2X2).index(row["arm"])]
                    ax.annotate(name, (x, y), xytext=(5, dy), textcoords="offset points", fontsize=7)
                runs += [b["run"] for p in entry.get("per_seed", []) for b in p.get("best", [])]
                drawn = True
            ax.axhline(1.0, color="0.4", lw=0.8, ls="--")
            _log_y(ax, "x")
            _log_y(ax)
            if ys:  # room for intervals and bound arrows, which autoscaling ignores
                ax.set_ylim(min(ys) / 1.3, max(ys) * 1.3)
            ax.set_xlabel(label)
            ax.set_ylabel("speed-up over the baseline")
        if not drawn:
            plt.close(fig)
            return None
        # Colour = arm, shape = cell.
        handles = [plt.Line2D([], [], ls="", marker="o", color=arm_color(a), label=a)
                   for a in views.arms(results)]
        handles += [plt.Line2D([], [], ls="", marker=CELL_MARKERS[i % 10], color="0.5", label=c)
                    for i, c in enumerate(cells)]
        handles += [plt.Line2D([], [], ls="", marker=m, markerfacecolor="none", color="0.5", label=t)
                    for m, t in (("^", "lower bound (>): the speed-up is larger"),
                                 ("v", "upper bound (<): the speed-up is smaller"))]
        fig.legend(handles=handles, loc="outside right center")
        svg = _save(fig)
    return Figure("settle", "Speed-up against conditioning, across arms and scales",
                  "One point per (cell, arm): the arm's speed-up over the baseline against the conditioning "
                  "of its best runs at its largest budget. Outlined and labelled: the 2x2 arms (gpt, "
                  "gpt-rownorm, gpt-orth, ngpt). Vertical lines: 95% t-intervals on ln S over seeds. Hollow "
                  "triangles with arrows: bounds; the true speed-up lies in the arrow's direction. If "
                  "conditioning drives the speed-up, the points fall from upper left (well conditioned, "
                  "fast) to lower right.", svg, sorted(set(runs)))

