"""The paper's speed-up measure (its Fig. 2 method and 4x/10x/20x claims), as pure functions of run results.

The estimand: the tokens each arm needs to reach the baseline's loss at the reference budget of N tokens,
as a speed-up S = N / those tokens (speedup.reference_budget sets N: the paper's largest budget, or by
default the geometric mean of the smallest and largest, so that S straddles 1), every run at the learning
rate chosen on the swept seeds' sweep and at the budgets speedup.lr_policy names
(ngptlab.speedup.lr_policy; by default each arm at its best learning rate where it reaches the target, up
to the budget past that crossing). Every seed, the swept ones included, enters with its runs at that
learning rate; `ngptlab plan --add-seeds` adds seeds at exactly those runs. The swept seeds chose it, so
the speed-up is estimated on the held-out seeds where there are two or more, and the swept seeds' excess
(selection_bias) is shown (ngptlab.speedup.selection).

For one (scale, context) cell and one seed:
1. best[arm][budget] = the seed's run at the chosen learning rate of (arm, budget), when it completed
   (a diverged run leaves the budget out).
2. target = the baseline's loss at the reference budget N: best[baseline][N] when N is a budget that ran;
   between two budgets, interpolated there along the same law as step 3 (reference_loss, the inverse of
   tokens_to_target: loss_at), so the baseline's own S is 1. When the baseline's runs cannot give it (those
   at or around N diverged) the target falls back to the baseline's largest budget with a completed run
   and says so (note; at_largest_budget is false whenever the target is not at the grid's largest budget).
3. For every arm, tokens_to_target: the first budget whose best loss is <= target, interpolated between it
   and the budget before it along the power law L = E + A T^-alpha fitted to the (arm, seed)'s best losses
   (ngptlab.speedup.loss_law: ln(L - E) linear in ln T through both budgets' losses), or, where that fit is
   not possible, linearly in log tokens (a chord); each seed's `interpolation` says which and why. When the
   arm is already below the target at its smallest budget, or never reaches it, the answer is a bound ("<"
   smallest budget, ">" largest budget), never an extrapolation.
   Bias on planted laws L = 3 + A (S T)^-0.3, 5 budgets, target at the largest, no noise (measured in
   tests/test_speedup_estimator.py): the chord underestimates ln S by 0.018 at S = 1.5 and 2.8 with budgets
   x2 apart, by 0.042 and 0.034 at S = 1.5 and 4 x3 apart, by 0.058 x4 apart (none where the target falls
   on a budget); the fitted law's |ln S error| is below 1e-9 in each. With two budgets (2048, 8192) and the
   middle reference (4096) the chord sets the target and the tokens alike: on L = 2 + 50 (S T)^-0.3 it
   overestimates ln S by 0.014 at S = 0.7 and 0.023 at 1.4 (tests/test_speedup_censored.py); with a third
   budget between them the fitted law is exact.
4. speedup = N / tokens_to_target; a bound on tokens becomes the opposite bound on speed-up. The budgets'
   span, the speed-ups they can give as numbers: N / largest budget to N / smallest (measurable_range);
   outside, a bound. Not the range a design reads right (`ngptlab design --resolution`): near the span's
   ends a speed-up rests on one budget or becomes a bound in some seeds.
With several seeds each seed is estimated on its own (seed s of every arm saw the same batches), the
estimate's seeds (held-out ones, or every seed: selection.estimate_seeds) then summarized on the log scale
by ngptlab.speedup.inference: the geometric mean with a t-interval on ln S, a verdict against the baseline,
and paired contrasts between arms; seeds whose speed-up is a bound enter as censored observations
(ngptlab.speedup.censored).

The cheaper estimate replaces step 3's budget sweep with one run's own validation curve (the arm's best run
at its largest budget): the tokens at which the curve first reaches the target. Mid-run losses are not
annealed by the end of a cosine schedule, so this estimate is biased toward smaller speed-ups; it is
reported separately and labelled as such.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ngptlab.results import RunResult
from ngptlab.settings import default
from ngptlab.speedup.crossing import loss_at, reference_tokens, tokens_to_target
from ngptlab.speedup.divergence import arm_divergence, diverged_runs, lost_seeds, replaced_note
from ngptlab.speedup.estimate import FLIP, Estimate
from ngptlab.speedup.inference import (
    EQUIVALENCE_MARGIN,
    RESOLVE_RATIO,
    cell_contrasts,
    summarize_seeds,
    verdict_rule,
)
from ngptlab.speedup.loss_law import fit_loss_law
from ngptlab.speedup.lr_policy import LrPolicy, runs_policy
from ngptlab.speedup.selection import estimate_seeds, selection_bias

# the schema's default, for callers without settings
REFERENCE_BUDGET: str | int = default("speedup.reference_budget")
LR_POLICY: str = default("speedup.lr_policy")
CHEAP_METHOD = ("within-run validation curve of the arm's best run at its largest budget (cheaper estimate; "
                "mid-schedule losses are not annealed, so it is biased toward smaller speed-ups)")


def reference_loss(losses: Mapping[int, float], reference: float) -> float | None:
    """One seed's baseline loss at the reference budget, from its best loss per budget: the budget's own
    when it ran, else interpolated along the law the estimator uses between budgets (seed_speedup), so that
    the baseline's tokens to that loss are the reference again; None when no two budgets bracket it."""
    return loss_at(losses.items(), reference, fit_loss_law(losses).floor)


def speedup_from_tokens(baseline_tokens: float, tokens: Estimate) -> Estimate:
    """baseline_tokens / tokens; a bound on tokens is the opposite bound on the speed-up."""
    if tokens.value is None:
        return Estimate(None)
    return Estimate(baseline_tokens / tokens.value, FLIP[tokens.bound])


def seed_speedup(losses: Mapping[int, float], target_loss: float, target_tokens: float
                 ) -> tuple[Estimate, Estimate, str]:
    """(tokens to target, speed-up, interpolation) of one seed of one arm from its best loss per budget
    (steps 3-4); interpolation names the law between budgets (loss_law.fit_loss_law)."""
    law = fit_loss_law(losses)
    tokens = tokens_to_target(losses.items(), target_loss, law.floor)
    return tokens, speedup_from_tokens(target_tokens, tokens), law.interpolation


def runs_at_chosen_lr(results: Iterable[RunResult], policy: LrPolicy
                      ) -> dict[tuple[str, int], dict[int, RunResult]]:
    """{(arm, seed): {budget: its usable run at the learning rate the policy chose for (arm, budget)}}."""
    at: dict[tuple[str, int], dict[int, RunResult]] = {}
    for r in results:
        if r.usable and policy.chosen.get((r.spec.arm, r.spec.budget)) == r.spec.lr:
            at.setdefault((r.spec.arm, r.spec.seed), {})[r.spec.budget] = r
    return at


def measurable_range(reference: float, budgets: Sequence[int]) -> list[float]:
    """The budgets' span, the speed-ups a grid can give as numbers: reference / largest budget .. reference /
    smallest.

    Tokens to target are interpolated only between budgets that were run (step 3), so with budgets 4x apart
    and the reference at the largest one, only speed-ups in [1, 4] come out as numbers; at their geometric
    mean ("middle"), those in [0.5, 2]; the rest are bounds.
    """
    return [reference / max(budgets), reference / min(budgets)]


def run_entry(r: RunResult) -> dict:
    """{budget, lr, loss, run}: a best run as the document lists it."""
    return {"budget": r.spec.budget, "lr": r.spec.lr, "loss": r.final_val_loss, "run": r.spec.name}


def baseline_target(seed: int, baseline: str, runs: Mapping[int, RunResult], reference: str | int,
                    budgets: Sequence[int]) -> dict:
    """The target entry of one seed (step 2) from the baseline's best run per budget: {seed, arm, reference,
    reference_budget, interpolated, loss, runs [{budget, lr, loss, run}], at_largest_budget, measurable,
    note}; when the baseline's runs do not give the loss at the reference budget (runs there or around it
    diverged) the target falls back to its largest budget with a completed run, and note says so."""
    losses = {b: r.final_val_loss for b, r in runs.items()}
    tokens = reference_tokens(reference, budgets)
    loss, note = reference_loss(losses, tokens), None
    if loss is None:
        fallback = max(runs)
        note = (f"the {baseline} runs do not give the loss at the reference budget ({tokens:,} tokens): "
                f"no completed run at {', '.join(f'{b:,}' for b in budgets if b not in runs)}; the target is "
                f"its best loss at {fallback:,}, its largest budget with a completed run")
        tokens, loss = fallback, losses[fallback]
    below = [b for b in runs if b <= tokens]
    above = [b for b in runs if b >= tokens]
    used = sorted({max(below), min(above)})  # the budget itself, or the two the loss is interpolated between
    return {"seed": seed, "arm": baseline, "reference": reference, "reference_budget": tokens,
            "interpolated": tokens not in runs, "loss": loss,
            "runs": [run_entry(runs[b]) for b in used],
            "at_largest_budget": tokens == max(budgets), "measurable": measurable_range(tokens, budgets),
            "note": note}


def seed_speedups(arms: Mapping[str, dict], seeds: Iterable[int]) -> dict[str, dict[int, Estimate]]:
    """{arm: {seed: its speed-up}} over the given seeds (the estimate's), from estimate_cell's `arms`: what
    the contrasts and the factorial are paired over."""
    kept = set(seeds)
    return {arm: {p["seed"]: Estimate.from_dict(p["speedup"]) for p in entry["per_seed"] if p["seed"] in kept}
            for arm, entry in arms.items()}


def estimate_cell(results: Iterable[RunResult], baseline: str, n_bootstrap: int, seed: int,
                  margin: float = EQUIVALENCE_MARGIN, resolve_ratio: float = RESOLVE_RATIO,
                  policy: LrPolicy | None = None, *, reference: str | int = REFERENCE_BUDGET,
                  rule: str = LR_POLICY) -> dict:
    """The speed-up of every arm in one cell (see the module docstring); JSON-ready apart from inf/nan.
    margin and resolve_ratio feed the verdicts and seeds_needed (ngptlab.speedup.inference); policy the
    learning rates (ngptlab.speedup.lr_policy.cell_policy from the params; without it, runs_policy under
    `rule`, speedup.lr_policy: every seed of the results chooses); reference is speedup.reference_budget
    (largest, middle or tokens)."""
    results = sorted(results, key=lambda r: r.spec)  # order-invariant from here on
    policy = policy or runs_policy(results, rule, [baseline], reference)
    best = runs_at_chosen_lr(results, policy)
    arms = sorted({r.spec.arm for r in results}, key=lambda a: (a != baseline, a))
    seeds = sorted({r.spec.seed for r in results})
    estimated, estimated_note = estimate_seeds(seeds, policy.selection_seeds)

    budgets = sorted({r.spec.budget for r in results})
    targets = {s: baseline_target(s, baseline, best[(baseline, s)], reference, budgets)
               for s in seeds if best.get((baseline, s))}

    lost, trained = diverged_runs(results, policy.chosen, policy.selection_seeds)
    arms_out = {}
    for arm in arms:
        per_seed, cheap_per_seed, replaced = [], [], []
        left_out = lost_seeds(arm, baseline, lost)
        for s in seeds:
            runs = best.get((arm, s), {})
            if s in left_out:  # a diverged held-out seed: neither a biased value nor a silent gap
                replaced.append({"seed": s, "reason": left_out[s],
                                 "best": [run_entry(r) for _, r in sorted(runs.items())]})
                continue
            if s not in targets or not runs:
                continue
            target, base_tokens = targets[s]["loss"], targets[s]["reference_budget"]
            losses = {b: r.final_val_loss for b, r in runs.items()}
            tokens, speedup, interpolation = seed_speedup(losses, target, base_tokens)
            best_runs = [run_entry(r) for _, r in sorted(runs.items())]
            per_seed.append({"seed": s, "tokens_to_target": tokens.as_dict(), "speedup": speedup.as_dict(),
                             "interpolation": interpolation, "best": best_runs})
            longest = runs[max(runs)]
            cheap_tokens = tokens_to_target(longest.curve, target)
            cheap_per_seed.append({"seed": s, "run": longest.spec.name,
                                   "tokens_to_target": cheap_tokens.as_dict(),
                                   "speedup": speedup_from_tokens(base_tokens, cheap_tokens).as_dict()})
        summary, cheap = (summarize_seeds([Estimate.from_dict(p["speedup"]) for p in entries
                                           if p["seed"] in estimated], n_bootstrap,
                                          seed, margin, resolve_ratio, baseline=arm == baseline)
                          for entries in (per_seed, cheap_per_seed))
        arms_out[arm] = {
            "speedup": summary,
            "per_seed": per_seed,
            "cheap": {"method": CHEAP_METHOD, "speedup": cheap, "per_seed": cheap_per_seed},
            "selection_bias": None if arm == baseline else selection_bias(per_seed, policy.selection_seeds),
            "replaced": replaced,
            "divergence": arm_divergence(arm, lost, trained),
        }
        if not per_seed:
            summary["note"] = (f"no completed {arm} run" if not any(k[0] == arm for k in best)
                               else f"no completed {baseline} run to set the target")
            if arm in policy.angle_arms and not policy.of_arm(arm):  # no multiplier 1 to read: say why
                summary["note"] = policy.note_of(arm) or summary["note"]

    reads = {arm: sum(p["seed"] in estimated and p["seed"] not in policy.selection_seeds
                      for p in entry["per_seed"]) for arm, entry in arms_out.items()}
    # the baseline trains every arm's replacement seeds (their targets): it is no measure of how many to read
    fullest = max((n for arm, n in reads.items() if arm != baseline), default=reads.get(baseline, 0))
    for arm, entry in arms_out.items():
        if entry["replaced"]:
            note = replaced_note(arm, entry["replaced"], reads[arm], fullest)
            old = entry["speedup"].get("note")
            entry["speedup"]["note"] = f"{old}; {note}" if old else note

    best_names = {r.spec.name for by_budget in best.values() for r in by_budget.values()}
    per_run = []
    for r in results:
        entry = {"run": r.spec.name, **r.spec.as_dict(), "status": r.status,
                 "final_val_loss": r.final_val_loss, "best_lr_for_budget": r.spec.name in best_names,
                 "within_run": None}
        if r.usable and r.spec.seed in targets:
            target = targets[r.spec.seed]
            tokens = tokens_to_target(r.curve, target["loss"])
            speedup = speedup_from_tokens(target["reference_budget"], tokens)
            entry["within_run"] = {"tokens_to_target": tokens.as_dict(), "speedup": speedup.as_dict()}
        per_run.append(entry)

    return {
        "baseline": baseline,
        "arms_order": arms,
        "seeds": seeds,
        "budgets": budgets,
        "targets": [targets[s] for s in seeds if s in targets],
        "lr_policy": {**policy.as_dict(), "estimate_seeds": estimated, "note": estimated_note},
        "arms": arms_out,
        "contrasts": cell_contrasts(seed_speedups(arms_out, estimated), margin, resolve_ratio),
        "equivalence_margin": margin,
        "resolve_ratio": resolve_ratio,
        "verdict_rule": verdict_rule(margin),
        "runs": per_run,
        "ignored": [{"run": r.spec.name, "reason": r.status if r.status != "completed" else "non-finite loss"}
                    for r in results if not r.usable],
    }

