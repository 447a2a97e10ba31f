"""The smallest speed-up a design reads right: the resolution a preset states beside its seed sd.

For each ngpt speed-up of SCAN above the equivalence margin, in increasing order, it plays the truths that
must read right (design/table.py MUST_READ: the conditioning account true, the norm account true, only ngpt
fast, and the angle account true where the grid runs the angle square) at that speed-up and stops at the first
where every account's P(correct reading) is at least MIN_CORRECT in every cell: the smallest speed-up of the
scan the design resolves. Power grows with the planted speed-up, so the scan stops there rather than playing
the rest. Below the margin no speed-up can be resolved: "exceeds by more than xM" needs the whole interval
beyond ln M.
"""

from __future__ import annotations

from collections.abc import Callable

from ngptlab.design.loss_model import LossModel
from ngptlab.design.simulate import simulate
from ngptlab.design.table import MIN_CORRECT, MUST_READ, design_table
from ngptlab.design.truths import truths
from ngptlab.settings import Params

SCAN = (1.3, 1.4, 1.5, 1.75, 2.0, 3.0, 4.0)


def least_correct(table: dict) -> float | None:
    """The smallest P(correct reading) over the table's truths, cells and accounts (None: none defined)."""
    found = [a["correct"]["p"] for scenario in table["scenarios"] for cell in scenario["cells"].values()
             for a in cell["accounts"].values() if a["correct"] is not None]
    return min(found) if found else None


def smallest_resolved(params: Params, model: LossModel, worlds: int, seed: int,
                      jobs: int | None = None, say: Callable[[str], None] | None = None) -> dict:
    """{smallest, min_correct, scanned [{ngpt, least_correct}], worlds, seed_sd}: the module docstring's
    scan; smallest None when no speed-up of the scan reaches MIN_CORRECT. `say`: a progress line per
    speed-up scanned."""
    margin = float(params.speedup.equivalence_margin)
    scanned, smallest = [], None
    for speedup in (s for s in SCAN if s > margin):
        planted = [truth for truth in truths([speedup], params.train.arms) if truth.account in MUST_READ]
        outcomes, _ = simulate(params, model, planted, worlds, seed, jobs)
        least = least_correct(design_table(outcomes, planted, params.speedup.primary_contrast, margin))
        scanned.append({"ngpt": speedup, "least_correct": least})
        if say:
            say(f"resolution: ngpt x{speedup:g} read right in at least {_percent(least)} of worlds")
        if least is not None and least >= MIN_CORRECT:
            smallest = speedup
            break
    return {"smallest": smallest, "min_correct": MIN_CORRECT, "scanned": scanned, "worlds": worlds,
            "seed_sd": model.seed_sd}


def _percent(p: float | None) -> str:
    return "n/a" if p is None else f"{p:.0%}"


def resolution_line(resolution: dict) -> str:
    """The scan in one line of the printout."""
    scanned = ", ".join(f"x{r['ngpt']:g} {_percent(r['least_correct'])}" for r in resolution["scanned"])
    found = "none of the scan" if resolution["smallest"] is None else f"x{resolution['smallest']:g}"
    return (f"smallest ngpt speed-up read right (every account, P(correct) >= "
            f"{resolution['min_correct']:.0%} where an account, or only ngpt's speed-up, is true; "
            f"{resolution['worlds']} worlds each, seed sd {resolution['seed_sd']:g}): {found} "
            f"(least P(correct) per speed-up scanned: {scanned})")
