"""The evidence of the section "Settle it": each arm's speed-up beside its conditioning and its effective
learning rate, across arms and cells (the section and its verdicts: settle.py).

The speed-ups are the speed-up stage's (results/speedup/<cell>.json, through ngptlab.speedup.document), the
condition numbers the condition stage's of each arm's best runs at its largest budget (crossarm.arm_table),
the angular rates the speed-up file's rivals (speedup/rivals.py). Read top to bottom:

  settle_figure       speed-up against conditioning, one point per (cell, arm)
  settle_table        per (cell, arm): place in the design, speed-up, conditioning (crossarm.arm_table) and
                      the angular update rate (the speed-up file's rivals)
  tracking_table      rank correlation over arms and cells of ln S with ln κ and with ln angular rate
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ngptlab.report.kit import plot, views
from ngptlab.report.kit.document import Figure
from ngptlab.report.kit.load import Results
from ngptlab.report.kit.speedups import speedup_level
from ngptlab.report.kit.table import Table, fmt_int, fmt_loss, fmt_num, fmt_text, levelled
from ngptlab.results import read_float
from ngptlab.stats import rank_correlation

SETTLE_METRICS = {"eff_attn_head_condition_median": "κ attention, median over heads",
                  "eff_embed_in_cov_condition": "κ input emb. cov."}


def settle_figure(results: Results, arm_rows: pd.DataFrame, metrics: dict[str, str]) -> Figure | None:
    """Speed-up against conditioning, one point per (cell, arm) in the arm's colour and marker: a row of
    panels per cell, one panel per metric; the 2x2 arms outlined and labelled, the labels moved apart."""
    if arm_rows.empty:
        return None
    cells = list(results.cells)
    runs: list[str] = []
    with plot.panels(len(cells) * len(metrics), len(metrics), width=4.4, height=3.4) as (fig, axes):
        drawn = False
        labels: dict = {}  # axes -> its labels, moved apart once the figure is laid out
        panels = [(cell, metric, label) for cell in cells for metric, label in metrics.items()]
        for ax, (cell, metric, label) in zip(axes, panels, strict=True):
            ys: list[float] = []
            rows = {row["arm"]: row for _, row in arm_rows[arm_rows["cell"] == cell].iterrows()}
            for arm in plot.drawing_order(rows):
                row = rows[arm]
                doc = results.speedups.get(cell)
                entry = doc.arms.get(arm) if doc else None
                if entry is None or entry.speedup.value is None:
                    continue
                x = float(row.get(metric, math.nan))
                if not math.isfinite(x):
                    continue
                s = entry.speedup
                y = s.value
                in_2x2 = arm in views.DESIGN_2X2
                color, z = plot.arm_color(arm), plot.arm_zorder(arm, 3)
                ys += [1.0, y, y * 1.5 if s.bound == ">" else y / 1.5 if s.bound else y]
                if s.bound:
                    # A bound is not a point: the arm's marker hollow, with an arrow toward where the value
                    # lies (bounds of several arms often share a value: each keeps its own shape).
                    ax.scatter([x], [y], marker=plot.arm_marker(arm), s=60 if in_2x2 else 30,
                               facecolors="none", edgecolors=color, linewidths=1.2, zorder=z)
                    ax.annotate("", (x, y * (1.5 if s.bound == ">" else 1 / 1.5)), xytext=(x, y),
                                arrowprops={"arrowstyle": "->", "color": color, "lw": 1.0}, zorder=z)
                else:
                    ax.scatter([x], [y], marker=plot.arm_marker(arm), s=60 if in_2x2 else 25,
                               color=color, edgecolors="black" if in_2x2 else "none", linewidths=0.6,
                               zorder=z)
                if s.interval:
                    lo, hi = s.interval
                    ys += [lo, hi]
                    ax.plot([x, x], [lo, hi], color=color, lw=1, zorder=z - 1)
                if in_2x2:
                    name = arm + (f" ({s.display})" if s.bound else "")
                    labels.setdefault(ax, []).append(
                        ax.annotate(name, (x, y), xytext=(6, 4), textcoords="offset points", fontsize=7,
                                    color=color if plot.is_baseline(arm) else "black", zorder=5))
                runs += [b.run for p in entry.per_seed for b in p.best]
                drawn = True
            ax.axhline(1.0, color=plot.KEY_COLOR, lw=0.8, ls="--", zorder=1)
            plot.log_axis(ax, "x")
            plot.log_axis(ax)
            if ys:  # room for intervals and bound arrows, which autoscaling ignores
                ax.set_ylim(min(ys) / 1.3, max(ys) * 1.3)
            ax.set_title(f"{cell}\nspeed-up against {label}")
            ax.set_xlabel(label)
            ax.set_ylabel("speed-up over the baseline")
        if not drawn:
            plot.discard(fig)
            return None
        handles = [plot.arm_handle(a, line=False) for a in views.arms(results)]
        handles += [plot.key_handle("o", "hollow, with an arrow: a bound (> or <);\nthe speed-up lies where "
                                    "the arrow points", hollow=True),
                    plot.key_line("speed-up 1: the baseline's", "--")]
        plot.legend(fig, handles)
        plot.dodge_labels(fig, list(labels.values()))
        svg = plot.save(fig)
    return Figure("settle", "Speed-up against conditioning, across arms and scales",
                  "One point per (cell, arm): the arm's speed-up over the baseline against the conditioning "
                  "of its best runs at its largest budget, one panel per measure of conditioning. Outlined "
                  "and labelled: the 2x2 arms (gpt, gpt-rownorm, gpt-orth, ngpt); the baseline in black, on "
                  f"top. Vertical lines: {levelled(speedup_level(results), 't-intervals')} on ln S over "
                  "seeds. Hollow markers with arrows: "
                  "bounds; the true speed-up lies in the arrow's direction. If conditioning drives the "
                  "speed-up, the points fall from upper left (well conditioned, fast) to lower right.", svg,
                  sorted(set(runs)))


ANGULAR = "angular rate (rad/step)"
ANGULAR_HOW = ("the speed-up file's rivals (speedup/rivals.py): per seed, the run entering its estimate at "
               "the arm's largest budget, mean over its evaluation points of the mean over the attention and "
               "MLP matrix kinds of the angle turned per step; geometric mean over the estimate seeds")


def angular_rate(results: Results, cell: str, arm: str) -> float | None:
    """The arm's angular update rate from the cell's speed-up file (None: not there or not logged)."""
    doc = results.speedups.get(cell)
    return doc.rivals.angular_rates.get(arm) if doc and doc.rivals else None


def settle_table(results: Results, arm_rows: pd.DataFrame, cross: pd.DataFrame) -> Table:
    """Per (cell, arm): place in the design, speed-up, conditioning (crossarm.arm_table) and angular rate."""
    cols = ["cell", "arm", "norms", "conditioning", "speedup", "speedup_display", *SETTLE_METRICS,
            "angular_rate", "final_val_loss", "n_seeds"]
    t = Table("settle", "Speed-up against conditioning and the effective learning rate, per arm", cols,
              key=["cell", "arm"],
              headers={"speedup_display": "speed-up", "final_val_loss": "final val loss (mean)",
                       "n_seeds": "seeds", "angular_rate": ANGULAR,
                       "norms": "weight norms", "conditioning": "conditioning", **SETTLE_METRICS},
              formats={"cell": fmt_text, "arm": fmt_text, "norms": fmt_text, "conditioning": fmt_text,
                       "speedup_display": fmt_text, "final_val_loss": fmt_loss, "n_seeds": fmt_int},
              shown=["cell", "arm", "norms", "conditioning", "speedup_display", *SETTLE_METRICS,
                     "angular_rate", "final_val_loss", "n_seeds"],
              note="κ: the condition stage's analysis of each arm's best-learning-rate runs at its largest "
                   "budget, mean over seeds (report/crossarm.py arm_table); the speed-up file's κ over "
                   f"training is not repeated here. Angular rate: {ANGULAR_HOW}; — where the runs predate "
                   "it (Kosson et al. 2023, arXiv 2305.17212: the effective learning rate).")
    for _, row in arm_rows.iterrows():
        chosen = cross[(cross["cell"] == row["cell"]) & (cross["arm"] == row["arm"])
                       & cross["best_lr_for_budget"] & (cross["budget"] == row["budget"])]
        t.add({"cell": row["cell"], "arm": row["arm"], "norms": row["norms"],
               "conditioning": row["conditioning"],
               "speedup": _float(row["speedup"]), "speedup_display": row["speedup_display"] or None,
               **{m: _float(row.get(m)) for m in SETTLE_METRICS},
               "angular_rate": angular_rate(results, row["cell"], row["arm"]),
               "final_val_loss": _float(row["final_val_loss"]), "n_seeds": int(row["n_seeds"])},
              list(chosen["run"]))
    return t


def _float(x) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def _log(x) -> float | None:
    """ln x of a positive finite number ("inf" and null read as in ngptlab.results), else None."""
    x = None if x is None else read_float(x)
    return math.log(x) if x is not None and 0 < x < math.inf else None


def tracking_points(results: Results, arm_rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (cell, arm) with a speed-up: cell, arm, ln_s, bounded (S is a bound), and ln of each
    SETTLE_METRICS κ and of the angular rate (nan where missing, infinite or not positive)."""
    out = []
    for _, row in arm_rows.iterrows():
        doc = results.speedups.get(row["cell"])
        entry = doc.arms.get(row["arm"]) if doc else None
        if entry is None or _log(entry.speedup.value) is None:
            continue
        values = {**{m: row.get(m) for m in SETTLE_METRICS},
                  ANGULAR: angular_rate(results, row["cell"], row["arm"])}
        out.append({"cell": row["cell"], "arm": row["arm"], "ln_s": _log(entry.speedup.value),
                    # a bool: pandas would read a None beside ">" as nan, which is truthy
                    "bounded": entry.speedup.bound is not None,
                    **{name: _log(v) if _log(v) is not None else math.nan for name, v in values.items()}})
    return pd.DataFrame(out, columns=["cell", "arm", "ln_s", "bounded", *SETTLE_METRICS, ANGULAR])


def tracking_table(results: Results, arm_rows: pd.DataFrame, cross: pd.DataFrame) -> Table:
    """Spearman ρ over arms and cells of ln S with ln κ (each SETTLE_METRICS) and with ln angular rate, with
    its interval by Fisher's z at rank_correlation's level (ngptlab.stats), as the header and note state."""
    cols = ["metric", "rho", "interval_lo", "interval_hi", "rho_display", "n", "n_cells", "bounds", "method",
            "note"]
    how = rank_correlation([], [])  # the method and level every row below is computed at
    level = f"{how['level']:.0%}"
    t = Table("tracking", "Rank correlation over arms and cells of the speed-up with κ and with the "
              "angular rate", cols, key=["metric"],
              headers={"rho_display": f"Spearman ρ [{level} interval]", "n": "(cell, arm) points",
                       "n_cells": "cells", "bounds": "points entering as a bound"},
              formats={c: fmt_text for c in ("metric", "rho_display", "bounds", "method", "note")}
              | {"n": fmt_int, "n_cells": fmt_int},
              shown=["metric", "rho_display", "n", "n_cells", "bounds", "note"],
              note="One point per (cell, arm) with a speed-up and the number (the baseline included, at "
                   "S = 1): ln S against ln κ (the condition stage's, as in the table above) and against ln "
                   f"angular rate ({ANGULAR_HOW}). Method: {how['method']}, at {level}. "
                   "Arms and cells are not randomised: a correlation, not a cause; points of one cell share "
                   "its baseline, so they are not independent and the interval is optimistic. A bound "
                   "enters at its bound value, which can misplace that arm's rank: read a ρ with bounds "
                   "with care. A negative ρ with κ means: the better conditioned (smaller κ), the larger the "
                   "speed-up; a positive ρ with the angular rate: the faster the weights turn, the larger.")
    points = tracking_points(results, arm_rows)
    if points.empty:
        return t
    chosen = cross[cross["best_lr_for_budget"]]
    chosen = chosen[chosen["budget"] == chosen.groupby(["cell", "arm"])["budget"].transform("max")]
    for metric in (*SETTLE_METRICS, ANGULAR):
        used = points[np.isfinite(points[metric])]
        r = rank_correlation(list(used["ln_s"]), list(used[metric]))
        lo, hi = r["interval"] or (None, None)
        display = (None if r["rho"] is None else fmt_num(r["rho"], 2)
                   + (f" [{fmt_num(lo, 2)}, {fmt_num(hi, 2)}]" if r["interval"] else " (no interval)"))
        bounds = [f"{row.cell} {row.arm}" for row in used.itertuples() if row.bounded]
        runs = chosen.merge(used[["cell", "arm"]], on=["cell", "arm"])["run"]  # the runs arm_table averaged
        t.add({"metric": SETTLE_METRICS.get(metric, metric), "rho": r["rho"], "interval_lo": lo,
               "interval_hi": hi, "rho_display": display, "n": r["n"], "n_cells": used["cell"].nunique(),
               "bounds": ", ".join(bounds) or None, "method": r["method"], "note": r["note"]}, list(runs))
    return t
