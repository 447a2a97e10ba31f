"""Derived views of the loaded results that several sections share.

The best run per (arm, budget, seed) is the speed-up stage's choice: results/speedup/<cell>.json marks it
(runs[].best_lr_for_budget), so the curves and spectra shown are those of the runs that entered the speed-up
(a WSD grid's cosine calibration runs never do). A cell without its speed-up file (some run has not finished)
and the calibration runs, which no speed-up reads, are chosen by the speed-up stage's own functions
(ngptlab.speedup.lr_policy.runs_policy, ngptlab.speedup.estimator.runs_at_chosen_lr: each seed's completed run
at the learning rate of the lowest mean final loss over train.seeds, ties to the smaller learning rate).
A cell's "representative" run of an arm, whose conditioning the figures show, is that best run at the
grid's largest budget for the smallest seed: every arm is then compared at the same budget, and an arm
without such a run is listed as missing rather than replaced by a smaller budget.
"""

from __future__ import annotations

from dataclasses import dataclass

from ngptlab.models import arms as arms_table
from ngptlab.report.kit.load import Results, RunRecord
from ngptlab.results import RunResult
from ngptlab.speedup.estimator import runs_at_chosen_lr
from ngptlab.speedup.lr_policy import BUDGET as PER_BUDGET
from ngptlab.speedup.lr_policy import angle_targets, runs_policy

# The 2x2 design (DESIGN.md): {norm free, fixed} x {conditioning free, fixed}, as models/arms.yaml places it.
DESIGN_2X2 = tuple(arms_table.square("conditioning")[corner] for corner in ("00", "10", "01", "11"))


def arms(results: Results) -> list[str]:
    """Arms in params order, the (primary) baseline first."""
    baseline = results.params.speedup.baselines[0]
    listed = list(results.params.train.arms)
    return [baseline] + [a for a in listed if a != baseline]


def budgets(results: Results) -> list[int]:
    return sorted(results.params.train.budgets)


def too_small(results: Results) -> bool:
    """Whether the grid's largest budget is below report.min_budget_for_claims: nothing is concluded."""
    return max(results.params.train.budgets) < results.params.report.min_budget_for_claims


def _run_result(record: RunRecord) -> RunResult:
    loss = record.final_val_loss
    return RunResult(spec=record.spec, status=record.status,
                     final_val_loss=float("nan") if loss is None else loss)


def best_runs(results: Results, cell: str) -> dict[tuple[str, int], dict[int, RunRecord]]:
    """{(arm, seed): {budget: best record}} for one cell, over the runs that compare arms (train.schedule's:
    never a WSD grid's cosine calibration runs), completed runs only: the speed-up file's choice, in grid
    order (module docstring); best_of's without one."""
    doc = results.speedups.get(cell)
    if doc is None:
        return best_of(results, results.compared_runs(cell))
    chosen = {entry.run for entry in doc.runs if entry.best_lr_for_budget}
    best: dict[tuple[str, int], dict[int, RunRecord]] = {}
    for record in results.compared_runs(cell):
        if record.name in chosen:
            best.setdefault((record.spec.arm, record.spec.seed), {})[record.spec.budget] = record
    return best


def best_of(results: Results, records: list[RunRecord], rule: str | None = None
            ) -> dict[tuple[str, int], dict[int, RunRecord]]:
    """The speed-up stage's choice among `records`, which must share one schedule: its own function, under
    `rule` (default speedup.lr_policy; "budget": each budget's own best, for a comparison at one budget)."""
    runs = [_run_result(r) for r in records if r.summary is not None]
    speedup = results.params.speedup
    # the angle arms at multiplier 1 of the params' measured targets, as the speed-up stage reads them
    angles = angle_targets(results.params.train, runs[0].spec.scale, runs[0].spec.context,
                           sorted({r.spec.arm for r in runs})) if runs else {}
    policy = runs_policy(runs, rule or speedup.lr_policy, speedup.baselines, speedup.reference_budget,
                         results.params.train.seeds, angles)
    best = runs_at_chosen_lr(runs, policy)
    return {key: {b: results.runs[rr.spec.name] for b, rr in per.items()} for key, per in best.items()}


@dataclass(frozen=True)
class Representative:
    arm: str
    record: RunRecord | None  # None: no completed run at the largest budget
    reason: str = ""  # why there is none


def representatives(results: Results, cell: str) -> list[Representative]:
    """Per arm, the best completed run at the grid's largest budget, smallest seed (module docstring); where
    the speed-up reads no run of the arm there (the crossing rule stops a fast arm earlier), that budget's
    own best learning rate."""
    largest = budgets(results)[-1]
    chosen = best_runs(results, cell)
    at_largest = best_of(results, results.compared_runs(cell), rule=PER_BUDGET)
    out = []
    for arm in arms(results):
        reads = any(a == arm and largest in per for (a, _), per in chosen.items())
        best = chosen if reads else at_largest
        seeds = sorted(s for (a, s), per in best.items() if a == arm and largest in per)
        if seeds:
            out.append(Representative(arm, best[(arm, seeds[0])][largest]))
            continue
        statuses = sorted({r.status for r in results.compared_runs(cell) if r.spec.arm == arm
                           and r.spec.budget == largest})
        reason = f"no completed run at {largest:,} tokens ({', '.join(statuses)})"
        out.append(Representative(arm, None, reason))
    return out


def status_counts(records: list[RunRecord]) -> dict[str, int]:
    counts = {"completed": 0, "diverged": 0, "missing": 0}
    for r in records:
        counts[r.status] += 1
    return counts


def mean_best_loss(best: dict[tuple[str, int], dict[int, RunRecord]], arm: str, budget: int) -> float | None:
    """The arm's best final loss at `budget` (best_runs' records), mean over its seeds; None without one."""
    losses = [per[budget].final_val_loss for (a, _), per in best.items() if a == arm and budget in per]
    return sum(losses) / len(losses) if losses else None


def run_shards(record: RunRecord) -> tuple[str | None, str | None]:
    """The (train, val) shard sha256 a run's summary records it trained on."""
    data = record.summary.get("data") or {}
    return data.get("train_sha256"), data.get("val_sha256")


def runs_on_other_data(results: Results) -> list[str]:
    """The runs whose summary records shards other than those data/tokens/<source>/meta.json describes:
    trained before prepare wrote new shards, and not retrained since."""
    if results.meta is None:
        return []
    splits = results.meta.get("splits", {})
    current = ((splits.get("train") or {}).get("sha256"), (splits.get("val") or {}).get("sha256"))
    return [r.name for r in results.runs.values() if r.summary is not None and run_shards(r) != current]
