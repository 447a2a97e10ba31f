"""Reading one speed-up entry of results/speedup/<cell>.json (ngptlab.speedup.command documents the file):
its text for a table cell, the runs behind it, the budget range it can measure, and whether its verdict
resolves anything. Several sections show speed-ups; each reads them through these."""

from __future__ import annotations

from ngptlab.report.kit.load import Results
from ngptlab.report.kit.table import fmt_num
from ngptlab.results import read_float
from ngptlab.speedup.inference import BOOTSTRAP_MIN_SEEDS

ONE_SEED = "one seed: no interval"


def bracket(interval: list) -> str:
    return f"[{fmt_num(read_float(interval[0]))}, {fmt_num(read_float(interval[1]))}]"


def censored_text(entry: dict) -> str:
    """' (<method>; 2 of 6 seeds bounds)' for an estimate from the censored likelihood, else ''."""
    if not entry.get("n_censored") or entry.get("method") is None:
        return ""
    return f" ({entry['method']}; {entry['n_censored']} of {entry['n_seeds']} seeds bounds)"


def speedup_text(s: dict) -> str:
    """'4.2 [3.1, 5.3]', '>8 (bound)', '2.9 (one seed: no interval)' or 'n/a (reason)'; an estimate with
    seeds that are bounds names its method."""
    if s.get("value") is None:
        return f"n/a ({s['note']})" if s.get("note") else "n/a"
    text = s.get("display") or fmt_num(s["value"])
    if s.get("bound"):
        return f"{text} (bound)"
    if s.get("interval"):
        return f"{text} {bracket(s['interval'])}{censored_text(s)}"
    return f"{text} ({ONE_SEED})" if s.get("n_seeds") == 1 else text


def against(doc: dict | None, baseline: str) -> dict | None:
    """A cell's speed-up file read against one of its baselines: the primary's is the file itself, a further
    one's has its by_baseline entry in place of targets, arms and contrasts (arms without a within-run or
    interpolated estimate)."""
    if doc is None or baseline == doc["baseline"]:
        return doc
    return {**doc, "baseline": baseline, **doc["by_baseline"][baseline]}


def arm_runs(doc: dict, arm: str, seeds: set[int] | None = None) -> list[str]:
    """The runs an arm's speed-up rests on: its best run at every budget, and the baseline's target runs
    (only those of `seeds` when given)."""
    entry = doc["arms"].get(arm) or {}
    runs = [b["run"] for p in entry.get("per_seed", []) if seeds is None or p["seed"] in seeds
            for b in p.get("best", [])]
    return runs + [r["run"] for t in doc.get("targets", []) if seeds is None or t["seed"] in seeds
                   for r in t["runs"]]


def measurable_text(doc: dict | None) -> str | None:
    """'1 to 4': the speed-ups a cell's budget range can give as numbers (per target; seeds that differ are
    listed); anything outside comes out as a bound."""
    if not doc or not doc.get("targets"):
        return None
    ranges = []
    for target in doc["targets"]:
        text = " to ".join(fmt_num(read_float(x)) for x in target["measurable"])
        if text not in ranges:
            ranges.append(text)
    return "; ".join(ranges)


def min_seeds(results: Results) -> int:
    """The fewest seeds with which the speed-up stage gives a bootstrap interval (bootstrap.min_seeds)."""
    found = [d["bootstrap"]["min_seeds"] for d in results.speedups.values()
             if d and "min_seeds" in d.get("bootstrap", {})]
    return found[0] if found else BOOTSTRAP_MIN_SEEDS


def resolved(verdict: str | None) -> bool:
    """A verdict that says something: faster, slower or equivalent."""
    return verdict is not None and verdict.startswith(("faster", "slower", "equivalent"))
