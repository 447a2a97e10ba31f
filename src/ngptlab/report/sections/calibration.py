"""The section "Calibration: WSD against cosine", for a WSD grid with cosine calibration runs.

With train.schedule: wsd (ngptlab.grid.trunks) every arm is compared under WSD, not under the paper's cosine.
train.calibrate adds cosine runs at some budgets; they never enter the comparison of arms
(Results.compared_runs), and the calibration table says how far WSD's final loss sits from cosine's at those
budgets, per arm. The speed-up compares arms in tokens to a target loss: it is the speed-up cosine would give
only if that shift is the same for every arm, so the section tests exactly that.
"""

from __future__ import annotations

import math
import statistics

from ngptlab import schedule as schedules
from ngptlab.paper import WSD_CITATION
from ngptlab.report.kit import views
from ngptlab.report.kit.document import Bullets, Callout, Document, Heading, TableBlock, Text
from ngptlab.report.kit.load import Results, RunRecord
from ngptlab.report.kit.table import MISSING, Table, fmt_int, fmt_loss, fmt_text
from ngptlab.schedule import calibration_budgets
from ngptlab.speedup.lr_policy import BUDGET as PER_BUDGET
from ngptlab.stats import LEVEL, t_interval


def section(doc: Document, results: Results) -> None:
    """The calibration section, only for a grid with calibration runs (train.calibrate)."""
    train = results.params.train
    if not calibration_budgets(train):
        return
    baseline = results.params.speedup.baselines[0]
    doc.add(Heading("Calibration: WSD against cosine", "calibration"))
    doc.add(Text(
        f"The arms are compared under WSD ({WSD_CITATION}), the paper under cosine. At "
        f"{', '.join(f'{b:,}' for b in calibration_budgets(train))} tokens every arm, learning rate and seed "
        "was also trained with the paper's cosine schedule. The table gives WSD's final validation loss "
        "minus cosine's, at each schedule's best learning rate (as the speed-up compares them) and as the "
        f"mean over the runs paired by (learning rate, seed), with a {LEVEL:.0%} t-interval over the n "
        "paired differences."))
    table = calibration_table(results)
    doc.add(TableBlock(table))
    left_out = [name for row in table.rows for name in (row[table.columns.index("left_out")] or "").split()]
    if left_out:
        statuses = {name: results.runs[name].status for name in left_out}
        doc.add(Callout("Left out of the calibration (not completed: no final loss), each with its twin of "
                        "the other schedule: " + ", ".join(f"`{n}` ({s})" for n, s in statuses.items()) + ".",
                        kind="note"))
    doc.add(Text(
        f"Is the shift the same for every arm? Each arm's mean shift against the baseline {baseline}'s: two "
        "shifts differ when they lie further apart than their combined interval (the two half-widths added "
        "in quadrature). The speed-up is comparable across arms only if the shift is the same: an arm that "
        "WSD helps or hurts more than the baseline gets a WSD speed-up that cosine would not give it."),
        Bullets(same_shift(table, baseline)))


def calibration_table(results: Results) -> Table:
    """Per cell, arm and calibration budget: final validation loss of WSD minus cosine."""
    level = f"{LEVEL:.0%}"
    cols = ["cell", "arm", "budget", "wsd_loss", "wsd_lr", "cosine_loss", "cosine_lr", "best_shift",
            "n_seeds", "mean_shift", "interval_lo", "interval_hi", "n_pairs", "mean_display", "left_out"]
    t = Table("calibration", "Calibration: final validation loss of WSD minus cosine at the same budget",
              cols, key=["cell", "arm", "budget"],
              headers={"wsd_loss": "WSD best loss", "wsd_lr": "WSD best lr",
                       "cosine_loss": "cosine best loss", "cosine_lr": "cosine best lr",
                       "best_shift": "shift at best lr", "n_seeds": "seeds",
                       "mean_shift": "mean shift over pairs", "interval_lo": f"{level} lo",
                       "interval_hi": f"{level} hi", "n_pairs": "pairs",
                       "mean_display": f"mean shift over pairs [{level} t-interval]",
                       "left_out": "left out (not completed)"},
              formats={"cell": fmt_text, "arm": fmt_text, "budget": fmt_int, "wsd_loss": fmt_loss,
                       "cosine_loss": fmt_loss, "best_shift": fmt_shift, "n_seeds": fmt_int,
                       "mean_shift": fmt_shift, "interval_lo": fmt_shift, "interval_hi": fmt_shift,
                       "n_pairs": fmt_int, "mean_display": fmt_text, "left_out": fmt_text, "wsd_lr": fmt_lrs,
                       "cosine_lr": fmt_lrs},
              shown=["cell", "arm", "budget", "wsd_loss", "wsd_lr", "cosine_loss", "cosine_lr", "best_shift",
                     "mean_display", "n_pairs"],
              note="shift = WSD minus cosine (negative: WSD reaches a lower loss). At best lr: each "
                   "schedule at its own best learning rate per seed (the speed-up's rule), best WSD minus "
                   "best cosine, mean over seeds. Mean over pairs: every (learning rate, seed) with both "
                   f"runs completed, WSD minus cosine, with a {level} t-interval over the n paired "
                   "differences (mean ± t(n - 1) s/√n); one pair: no interval. Runs not completed are left "
                   "out, with their twin of the other schedule.")
    for cell in results.cells:
        for arm in views.arms(results):
            for budget in calibration_budgets(results.params.train):
                t.add(*_calibration_row(results, cell, arm, budget))
    return t


def _calibration_row(results: Results, cell: str, arm: str, budget: int) -> tuple[dict, list[str]]:
    runs = {s: [r for r in results.cell_runs(cell) if r.spec.arm == arm and r.spec.budget == budget
                and r.spec.schedule == s] for s in (schedules.WSD, schedules.COSINE)}
    left_out = sorted(r.name for rs in runs.values() for r in rs if not _usable(r))
    cosine = {(r.spec.lr, r.spec.seed): r for r in runs[schedules.COSINE] if _usable(r)}
    pairs = [(w, cosine[(w.spec.lr, w.spec.seed)]) for w in runs[schedules.WSD]
             if _usable(w) and (w.spec.lr, w.spec.seed) in cosine]
    diffs = [w.final_val_loss - c.final_val_loss for w, c in pairs]
    interval = t_interval(diffs)
    mean = statistics.fmean(diffs) if diffs else None
    # At each schedule's best learning rate, per seed (as the speed-up picks them), for seeds with both.
    best = {s: {seed: per[budget] for (_, seed), per in views.best_of(results, rs, rule=PER_BUDGET).items()
                if budget in per} for s, rs in runs.items()}
    seeds = sorted(set(best[schedules.WSD]) & set(best[schedules.COSINE]))
    chosen = {s: [best[s][seed] for seed in seeds] for s in best}
    losses = {s: statistics.fmean(r.final_val_loss for r in chosen[s]) if seeds else None for s in chosen}
    shifts = [best[schedules.WSD][s].final_val_loss - best[schedules.COSINE][s].final_val_loss for s in seeds]
    lo, hi = interval or (None, None)
    values = {"cell": cell, "arm": arm, "budget": budget,
              "wsd_loss": losses[schedules.WSD], "wsd_lr": _lrs(chosen[schedules.WSD]),
              "cosine_loss": losses[schedules.COSINE], "cosine_lr": _lrs(chosen[schedules.COSINE]),
              "best_shift": statistics.fmean(shifts) if shifts else None, "n_seeds": len(seeds),
              "mean_shift": mean, "interval_lo": lo, "interval_hi": hi, "n_pairs": len(diffs),
              "mean_display": _mean_display(mean, interval), "left_out": " ".join(left_out) or None}
    behind = [r.name for pair in pairs for r in pair] + [r.name for rs in chosen.values() for r in rs]
    return values, behind


def same_shift(table: Table, baseline: str) -> list[str]:
    """Per cell and budget, one sentence: does every arm's mean shift match the baseline arm's? Two shifts
    differ when they are further apart than their combined interval (the half-widths added in quadrature,
    as for a difference of independent means)."""
    col = table.columns.index

    def half(row: list) -> float:
        return (row[col("interval_hi")] - row[col("interval_lo")]) / 2

    rows: dict[tuple[str, int], dict[str, list]] = {}
    for row in table.rows:
        rows.setdefault((row[col("cell")], row[col("budget")]), {})[row[col("arm")]] = row
    out = []
    for (cell, budget), arms in rows.items():
        where = f"{cell} at {budget:,} tokens"
        base = arms.get(baseline)
        if base is None or base[col("interval_lo")] is None:
            out.append(f"{where}: the baseline {baseline} has no interval (fewer than two completed pairs): "
                       "whether the shift is the same for every arm cannot be told.")
            continue
        differ, untested = [], []
        for arm, row in arms.items():
            if arm == baseline:
                continue
            if row[col("interval_lo")] is None:
                untested.append(arm)
            elif abs(row[col("mean_shift")] - base[col("mean_shift")]) > math.hypot(half(row), half(base)):
                differ.append(f"{arm} ({fmt_shift(row[col('mean_shift')])})")
        text = f"{where}: against {baseline}'s shift of {fmt_shift(base[col('mean_shift')])}, "
        text += (f"{', '.join(differ)} differ{'s' if len(differ) == 1 else ''} by more than the combined "
                 "interval: the shift is not the same for every arm" if differ else
                 "every arm's shift is within the combined interval: no arm's shift differs")
        if untested:
            text += f" ({', '.join(untested)}: fewer than two completed pairs, not tested)"
        out.append(text + ".")
    return out


def fmt_shift(x: float | None) -> str:
    return MISSING if x is None else f"{x:+.4f}"


def _usable(record: RunRecord) -> bool:
    loss = record.final_val_loss
    return record.status == "completed" and loss is not None and math.isfinite(loss)


def _lrs(records: list[RunRecord]) -> float | str | None:
    lrs = sorted({r.spec.lr for r in records})  # one per seed; usually the same
    return None if not lrs else lrs[0] if len(lrs) == 1 else ", ".join(f"{x:g}" for x in lrs)


def fmt_lrs(x: float | str | None) -> str:
    return fmt_text(x if isinstance(x, str) or x is None else f"{x:g}")


def _mean_display(mean: float | None, interval: tuple[float, float] | None) -> str:
    if mean is None:
        return "n/a (no completed pair)"
    if interval is None:
        return f"{fmt_shift(mean)} (one pair: no interval)"
    return f"{fmt_shift(mean)} [{fmt_shift(interval[0])}, {fmt_shift(interval[1])}]"

