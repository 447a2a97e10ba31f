"""The section "The accounts as dose-responses": each account read as a prediction from the arms' measured
mechanisms (speedup/dose_response.py): the readings of the conditioning and effective-learning-rate accounts
the section before states wherever a line is fitted.

Per cell a figure: ln S against ln kappa (layer 3-4 Q and K heads) and against ln angular rate, each relative
to the baseline's, every arm a point in its style (models/arms.yaml) with its bootstrap intervals on both
axes, ngpt ringed, and each account's fitted line through the baseline with its band (the slope's interval:
the line passes through the origin, so the band at X is [b_lo X, b_hi X]); and one table of the slopes and
readings. The section shows what the speed-up files say; besides them it computes only the paper's line: in
the ln kappa panel, where the paper gives a speed-up at the cell's context (paper/paper_numbers.yaml), the
line the paper's claim implies if conditioning explains it, through gpt's point and ngpt's measured ln kappa
at gpt's ln S + ln S_paper (slope ln S_paper / (X_ngpt - X_gpt); through the origin when gpt is the
baseline).
"""

from __future__ import annotations

import math

from ngptlab.models import arms as arm_table
from ngptlab.paper import paper_speedup
from ngptlab.report.kit import plot, views
from ngptlab.report.kit.document import Document, Figure, FigureBlock, Heading, TableBlock, Text
from ngptlab.report.kit.load import Results
from ngptlab.report.kit.speedups import arm_runs
from ngptlab.report.kit.table import Table, fmt_levels, fmt_text
from ngptlab.speedup.document import SpeedupDocument
from ngptlab.speedup.dose_response import NGPT, PREDICTORS

AXES = {p.account: f"{p.label.split(' (')[0]} − the baseline's" for p in PREDICTORS}
KAPPA_ACCOUNT = next(p.account for p in PREDICTORS if p.key == "x_kappa")
GPT = arm_table.square("conditioning")["00"]


def context_text(context: int) -> str:
    """4096 -> '4k', as the paper names its contexts."""
    return f"{context // 1024}k" if context % 1024 == 0 else f"{context:,}"


def paper_line(doc: SpeedupDocument, account: dict) -> tuple[float, float, float, str] | None:
    """(x0, y0, slope, label) of the line the paper's speed-up implies if conditioning explains it: through
    gpt's point (x0, y0) and (ngpt's X, y0 + ln S_paper), S_paper the paper's speed-up of ngpt over gpt at
    the cell's context; None where the paper has no figure there, gpt or ngpt is not on the account's axis,
    or both sit at the same x (no slope)."""
    ref = paper_speedup(doc.context) if doc.context is not None else None
    points = account["arms"]
    if ref is None or GPT not in points or NGPT not in points:
        return None
    x0, y0 = points[GPT]["x"]["mean"], points[GPT]["y"]["mean"]
    dx = points[NGPT]["x"]["mean"] - x0
    if dx == 0:
        return None
    label = f"paper: x{ref['factor']:g} at {context_text(doc.context)} context, through {NGPT}'s kappa"
    return x0, y0, math.log(ref["factor"]) / dx, label


def interval_text(estimate: float | None, interval: list[float] | None) -> str | None:
    if estimate is None:
        return None
    return f"{estimate:+.3g}" + ("" if interval is None else f" [{interval[0]:+.3g}, {interval[1]:+.3g}]")


def slopes_table(results: Results, readings: bool = True) -> Table:
    """Each account's slope per cell and, with `readings`, what it reads (without: the measurements only, as
    where the grid is too small to read anything)."""
    cols = ["cell", "account", "predictor", "predicted", "slope", "fitted", "excluded"]
    cols += ["reading", "apart"] if readings else []
    level = fmt_levels((d.dose_response or {}).get("level") for d in results.speedups.values() if d)
    t = Table("dose_response", "Each account's line over the arms' measured mechanisms", cols,
              key=["cell", "account"], formats=dict.fromkeys(cols, fmt_text),
              headers={"predicted": "predicted slope", "slope": "slope [interval]", "fitted": "arms fitted",
                       "excluded": "left out of the line", "apart": "can the accounts be told apart"},
              note="ln S = b (x − x_baseline), least squares through the baseline over the arms' means "
                   "over seeds (each arm one point). Intervals: percentile bootstrap resampling seeds within "
                   "each arm, x and y together (speedup/dose_response.py, "
                   + (f"its level in the file: {level}). " if level else "no level in the file). ") +
                   "Reading: consistent when the slope's interval excludes 0 on the predicted side and every "
                   "arm, ngpt among them, lies within the margin of its prediction; inconsistent when an "
                   "arm's interval lies wholly beyond it; the accounts cannot be told apart when the arms' "
                   "kappa and angle move together.")
    for cell, doc in results.speedups.items():
        found = doc.dose_response if doc else None
        for name, account in (found or {}).get("accounts", {}).items():
            slope = account["slope"]
            apart = found["distinguishable"]
            t.add({"cell": cell, "account": name, "predictor": account["predictor"],
                   "predicted": account["predicted_sign"],
                   "slope": interval_text(slope["estimate"], slope["interval"]),
                   "fitted": ", ".join(account["fitted_arms"]),
                   "excluded": "; ".join(e["reason"] for e in account["excluded"]) or None,
                   **({"reading": account["words"],
                       "apart": {True: "yes", False: apart["reason"], None: None}[apart["verdict"]]}
                      if readings else {})},
                  [r for arm in account["arms"] for r in arm_runs(doc, arm)])
    return t


def _errors(entry: dict, axis: str) -> list[float]:
    interval, mean = entry[axis]["interval"], entry[axis]["mean"]
    return [0.0, 0.0] if interval is None else [mean - interval[0], interval[1] - mean]


def dose_figure(cell: str, doc: SpeedupDocument, readings: bool = True) -> Figure | None:
    """ln S against each account's predictor, every arm a point with its intervals, the line and its band,
    each panel titled with the account and, with `readings`, what it reads; None where neither account has a
    line."""
    found = doc.dose_response or {}
    fits = [a for a in found.get("accounts", {}).values() if a["slope"]["estimate"] is not None]
    if not fits:
        return None
    arms = [arm for arm in doc.arms_order if any(arm in a["arms"] for a in fits)]
    paper = None
    with plot.panels(len(fits), 2, width=4.2, height=3.2) as (fig, axes):
        for ax, account in zip(axes, fits, strict=True):
            line = paper_line(doc, account) if account["account"] == KAPPA_ACCOUNT else None
            xs = [0.0, *(e["x"]["mean"] for e in account["arms"].values())]
            pad = 0.1 * (max(xs) - min(xs)) or 0.5
            lo, hi = min(xs) - pad, max(xs) + pad  # the line over the arms' range only
            grid = [lo + (hi - lo) * i / 40 for i in range(41)]
            b, interval = account["slope"]["estimate"], account["slope"]["interval"]
            ax.plot(grid, [b * x for x in grid], color=plot.KEY_COLOR, lw=1)
            if interval is not None:
                ax.fill_between(grid, [min(interval[0] * x, interval[1] * x) for x in grid],
                                [max(interval[0] * x, interval[1] * x) for x in grid], color=plot.KEY_COLOR,
                                alpha=0.2, lw=0)
            if line is not None:
                x0, y0, slope, paper = line
                ax.plot(grid, [y0 + slope * (x - x0) for x in grid], color=plot.KEY_COLOR, lw=1, ls="--",
                        label=paper)
            for arm in plot.drawing_order(a for a in arms if a in account["arms"]):
                e = account["arms"][arm]
                ax.errorbar([e["x"]["mean"]], [e["y"]["mean"]], xerr=[[v] for v in _errors(e, "x")],
                            yerr=[[v] for v in _errors(e, "y")], color=plot.arm_color(arm),
                            marker=plot.arm_marker(arm), ms=6, lw=1, capsize=2, zorder=plot.arm_zorder(arm))
                if arm == NGPT:
                    ax.plot([e["x"]["mean"]], [e["y"]["mean"]], marker="o", ms=14, mfc="none",
                            color=plot.arm_color(arm), lw=0)
            # the reading on a line of its own: two panels' titles side by side must not run into each other
            ax.set_title(account["account"] + (f"\n{account['reading']}" if readings else ""), fontsize=9)
            ax.set_xlabel(AXES[account["account"]])
            ax.set_ylabel("ln S (speed-up over the baseline)")
        plot.legend(fig, [*(plot.arm_handle(arm, line=False) for arm in arms),
                          plot.key_handle("o", f"{NGPT} (ringed)", hollow=True),
                          plot.key_line("the account's line, its band the slope's interval"),
                          *([plot.key_line(paper, ls="--")] if paper else [])])
        svg = plot.save(fig)
    level = fmt_levels([found.get("level")])
    caption = ("Each arm's ln S against its measured ln kappa (layer 3-4 Q and K heads) and ln angular "
               f"rate, both against the baseline's; means over seeds with {level + ' ' if level else ''}"
               "percentile bootstrap "
               "intervals on both axes (seeds resampled within each arm, x and y together); each account's "
               "line through the baseline, fitted to the arms' means, its band the slope's interval "
               "(speedup/dose_response.py). An arm left out of the kappa line (gpt-orth at kappa 1 below it, "
               "an angle arm off its optimum) is drawn still."
               + (f" Dashed ({paper.split(',')[0]}): the line the paper's speed-up of {NGPT} over {GPT} at "
                  f"this context implies if conditioning explains it: through {GPT}'s point and, at {NGPT}'s "
                  f"measured ln kappa, ln S_paper above {GPT}'s (paper/paper_numbers.yaml)."
                  if paper else ""))
    runs = [r for arm in arms for r in arm_runs(doc, arm)]
    return Figure(f"dose_response_{cell}", f"The accounts as dose-responses, {cell}", caption, svg, runs)


def section(doc: Document, results: Results) -> None:
    """The section, where some speed-up file has a dose_response (files from before have none)."""
    cells = {cell: d for cell, d in results.speedups.items() if d and d.dose_response}
    if not cells:
        return
    doc.add(Heading("The accounts as dose-responses", "dose-response"))
    doc.add(Text(
        "An account is a claim about a mechanism, so its prediction for an arm follows from that arm's "
        "measured mechanism, not its name: the conditioning account predicts the speed-up to rise as kappa "
        "falls (slope < 0), the effective-learning-rate account as the angle per step rises (slope > 0), "
        "each with ngpt on its line. These lines are the cell's readings of both accounts (the section "
        "before)."))
    too_small = views.too_small(results)  # as the settle-it section: the measurements shown, nothing read
    doc.add(Text("**Readings.** " + (
        "None, by design: the grid's largest budget is below report.min_budget_for_claims." if too_small else
        " ".join(f"{cell}: " + "; ".join(a["words"] for a in d.dose_response["accounts"].values()) + "."
                 for cell, d in cells.items()))))
    table = slopes_table(results, readings=not too_small)
    if len(table):
        doc.add(TableBlock(table))
    for cell, d in cells.items():
        figure = dose_figure(cell, d, readings=not too_small)
        if figure is not None:
            doc.add(FigureBlock(figure))
