"""Which runs of a cell evaluate: each arm's best-learning-rate run at each budget, as the cell's speed-up
recorded it (results/speedup/<cell>.json, `runs[].best_lr_for_budget`), at the largest budget of the grid
(`evaluate.budgets: largest`) or at every budget (`all`). A selected (arm, budget, seed) without a completed
run is a named hole."""

from __future__ import annotations

from ngptlab.grid.enumeration import compared_runs
from ngptlab.settings import Params
from ngptlab.speedup.arm_records import RunEntry
from ngptlab.speedup.document import SpeedupDocument


def select_runs(params: Params, cell: str, speedup: SpeedupDocument) -> tuple[list[RunEntry], list[dict]]:
    """The cell's runs to evaluate (the speed-up's best learning rate per arm, budget and seed) and the
    holes: wanted (arm, budget, seed) without a completed best run."""
    specs = [s for s in compared_runs(params) if s.cell == cell]
    budgets = sorted({s.budget for s in specs})
    wanted_budgets = budgets[-1:] if params.evaluate.budgets == "largest" else budgets
    best = {(r.arm, r.budget, r.seed): r for r in speedup.runs
            if r.best_lr_for_budget and r.status == "completed"}
    selected, holes = [], []
    for key in sorted({(s.arm, s.budget, s.seed) for s in specs if s.budget in wanted_budgets}):
        if key in best:
            selected.append(best[key])
        else:
            holes.append({"arm": key[0], "budget": key[1], "seed": key[2],
                          "reason": "no completed run at this budget"})
    return selected, holes
