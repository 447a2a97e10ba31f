"""Is every arm tuned? The best learning rate of each (arm, budget, seed) and where it sits in its sweep.

An arm's best learning rate at a budget (lowest final validation loss over its sweep, diverged runs
ignored) that is the smallest or the largest value swept may be better still beyond it: that (arm, budget)
is untuned, and a comparison against it is unfair to it. `speedup` records every such edge in its JSON and
the report says which arms were tuned; `ngptlab plan --extend-sweeps` adds the neighbouring learning rate
(x2 above the top, /2 below the bottom) until the best is interior.

Each (arm, budget) is judged against the learning rates that ran at that budget: above a pruning budget
(`ngptlab plan --prune-sweeps`) the window train.pruned_sweeps kept, not the whole sweep, so a best at the
top of a pruned window is "top" there (the entry says `pruned`), though the whole sweep went higher.

A single-value sweep is always at an edge. A sweep with a run still missing is "pending": nothing is
concluded (or extended) until its results are in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ngptlab.results import RunResult

EDGE_FACTOR = 2.0  # the neighbouring learning rate: x2 above the top of a sweep, /2 below its bottom


def sweep_edges(results: Iterable[RunResult | None], sweep_of: Callable[[str, int], list[float]],
                expected: Iterable, pruned: Callable[[str, int], bool] = lambda arm, budget: False
                ) -> list[dict]:
    """One entry per (arm, budget, seed) of the runs `expected` (RunSpecs), in a stable order:
    {arm, budget, seed, sweep, pruned, best_lr, edge}, edge in {"top", "bottom", None (interior),
    "pending", "none usable"}. `results` holds the RunResult of each spec found, `sweep_of(arm, budget)`
    the learning rates run at that budget, `pruned(arm, budget)` whether they are a pruned window."""
    found = {r.spec: r for r in results if r is not None}
    groups: dict[tuple, list] = {}
    for spec in sorted(expected):
        groups.setdefault((spec.arm, spec.budget, spec.seed), []).append(spec)
    out = []
    for (arm, budget, seed), specs in groups.items():
        sweep = sorted(sweep_of(arm, budget))
        entry = {"arm": arm, "budget": budget, "seed": seed, "sweep": sweep, "pruned": pruned(arm, budget),
                 "best_lr": None, "edge": "pending"}
        if all(spec in found for spec in specs):
            usable = [found[spec] for spec in specs if found[spec].usable]
            if not usable:
                entry["edge"] = "none usable"
            else:
                best = min(usable, key=lambda r: (r.final_val_loss, r.spec.lr)).spec.lr
                entry["best_lr"] = best
                entry["edge"] = "top" if best == sweep[-1] else "bottom" if best == sweep[0] else None
        out.append(entry)
    return out


def tuned_arms(edges: list[dict]) -> dict[str, bool]:
    """arm -> True when every (budget, seed) of it has its best learning rate inside its sweep."""
    tuned: dict[str, bool] = {}
    for e in edges:
        tuned[e["arm"]] = tuned.get(e["arm"], True) and e["edge"] is None
    return tuned


def neighbour(edge: str, sweep: list[float]) -> float:
    """The learning rate to add beyond an edge of the sweep (rounded to 6 significant digits)."""
    lr = max(sweep) * EDGE_FACTOR if edge == "top" else min(sweep) / EDGE_FACTOR
    return float(f"{lr:.6g}")
