"""Reading one speed-up entry of results/speedup/<cell>.json (ngptlab.speedup.document reads the file): its
text for a table cell, the runs behind it, the budgets' span (the speed-ups it can give as numbers), the
levels the files state, and whether its verdict resolves anything. Several sections show speed-ups; each
reads them through these."""

from __future__ import annotations

from collections.abc import Sequence

from ngptlab.report.kit.load import Results
from ngptlab.report.kit.table import fmt_levels, fmt_num, fmt_sig
from ngptlab.speedup.arm_records import Speedup
from ngptlab.speedup.document import SpeedupDocument
from ngptlab.speedup.effect_records import Contrast, Effect
from ngptlab.speedup.inference import BOOTSTRAP_MIN_SEEDS

ONE_SEED = "one seed: no interval"


def bracket(interval: Sequence[float]) -> str:
    return f"[{fmt_sig(interval[0])}, {fmt_sig(interval[1])}]"


def censored_text(entry: Speedup | Contrast) -> str:
    """' (<method>; 2 of 6 seeds bounds)' for an estimate from the censored likelihood, else ''."""
    if not entry.n_censored or entry.method is None:
        return ""
    return f" ({entry.method}; {entry.n_censored} of {entry.n_seeds} seeds bounds)"


def speedup_text(s: Speedup) -> str:
    """'4.2 [3.1, 5.3]', '>8 (bound)', '2.9 (one seed: no interval)' or 'n/a (reason)'; an estimate with
    seeds that are bounds names its method."""
    if s.value is None:
        return f"n/a ({s.note})" if s.note else "n/a"
    text = (s.display or fmt_num(s.value)) if s.bound else fmt_sig(s.value)  # one precision: 1.00, 0.985
    if s.bound:
        return f"{text} (bound)"
    if s.interval:
        return f"{text} {bracket(s.interval)}{censored_text(s)}"
    return f"{text} ({ONE_SEED})" if s.n_seeds == 1 else text


def effect_text(e: Effect) -> str:
    """A factorial effect: '1.9 [1.5, 2.3] (95% paired t on ln S over seeds, 3 seeds)', or why there is no
    interval."""
    if e.ratio is None:
        return "n/a (no seed with all four arms as point estimates)"
    how = f"{e.level:.0%} {e.method}, {e.n_seeds} seed{'s' if e.n_seeds != 1 else ''}"
    if e.interval is None:
        return f"{fmt_sig(e.ratio)} (no interval: {how})"
    return f"{fmt_sig(e.ratio)} {bracket(e.interval)} ({how})"


def speedup_level(results: Results) -> str | None:
    """The level the files state for the arms' speed-up intervals over seeds (fmt_levels)."""
    return fmt_levels(entry.speedup.level for d in results.speedups.values() if d
                      for entry in d.arms.values())


def contrast_level(results: Results) -> str | None:
    """The level the files state for the paired contrasts' intervals (fmt_levels)."""
    return fmt_levels(c.level for d in results.speedups.values() if d for c in d.contrasts)


def arm_runs(doc: SpeedupDocument, arm: str, seeds: set[int] | None = None) -> list[str]:
    """The runs an arm's speed-up rests on: its best run at every budget, and the baseline's target runs
    (only those of `seeds` when given)."""
    per_seed = doc.arms[arm].per_seed if arm in doc.arms else ()
    runs = [b.run for p in per_seed if seeds is None or p.seed in seeds for b in p.best]
    return runs + [r.run for t in doc.targets if seeds is None or t.seed in seeds for r in t.runs]


# the header of every column of budgets_span_text
BUDGETS_SPAN = "budgets' span (speed-ups as numbers)"


def budgets_span_text(doc: SpeedupDocument | None) -> str | None:
    """'1 to 4': the budgets' span, the speed-ups a cell's budget range can give as numbers (per target;
    seeds that differ are listed); anything outside comes out as a bound. What the grid can express, not
    what the design reads right: near the span's ends a speed-up rests on one budget or becomes a bound
    (`ngptlab design --resolution` measures the range the design reads)."""
    if not doc or not doc.targets:
        return None
    ranges = []
    for target in doc.targets:
        text = " to ".join(fmt_num(x) for x in target.measurable)
        if text not in ranges:
            ranges.append(text)
    return "; ".join(ranges)


def min_seeds(results: Results) -> int:
    """The fewest seeds with which the speed-up stage gives a bootstrap interval (bootstrap.min_seeds)."""
    found = [d.min_seeds for d in results.speedups.values() if d and d.min_seeds is not None]
    return found[0] if found else BOOTSTRAP_MIN_SEEDS


def resolved(verdict: str | None) -> bool:
    """A verdict that says something: faster, slower or equivalent."""
    return verdict is not None and verdict.startswith(("faster", "slower", "equivalent"))
