"""The best loss between the points of a learning-rate grid, and the speed-up it gives.

The estimator takes each arm's best loss over a grid of learning rates. Grid points a factor 2 apart can
miss the optimum by up to a factor sqrt(2) in learning rate, and an arm whose optimum falls between two
points is charged a loss it would not have at its own best rate; when arms fall differently on the grid
that shifts their speed-ups. Near its optimum the final loss is close to a parabola in ln(lr), so three
points bracketing the minimum locate it.

This estimates another quantity than the grid's speed-up: S at the optimal learning rate, where the grid
gives S at the learning rate chosen on the swept seeds' sweep (ngptlab.speedup.lr_policy). The correction is
read on the swept seeds' sweep, so it is applied to those seeds only (train.seeds, the estimate's
lr_policy.selection_seeds), never to seeds added at the chosen learning rate: they ran no sweep.

For each (arm, budget):
1. The swept seeds: the selection seeds that ran that (arm, budget) at more than one learning rate.
2. The mean final loss per learning rate over the swept seeds, usable runs only; a learning rate that some
   swept seed lacks (missing or diverged) is left out.
3. When the learning rate with the lowest mean is interior to the grid and both its neighbours are present,
   the parabola in x = ln(lr) through it and its neighbours (unequal spacing allowed) has its vertex at
   x* with loss L*: lr_vertex = exp(x*), loss_vertex = L*. Otherwise (the best at an edge, one learning
   rate, a neighbour left out, no curvature) there is no interpolation: the correction is 0 and the status
   says why.
4. correction = L* - L_chosen (<= 0 under cosine, where the chosen learning rate is the best), L_chosen the
   mean loss at the learning rate the seeds were estimated at, added to every swept seed's loss at that
   (arm, budget), the baseline's included: its loss at the reference budget (the target) is taken again
   from its corrected losses (estimator.reference_loss); without a vertex L* is the best grid loss (the
   correction is 0 unless, under wsd, the choice at the largest budget is not the best here).
The per-seed speed-up is then recomputed from the corrected losses exactly as the estimator computes it,
and summarized over seeds as the grid estimate is (ngptlab.speedup.inference). log_difference says how
far that moves the mean ln S; it matters when it exceeds the seeds' own sd of ln S.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence

from ngptlab.results import RunResult
from ngptlab.speedup.estimate import Estimate
from ngptlab.speedup.estimator import reference_loss, seed_speedup
from ngptlab.speedup.inference import EQUIVALENCE_MARGIN, RESOLVE_RATIO, summarize_seeds

INTERPOLATED = "interpolated"


def parabola_vertex(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float] | None:
    """(x*, y*) of the parabola through three points (x0 < x1 < x2, any spacing); None unless it opens
    upward. Newton's divided differences: p(x) = y0 + d01 (x - x0) + a (x - x0)(x - x1)."""
    (x0, x1, x2), (y0, y1, y2) = xs, ys
    d01, d12 = (y1 - y0) / (x1 - x0), (y2 - y1) / (x2 - x1)
    a = (d12 - d01) / (x2 - x0)
    if not a > 0:
        return None
    x = (x0 + x1) / 2 - d01 / (2 * a)
    return x, y0 + d01 * (x - x0) + a * (x - x0) * (x - x1)


def sweep_minimum(runs: Iterable[RunResult], budget: int, lr_chosen: float | None = None) -> dict:
    """Steps 1-4 for the swept seeds' runs of one (arm, budget), the seeds estimated at lr_chosen (None: at
    the best): {budget, seeds, lr_grid, loss_grid (null where left out), lr_best, lr_chosen, lr_vertex,
    loss_vertex, correction, status}."""
    by_seed: dict[int, dict[float, RunResult]] = {}
    for r in runs:
        by_seed.setdefault(r.spec.seed, {})[r.spec.lr] = r
    swept = sorted(s for s, by_lr in by_seed.items() if len(by_lr) > 1)
    grid = sorted({lr for s in swept for lr in by_seed[s]})
    losses = []
    for lr in grid:
        at_lr = [by_seed[s].get(lr) for s in swept]
        usable = all(r is not None and r.usable for r in at_lr)
        losses.append(statistics.fmean(r.final_val_loss for r in at_lr) if usable else None)
    out = {"budget": budget, "seeds": swept, "lr_grid": grid, "loss_grid": losses, "lr_best": None,
           "lr_chosen": lr_chosen, "lr_vertex": None, "loss_vertex": None, "correction": 0.0, "status": None}
    present = [i for i, loss in enumerate(losses) if loss is not None]
    if not swept:
        out["status"] = "no seed swept more than one learning rate"
        return out
    if not present:
        out["status"] = "no learning rate usable for every swept seed"
        return out
    best = min(present, key=lambda i: (losses[i], grid[i]))  # ties to the smaller lr, as the estimator
    out["lr_best"] = grid[best]
    chosen = grid.index(lr_chosen) if lr_chosen in grid else best
    chosen = best if losses[chosen] is None else chosen  # its seeds have no loss there to correct
    out["correction"] = losses[best] - losses[chosen]
    if best in (0, len(grid) - 1):
        out["status"] = f"best at the {'bottom' if best == 0 else 'top'} edge of the sweep"
    elif losses[best - 1] is None or losses[best + 1] is None:
        out["status"] = "a neighbour of the best was left out (diverged or missing for some swept seed)"
    elif (vertex := parabola_vertex([math.log(grid[i]) for i in (best - 1, best, best + 1)],
                                    [losses[i] for i in (best - 1, best, best + 1)])) is None:
        out["status"] = "flat: no curvature between the best and its neighbours"
    else:
        x, loss = vertex
        # The vertex of an upward parabola is at or below its lowest point: clip rounding above it.
        out.update(lr_vertex=math.exp(x), loss_vertex=loss, status=INTERPOLATED,
                   correction=min(0.0, loss - losses[best]) + losses[best] - losses[chosen])
    return out


def interpolate_cell(results: Iterable[RunResult], estimate: dict, n_bootstrap: int, seed: int,
                     margin: float = EQUIVALENCE_MARGIN, resolve_ratio: float = RESOLVE_RATIO
                     ) -> dict[str, dict]:
    """arm -> its `interpolated` entry, from the cell's runs and estimator.estimate_cell's document:
    {speedup (as the grid's), per_seed [{seed, target_loss, tokens_to_target, speedup, interpolation}],
    per_budget [sweep_minimum], log_difference, seed_noise_log, differs, seeds, note}: the swept seeds only
    (the module docstring)."""
    policy = estimate["lr_policy"]
    swept = set(policy["selection_seeds"])
    chosen = {(c["arm"], c["budget"]): c["lr"] for c in policy["chosen"]}
    groups: dict[tuple[str, int], list[RunResult]] = {}
    for r in results:
        if r.spec.seed in swept:
            groups.setdefault((r.spec.arm, r.spec.budget), []).append(r)
    minima = {key: sweep_minimum(runs, key[1], chosen.get(key)) for key, runs in sorted(groups.items())}
    baseline = estimate["baseline"]
    targets = {t["seed"]: t for t in estimate["targets"] if t["seed"] in swept}
    target_budgets = sorted({r["budget"] for t in targets.values() for r in t["runs"]})
    at_targets = [minima[(baseline, b)] for b in target_budgets]
    baseline_best = {p["seed"]: p["best"] for p in estimate["arms"][baseline]["per_seed"]}

    out = {}
    for arm, entry in estimate["arms"].items():
        per_seed, grid_per_seed = [], [p for p in entry["per_seed"] if p["seed"] in swept]
        for grid_seed in grid_per_seed:
            target = targets[grid_seed["seed"]]
            base = {b["budget"]: b["loss"] + _correction(minima, baseline, b["budget"])
                    for b in baseline_best[grid_seed["seed"]]}
            target_loss = reference_loss(base, target["reference_budget"])
            losses = {b["budget"]: b["loss"] + _correction(minima, arm, b["budget"])
                      for b in grid_seed["best"]}
            tokens, speedup, interpolation = seed_speedup(losses, target_loss, target["reference_budget"])
            per_seed.append({"seed": grid_seed["seed"], "target_loss": target_loss,
                             "tokens_to_target": tokens.as_dict(), "speedup": speedup.as_dict(),
                             "interpolation": interpolation})
        summary = summarize_seeds([Estimate.from_dict(p["speedup"]) for p in per_seed], n_bootstrap, seed,
                                  margin, resolve_ratio, baseline=arm == baseline)
        per_budget = [m for (a, _), m in minima.items() if a == arm]
        moved = any(m["status"] == INTERPOLATED or m["correction"] for m in per_budget + at_targets)
        out[arm] = {"speedup": summary, "per_seed": per_seed, "per_budget": per_budget,
                    **_compare(grid_per_seed, per_seed, moved), "seeds": [p["seed"] for p in per_seed]}
        out[arm]["note"] += ("; applied to the swept seeds only (S at the optimal learning rate, read on "
                             "their sweep), never to seeds added at the chosen learning rate")
    return out


def _correction(minima: dict, arm: str, budget: int) -> float:
    m = minima.get((arm, budget))
    return 0.0 if m is None else m["correction"]


def _compare(grid: list[dict], interpolated: list[dict], moved: bool) -> dict:
    """How far interpolation moves ln S, against the seeds' own sd of ln S on the grid (both over the seeds
    where both estimates are numbers); moved: some budget of the arm, or its target, was corrected."""
    pairs = [(math.log(g["speedup"]["value"]), math.log(i["speedup"]["value"]))
             for g, i in zip(grid, interpolated, strict=True)
             if _point(g["speedup"]) and _point(i["speedup"])]
    difference = statistics.fmean(i - g for g, i in pairs) if pairs else None
    noise = statistics.stdev(g for g, _ in pairs) if len(pairs) >= 2 else None
    differs = None if difference is None or noise is None else abs(difference) > noise
    if not moved:
        note = "no budget of this arm, nor the target, could be corrected: the grid's estimate stands"
    elif difference is None:
        note = "no seed with a point estimate both on the grid and interpolated"
    elif differs is None:
        note = "one seed: the seed noise of ln S is not measured, so whether the difference matters is open"
    else:
        note = (f"interpolation moves mean ln S by {difference:+.3g}, "
                f"{'more' if differs else 'less'} than the seeds' sd of ln S ({noise:.3g})")
    return {"log_difference": difference, "seed_noise_log": noise, "differs": differs, "note": note}


def _point(s: dict) -> bool:
    return s["value"] is not None and s["bound"] is None
