"""Is the sweep tuned where the grid grows from it? `ngptlab plan --check-tuning`, and the refusal of
`--prune-sweeps` and `--add-seeds` to act on a sweep that is not.

An arm's best learning rate at a budget, by the speed-up stage's own ranking (speedup/lr_policy.py: best_lr
over train.seeds' runs: fewest diverged runs, then the lowest mean final validation loss, ties to the
smaller), that is the largest or the smallest of its sweep may be better still beyond it: the sweep is
untuned there.
Pruning around it keeps a window that may not hold the optimum, and seeds added at it estimate the speed-up
at a learning rate that may be off. So both commands refuse while a best they act on (the pruning: at its
decision budget; the seeds: at each budget they are added at) sits at an edge, and name the fix,
`ngptlab plan --extend-sweeps`, unless told to go on (`--allow-untuned`).

The edge is that of the arm's whole sweep (train.learning_rates), as `--extend-sweeps` judges it, so the fix
it names clears it. Above a pruning budget only the kept window runs: a best at the window's top that lies
inside the whole sweep is no edge (the learning rates above it lost at the pruning budget, and the optimum
falls as runs get longer). The runs read are those of the first train.weight_dtype, as for the pruning and the
added seeds (speedup/lr_policy.py: sweep_runs).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ngptlab.errors import UntunedError
from ngptlab.grid.sweeps import lr_sweep
from ngptlab.settings import Params
from ngptlab.speedup.lr_policy import ResultOf, best_lr, grid_budgets, sweep_losses

TOP, BOTTOM, PENDING, DIVERGED = "top", "bottom", "pending", "diverged"
EDGES = (TOP, BOTTOM)
FIX = "`ngptlab plan --extend-sweeps`, then train the new runs"


@dataclass(frozen=True)
class Best:
    """An arm's best learning rate at one budget and where it sits in the arm's whole sweep: edge is TOP,
    BOTTOM, None (interior), PENDING (a run without results) or DIVERGED (every run diverged)."""

    scale: str
    context: int
    arm: str
    budget: int
    lr: float | None
    sweep: tuple[float, ...]
    edge: str | None

    def line(self) -> str:
        where = f"{self.scale} ctx{self.context} {self.arm} at {self.budget:,}"
        if self.edge == PENDING:
            return f"{where}: waiting for results"
        if self.edge == DIVERGED:
            return f"{where}: every run diverged"
        verdict = f"at the {self.edge} edge" if self.edge else "interior"
        return f"{where}: best lr {self.lr:g} of {', '.join(f'{lr:g}' for lr in self.sweep)}: {verdict}"

    def as_dict(self) -> dict:
        return {"scale": self.scale, "context": self.context, "arm": self.arm, "budget": self.budget,
                "best_lr": self.lr, "sweep": list(self.sweep), "edge": self.edge}


def best_at(params: Params, results: ResultOf, scale: str, context: int, arm: str, budget: int) -> Best:
    train = params.train
    sweep = tuple(sorted(lr_sweep(train, scale, context, arm)))
    losses = sweep_losses(train, results, scale, context, arm, budget)
    lr = best_lr(losses) if losses is not None else None
    edge = (PENDING if losses is None else DIVERGED if lr is None
            else TOP if lr == sweep[-1] else BOTTOM if lr == sweep[0] else None)
    return Best(scale, context, arm, budget, lr, sweep, edge)


def grid_bests(params: Params, results: ResultOf) -> list[Best]:
    """The Best of every (scale, context, arm, budget) in the grid now (train.protocol's held-back budgets
    and waiting angle arms are not)."""
    train = params.train
    return [best_at(params, results, scale, context, arm, budget)
            for scale in train.scales for context in train.contexts for arm in train.arms
            for budget in grid_budgets(train, scale, context, arm)]


def untuned(params: Params, results: ResultOf, points: Iterable[tuple[str, int, str, int]]) -> list[Best]:
    """The (scale, context, arm, budget) points whose best learning rate sits at an edge of its sweep."""
    bests = [best_at(params, results, *point) for point in sorted(set(points))]
    return [b for b in bests if b.edge in EDGES]


def refuse_untuned(edges: list[Best], option: str, allow: bool) -> list[str]:
    """Raise UntunedError naming each edge and the fix, unless `allow` (--allow-untuned): then one note per
    edge, for the command's printout."""
    if allow:
        return [f"went on with an untuned sweep (--allow-untuned): {b.line()}" for b in edges]
    if edges:
        lines = "\n".join(f"  {b.line()}" for b in edges)
        raise UntunedError(f"{option} refused: an arm's best learning rate sits at an edge of its sweep, "
                           f"where the optimum may lie beyond it (an untuned sweep):\n{lines}\n"
                           f"fix: {FIX}, and run {option} again; or pass --allow-untuned to go on with these "
                           "sweeps. Nothing was written.")
    return []


def summary(bests: list[Best]) -> str:
    """The verdict of --check-tuning in one line."""
    edges = sum(b.edge in EDGES for b in bests)
    counts = {"waiting for results": PENDING, "with every run diverged": DIVERGED}
    others = [f", {n} {what}" for what, edge in counts.items() if (n := sum(b.edge == edge for b in bests))]
    if not edges and not others:
        return "tuned: every arm's best learning rate lies inside its sweep at every budget"
    return (f"not tuned: {edges} (arm, budget) with its best learning rate at an edge of its sweep "
            f"(fix: {FIX}){''.join(others)}")
