"""The learning-rate sweeps in the report: per cell, arm and budget, which learning rates ran, with which
seeds, and why the others of the arm's sweep did not.

A grid that grows by its results (ngptlab.plan.prune, ngptlab.plan.seeds) no longer sweeps every learning
rate at every budget: above a pruning budget only the K kept learning rates run (successive halving), and the
seeds added beyond train.seeds run only the best learning rate. A reader of a speed-up needs both facts: an
arm tuned over fewer learning rates at some budget is compared as the table says, not as the sweep promises.
"""

from __future__ import annotations

from ngptlab.grid.sweeps import held_back, lr_sweep, pruning_of
from ngptlab.report.document import Document, TableBlock, Text
from ngptlab.report.load import Results
from ngptlab.report.table import Table, fmt_int, fmt_lr, fmt_text


def grows(train: dict) -> bool:
    """Whether some budget runs other learning rates or seeds than the sweep x train.seeds."""
    return bool(train.get("pruned_sweeps") or train.get("added_seeds") or train.get("protocol"))


def _lrs(values: list[float]) -> str:
    return ", ".join(fmt_lr(v) for v in sorted(values)) or "none"


def stopped_why(train: dict, scale: str, context: int, arm: str, budget: int) -> str | None:
    """Why the learning rates of the arm's sweep missing at this budget stopped: the pruning that dropped
    them, or the protocol that holds the budget back until that pruning."""
    if held_back(train, scale, context, arm, budget):
        after = train["protocol"]["prune_sweeps"]["after_budget"]
        return (f"held back until `ngptlab plan --prune-sweeps` has chosen its learning rates from the "
                f"results up to {after:,}")
    pruned = pruning_of(train, scale, context, arm, budget)
    if pruned is None:
        return None
    best = f" ({fmt_lr(pruned['best_lr'])})" if pruned.get("best_lr") else ""
    below = f" and the {pruned['keep'] - 1} below it" if pruned["keep"] > 1 else ""
    return f"pruned after {pruned['after_budget']:,}: the best learning rate there{best}{below} run on"


def sweeps_table(results: Results) -> Table:
    train = results.params["train"]
    cols = ["cell", "arm", "budget", "learning_rates", "seeds", "added_seeds", "stopped", "why"]
    t = Table("sweeps", "Learning rates and seeds run at each budget", cols, key=["cell", "arm", "budget"],
              headers={"learning_rates": "learning rates (train.seeds)", "added_seeds": "added seeds (lr)",
                       "stopped": "not run", "why": "why not"},
              formats={c: fmt_text for c in cols} | {"budget": fmt_int},
              note="Successive halving (ngptlab plan --prune-sweeps) keeps, above a budget whose results are "
                   "in, each arm's best learning rate there and the ones below it (the optimum falls as runs "
                   "get longer); added seeds (ngptlab plan --add-seeds) run only the best learning rate.")
    for cell in results.cells:
        records = results.compared_runs(cell)
        if not records:
            continue
        scale, context = records[0].spec.scale, records[0].spec.context
        for arm in train["arms"]:
            full = lr_sweep(train, scale, context, arm)
            for budget in sorted(train["budgets"]):
                here = [r for r in records if r.spec.arm == arm and r.spec.budget == budget]
                swept = sorted({r.spec.lr for r in here if r.spec.seed in train["seeds"]})
                added = sorted({(r.spec.lr, r.spec.seed) for r in here if r.spec.seed not in train["seeds"]})
                stopped = [lr for lr in full if lr not in swept]
                t.add({"cell": cell, "arm": arm, "budget": budget, "learning_rates": _lrs(swept),
                       "seeds": ", ".join(map(str, train["seeds"])) if swept else None,
                       "added_seeds": "; ".join(f"{s} ({fmt_lr(lr)})" for lr, s in added) or None,
                       "stopped": _lrs(stopped) if stopped else None,
                       "why": stopped_why(train, scale, context, arm, budget) if stopped else None},
                      [r.name for r in here])
    return t


def section(doc: Document, results: Results) -> None:
    """The sweeps' table, for a grid that prunes or adds seeds; one sentence otherwise."""
    train = results.params["train"]
    if not grows(train):
        doc.add(Text(f"Every arm ran its whole learning-rate sweep at every budget, with seeds "
                     f"{', '.join(map(str, train['seeds']))}."))
        return
    doc.add(TableBlock(sweeps_table(results)))
