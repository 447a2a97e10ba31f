"""The paper's speed-up measure (its Fig. 2 method and 4x/10x/20x claims), as pure functions of run results.

For one (scale, context) cell and one seed:
1. best[arm][budget] = the lowest final validation loss over the arm's learning-rate sweep at that budget,
   among completed runs (diverged runs are ignored); ties go to the smaller learning rate.
2. target = best[baseline][largest baseline budget]; baseline_tokens = that budget. When every baseline run
   at the grid's largest budget diverged this is a smaller budget: the target says so (at_largest_budget).
3. For every arm, tokens_to_target: the first budget whose best loss is <= target, interpolated linearly in
   log tokens between it and the budget before it (the loss is treated as linear in log tokens between two
   measured budgets). When the arm is already below the target at its smallest budget, or never reaches it,
   the answer is a bound ("<" smallest budget, ">" largest budget), never an extrapolation.
4. speedup = baseline_tokens / tokens_to_target; a bound on tokens becomes the opposite bound on speed-up.
With several seeds each seed is estimated on its own (seed s of every arm saw the same batches), then
summarized: the mean, and a percentile bootstrap interval of the mean (resampling seeds) when every seed
gave a point estimate. A mean over point estimates and lower bounds is itself a lower bound (likewise upper);
seeds whose bounds point in opposite directions give no estimate.

The cheaper estimate replaces step 3's budget sweep with one run's own validation curve (the arm's best run
at its largest budget): the tokens at which the curve first reaches the target. Mid-run losses are not
annealed by the end of a cosine schedule, so this estimate is biased toward smaller speed-ups; it is
reported separately and labelled as such.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ngptlab.results import RunResult

CHEAP_METHOD = ("within-run validation curve of the arm's best run at its largest budget (cheaper estimate; "
                "mid-schedule losses are not annealed, so it is biased toward smaller speed-ups)")
FLIP = {">": "<", "<": ">", None: None}


@dataclass(frozen=True)
class Estimate:
    """A number, or a bound on it: bound ">" means the true value exceeds `value`, "<" that it is below it."""

    value: float | None
    bound: str | None = None

    def display(self) -> str:
        if self.value is None:
            return "n/a"
        number = f"{self.value:.0f}" if 1e3 <= abs(self.value) < 1e7 else f"{self.value:.3g}"  # tokens: 8192
        return f"{self.bound or ''}{number}"

    def as_dict(self) -> dict:
        return {"value": self.value, "bound": self.bound, "display": self.display()}


def tokens_to_target(points: Iterable[tuple[float, float]], target: float) -> Estimate:
    """Tokens needed to reach `target` loss, from (tokens, loss) points (budgets or a within-run curve)."""
    pts = sorted((float(t), float(loss)) for t, loss in points if math.isfinite(loss))
    if not pts or not math.isfinite(target):
        return Estimate(None)
    if pts[0][1] <= target:
        # At or below the target at the first point: exact only if it lands on it, else an upper bound.
        return Estimate(pts[0][0], None if pts[0][1] == target else "<")
    for (t0, l0), (t1, l1) in zip(pts, pts[1:], strict=False):
        if l1 <= target:
            if l1 == target:
                return Estimate(t1)
            frac = (l0 - target) / (l0 - l1)  # in (0, 1): l0 > target > l1
            return Estimate(math.exp(math.log(t0) + frac * (math.log(t1) - math.log(t0))))
    return Estimate(pts[-1][0], ">")


def speedup_from_tokens(baseline_tokens: float, tokens: Estimate) -> Estimate:
    """baseline_tokens / tokens; a bound on tokens is the opposite bound on the speed-up."""
    if tokens.value is None:
        return Estimate(None)
    return Estimate(baseline_tokens / tokens.value, FLIP[tokens.bound])


def best_per_budget(results: Iterable[RunResult]) -> dict[tuple[str, int], dict[int, RunResult]]:
    """{(arm, seed): {budget: the usable run with the lowest final loss over the lr sweep}}."""
    best: dict[tuple[str, int], dict[int, RunResult]] = {}
    for r in results:
        if not r.usable:
            continue
        slot = best.setdefault((r.spec.arm, r.spec.seed), {})
        current = slot.get(r.spec.budget)
        if current is None or (r.final_val_loss, r.spec.lr) < (current.final_val_loss, current.spec.lr):
            slot[r.spec.budget] = r
    return best


def summarize_seeds(estimates: Sequence[Estimate], n_bootstrap: int, seed: int, level: float = 0.95) -> dict:
    """Mean over seeds and a percentile bootstrap interval of the mean (estimates given in seed order)."""
    known = [e for e in estimates if e.value is not None]
    out = {"value": None, "bound": None, "display": "n/a", "interval": None, "level": level,
           "n_seeds": len(known), "note": None}
    if not known:
        out["note"] = "no seed reached an estimate"
        return out
    bounds = {e.bound for e in known} - {None}
    if len(bounds) > 1:
        out["note"] = "seeds give bounds in opposite directions; no estimate"
        return out
    values = np.array([e.value for e in known], dtype=np.float64)
    mean = Estimate(float(values.mean()), bounds.pop() if bounds else None)
    out.update(mean.as_dict())
    if mean.bound is not None:
        out["note"] = ("a bound: no interval" if len(values) == 1
                       else "mean of bounds and point estimates is itself a bound; no interval")
    elif len(values) >= 2 and n_bootstrap > 0:
        rng = np.random.default_rng(seed)
        means = values[rng.integers(0, len(values), size=(n_bootstrap, len(values)))].mean(axis=1)
        tail = 100 * (1 - level) / 2
        out["interval"] = [float(np.percentile(means, tail)), float(np.percentile(means, 100 - tail))]
    return out


def measurable_range(target_budget: int, budgets: Sequence[int]) -> list[float]:
    """The speed-ups a grid can measure as numbers: target budget / largest .. target budget / smallest.

    Tokens to target are interpolated only between budgets that were run (step 3), so with budgets 4x apart
    and the target at the largest one, only speed-ups in [1, 4] come out as numbers; the rest are bounds.
    """
    return [target_budget / max(budgets), target_budget / min(budgets)]


def estimate_cell(results: Iterable[RunResult], baseline: str, n_bootstrap: int, seed: int) -> dict:
    """The speed-up of every arm in one cell (see the module docstring); JSON-ready apart from inf/nan."""
    results = sorted(results, key=lambda r: r.spec)  # order-invariant from here on
    best = best_per_budget(results)
    arms = sorted({r.spec.arm for r in results}, key=lambda a: (a != baseline, a))
    seeds = sorted({r.spec.seed for r in results})

    budgets = sorted({r.spec.budget for r in results})
    targets = {}
    for s in seeds:
        base = best.get((baseline, s))
        if base:
            budget = max(base)  # below the grid's largest budget when every baseline run there diverged
            targets[s] = {"seed": s, "arm": baseline, "budget": budget, "loss": base[budget].final_val_loss,
                          "lr": base[budget].spec.lr, "run": base[budget].spec.name,
                          "at_largest_budget": budget == budgets[-1],
                          "measurable": measurable_range(budget, budgets)}

    arms_out = {}
    for arm in arms:
        per_seed, cheap_per_seed = [], []
        for s in seeds:
            runs = best.get((arm, s), {})
            if s not in targets or not runs:
                continue
            target, base_tokens = targets[s]["loss"], targets[s]["budget"]
            tokens = tokens_to_target(((b, r.final_val_loss) for b, r in runs.items()), target)
            speedup = speedup_from_tokens(base_tokens, tokens)
            best_runs = [{"budget": b, "lr": r.spec.lr, "loss": r.final_val_loss, "run": r.spec.name}
                         for b, r in sorted(runs.items())]
            per_seed.append({"seed": s, "tokens_to_target": tokens.as_dict(), "speedup": speedup.as_dict(),
                             "best": best_runs})
            longest = runs[max(runs)]
            cheap_tokens = tokens_to_target(longest.curve, target)
            cheap_per_seed.append({"seed": s, "run": longest.spec.name,
                                   "tokens_to_target": cheap_tokens.as_dict(),
                                   "speedup": speedup_from_tokens(base_tokens, cheap_tokens).as_dict()})
        summary = summarize_seeds([_estimate(p["speedup"]) for p in per_seed], n_bootstrap, seed)
        cheap = summarize_seeds([_estimate(p["speedup"]) for p in cheap_per_seed], n_bootstrap, seed)
        arms_out[arm] = {
            "speedup": summary,
            "per_seed": per_seed,
            "cheap": {"method": CHEAP_METHOD, "speedup": cheap, "per_seed": cheap_per_seed},
        }
        if not per_seed:
            summary["note"] = (f"no completed {arm} run" if not any(k[0] == arm for k in best)
                               else f"no completed {baseline} run to set the target")

    best_names = {r.spec.name for by_budget in best.values() for r in by_budget.values()}
    per_run = []
    for r in results:
        entry = {"run": r.spec.name, **r.spec.as_dict(), "status": r.status,
                 "final_val_loss": r.final_val_loss, "best_lr_for_budget": r.spec.name in best_names,
                 "within_run": None}
        if r.usable and r.spec.seed in targets:
            target = targets[r.spec.seed]
            tokens = tokens_to_target(r.curve, target["loss"])
            entry["within_run"] = {"tokens_to_target": tokens.as_dict(),
                                   "speedup": speedup_from_tokens(target["budget"], tokens).as_dict()}
        per_run.append(entry)

    return {
        "baseline": baseline,
        "arms_order": arms,
        "seeds": seeds,
        "budgets": sorted({r.spec.budget for r in results}),
        "targets": [targets[s] for s in seeds if s in targets],
        "arms": arms_out,
        "runs": per_run,
        "ignored": [{"run": r.spec.name, "reason": r.status if r.status != "completed" else "non-finite loss"}
                    for r in results if not r.usable],
    }


def _estimate(d: dict) -> Estimate:
    return Estimate(d["value"], d["bound"])
