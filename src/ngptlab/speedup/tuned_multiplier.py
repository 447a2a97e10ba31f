"""An angle arm's secondary estimate: its speed-up at the tuned multiplier, on the swept seeds.

An angle arm's primary estimate reads it at multiplier 1, where its angle per step is its matched arm's: the
manipulation the effective-learning-rate account names (speedup/lr_policy.py). Its sweep (x0.5, x1, x2
around multiplier 1) also lets the rule choose among the multipliers as it does for any arm; that choice is
the tuned multiplier, and this module estimates the speed-up there. Only the swept seeds ran every
multiplier, so the estimate is theirs: each seed's tokens to its own target (the baseline's loss at N, as
the primary estimate's targets) from its runs at the tuned learning rates, summarized over the seeds as any
arm's (speedup/inference.py). The seeds that chose the multiplier estimate it, so it is optimistic (the
winner's curse, speedup/selection.py); the held-out seeds ran multiplier 1.

results/speedup/<cell>.json: arms[<angle arm>]["tuned_multiplier"] =
  {lr, multiplier, budgets [{budget, lr, multiplier}], seeds [int],
   speedup {estimate, bound, display, interval [lo, hi] | null, method, level, n_seeds}, note}
lr and multiplier (tuned lr / multiplier 1's) at the largest budget the tuned choice reads; budgets every
one it reads (under the `budget` rule the multiplier may differ between budgets).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ngptlab.results import RunResult
from ngptlab.speedup.estimate import Estimate
from ngptlab.speedup.estimator import seed_speedup
from ngptlab.speedup.inference import summarize_seeds
from ngptlab.speedup.lr_policy import AngleArm, LrPolicy

NOTE = ("the tuned multiplier (secondary): the learning-rate policy's own choice over the arm's sweep, its "
        "speed-up the swept seeds' own estimate there, optimistic by the winner's curse (those seeds chose "
        "the multiplier); the primary estimate is at multiplier 1, which the held-out seeds ran")


def tuned_entry(arm: str, angle: AngleArm, results: Iterable[RunResult], targets: Mapping[int, dict],
                selection_seeds: Iterable[int], n_bootstrap: int, seed: int) -> dict:
    """The tuned_multiplier entry of one angle arm (module docstring); targets {seed: the estimate's target
    entry} (the baseline's loss at N)."""
    chose = sorted(set(selection_seeds))
    largest = max(angle.tuned, default=None)
    out: dict = {"lr": None if largest is None else angle.tuned[largest],
                 "multiplier": None if largest is None else angle.multiplier(largest),
                 "budgets": [{"budget": b, "lr": lr, "multiplier": angle.multiplier(b)}
                             for b, lr in sorted(angle.tuned.items())],
                 "seeds": chose, "speedup": None, "note": NOTE}
    if largest is None:
        out["note"] = f"{NOTE}; none: the policy chose no learning rate over its sweep"
        return out
    runs: dict[int, dict[int, float]] = {}
    for r in results:
        s = r.spec
        if s.arm == arm and s.seed in chose and r.usable and angle.tuned.get(s.budget) == s.lr:
            runs.setdefault(s.seed, {})[s.budget] = r.final_val_loss
    estimates = [seed_speedup(runs[s], targets[s]["loss"], targets[s]["reference_budget"])[1]
                 for s in chose if s in runs and s in targets]
    summary = summarize_seeds(estimates or [Estimate(None)], n_bootstrap, seed)
    out["speedup"] = {"estimate": summary["value"], "bound": summary["bound"], "display": summary["display"],
                      "interval": summary["interval"], "method": summary["method"], "level": summary["level"],
                      "n_seeds": summary["n_seeds"]}
    return out


def tuned_multipliers(results: Iterable[RunResult], estimate: dict, policy: LrPolicy, n_bootstrap: int,
                      seed: int) -> dict[str, dict]:
    """{angle arm: its tuned_multiplier entry} of one cell from estimate_cell's document (its targets) and
    the policy it was estimated under."""
    results = list(results)
    targets = {t["seed"]: t for t in estimate["targets"]}
    return {arm: tuned_entry(arm, angle, results, targets, policy.selection_seeds, n_bootstrap, seed)
            for arm, angle in policy.angle_arms.items() if arm in estimate["arms"]}
