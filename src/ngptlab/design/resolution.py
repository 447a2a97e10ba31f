"""The range of ngpt speed-ups a design reads right: the figures a preset states beside its seed sd.

A speed-up is read right where, in the truths that must read right at it (design/table.py MUST_READ: the
conditioning account true, the norm account true, only ngpt fast, and the angle account true where the grid
runs the angle square; each at that speed-up, without the unequal learning-rate laws, which are planted at
one speed-up only), every account's P(correct reading) is at least MIN_CORRECT in every cell.

The smallest: each speed-up of SCAN above the equivalence margin, in increasing order, until the first read
right. Power grows with the planted speed-up near the margin, so the scan stops there. Below the margin no
speed-up can be resolved: "exceeds by more than xM" needs the whole interval beyond ln M.

The largest: from the smallest, every speed-up of SCAN and UPWARD above it and the paper's claims
(paper/paper_numbers.yaml, every context's), in increasing order, until the first one not read right; the
largest is the last read right before it, so every speed-up played from the smallest to the largest reads
right (the range is read, not interpolated). Near the top of the budgets' span a fast arm's speed-up rests
on its smallest budget or becomes a bound, so reading fails there although the span (speedup/estimator.py
measurable_range) still holds the speed-up: the span is what the budgets can express, this range what the
design reads. The first miss can come lower: a reading on the margin's edge (a planted departure from an
account's line, or a ratio, that crosses the margin between two speed-ups of the scan) splits the worlds
between it and "not resolved"; each row names where its least P(correct) is, so a preset can say which.

Each speed-up played reports the least P(correct) over its truths, cells and accounts with its Monte-Carlo
Clopper-Pearson interval (design/table.py monte_carlo_interval at MC_LEVEL). A speed-up the design document
already played at the same worlds (design/command.py: design.ngpt_speedups, or 1.5, 4 and the paper's
claim at the grid's contexts) is read from that document's table instead of played again.
"""

from __future__ import annotations

from collections.abc import Callable

from ngptlab.design.loss_model import LossModel
from ngptlab.design.simulate import simulate
from ngptlab.design.table import MC_LEVEL, MIN_CORRECT, MUST_READ, design_table, monte_carlo_interval
from ngptlab.design.truths import Truth, truths
from ngptlab.paper import paper_numbers
from ngptlab.settings import Params

SCAN = (1.3, 1.4, 1.5, 1.75, 2.0, 3.0, 4.0)
UPWARD = (6.0, 8.0, 10.0, 12.0, 16.0, 20.0, 30.0)  # above SCAN, up to past the paper's largest claim


def paper_claims() -> tuple[float, ...]:
    """The paper's speed-up at every context it reports one (about 4x at 1k, 10x at 4k, ...)."""
    return tuple(float(entry["factor"]) for entry in paper_numbers()["speedup"])


def upward_scan(smallest: float) -> list[float]:
    """The speed-ups the largest's scan plays above the smallest, increasing (module docstring)."""
    return sorted({s for s in (*SCAN, *UPWARD, *paper_claims()) if s > smallest})


def must_read(params: Params, speedup: float) -> list[Truth]:
    """The truths that must read right at this speed-up (module docstring)."""
    return [truth for truth in truths([speedup], params.train.arms)
            if truth.account in MUST_READ and truth.ngpt == speedup and not truth.lr_laws]


def least_correct(table: dict) -> dict | None:
    """{p, se, n, truth, cell, account, expected} of the smallest P(correct reading) over the table's truths,
    cells and accounts, with where it is and the reading expected there (None: none defined)."""
    found = [{**a["correct"], "truth": scenario["truth"], "cell": cell, "account": name,
              "expected": a["expected_label"]}
             for scenario in table["scenarios"] for cell, summary in scenario["cells"].items()
             for name, a in summary["accounts"].items()
             if a["correct"] is not None and a["correct"]["p"] is not None]
    return min(found, key=lambda c: c["p"]) if found else None


def _from_document(document: dict | None, planted: list[Truth], worlds: int) -> dict | None:
    """The document's table cut to the planted truths where it played every one at these worlds."""
    if not document:
        return None
    by_label = {s["truth"]: s for s in document.get("scenarios", []) if s["worlds"] == worlds}
    if document.get("worlds") != worlds or not all(t.label in by_label for t in planted):
        return None
    return {"scenarios": [by_label[t.label] for t in planted]}


class _Reader:
    """Plays (or reads from the document) each speed-up once and keeps the row it gives."""

    def __init__(self, params: Params, model: LossModel, worlds: int, seed: int, jobs: int | None,
                 say: Callable[[str], None] | None, document: dict | None):
        self.params, self.model, self.worlds, self.seed, self.jobs = params, model, worlds, seed, jobs
        self.say, self.document, self.rows = say, document, {}
        self.margin = float(params.speedup.equivalence_margin)

    def row(self, speedup: float) -> dict:
        if speedup not in self.rows:
            planted = must_read(self.params, speedup)
            table = _from_document(self.document, planted, self.worlds)
            reused = table is not None
            if table is None:
                outcomes, _ = simulate(self.params, self.model, planted, self.worlds, self.seed, self.jobs)
                table = design_table(outcomes, planted, self.params.speedup.primary_contrast, self.margin)
            least = least_correct(table)
            self.rows[speedup] = {
                "ngpt": speedup, "least_correct": None if least is None else least["p"],
                "interval": None if least is None else monte_carlo_interval(least, MC_LEVEL),
                "read_right": least is not None and least["p"] >= MIN_CORRECT, "reused": reused,
                "least_at": None if least is None else {k: least[k] for k in ("truth", "cell", "account",
                                                                               "expected")}}
            if self.say:
                least_p = self.rows[speedup]["least_correct"]
                self.say(f"resolution: ngpt x{speedup:g} read right in at least {_percent(least_p)} of worlds"
                         + (" (the design's own worlds)" if reused else ""))
        return self.rows[speedup]


def _smallest(reader: _Reader) -> tuple[list[dict], float | None]:
    """(rows played, the smallest read right or None): SCAN above the margin up to the first read right."""
    scanned = []
    for speedup in (s for s in SCAN if s > reader.margin):
        scanned.append(reader.row(speedup))
        if scanned[-1]["read_right"]:
            return scanned, speedup
    return scanned, None


def readable_range(params: Params, model: LossModel, worlds: int, seed: int, jobs: int | None = None,
                   say: Callable[[str], None] | None = None, document: dict | None = None) -> dict:
    """{smallest, largest, first_failure, min_correct, mc_level, scanned [{ngpt, least_correct, interval,
    read_right, reused}], upward [...], worlds, seed_sd}: the module docstring's two scans; smallest None
    when no speed-up of SCAN reaches MIN_CORRECT (then no upward scan), first_failure the row above the
    largest (None: the whole upward scan read right). document: a design document whose table may hold a
    speed-up's truths already (read, not played again). `say`: a progress line per speed-up."""
    reader = _Reader(params, model, worlds, seed, jobs, say, document)
    scanned, smallest = _smallest(reader)
    upward, largest, failure = [], smallest, None
    for speedup in upward_scan(smallest) if smallest is not None else []:
        upward.append(reader.row(speedup))
        if not upward[-1]["read_right"]:
            failure = upward[-1]
            break
        largest = speedup
    return {"smallest": smallest, "largest": largest, "first_failure": failure, "min_correct": MIN_CORRECT,
            "mc_level": MC_LEVEL, "scanned": scanned, "upward": upward, "worlds": worlds,
            "seed_sd": model.seed_sd}


def _percent(p: float | None) -> str:
    return "n/a" if p is None else f"{p:.0%}"


def _p_text(row: dict) -> str:
    interval = row["interval"]
    shown = "" if interval is None else f" [{interval[0]:.0%}, {interval[1]:.0%}]"
    return f"{_percent(row['least_correct'])}{shown}"


def _where(row: dict) -> str:
    at = row.get("least_at")
    return "" if not at else (f", the {at['account']} account in {at['truth']}, {at['cell']}, expected "
                              f"{at['expected']}")


def _row_text(row: dict) -> str:
    return f"x{row['ngpt']:g} {_p_text(row)}"


def resolution_line(resolution: dict) -> str:
    """The scans in one line of the printout: the range the design reads, then every speed-up played."""
    rule = (f"P(correct) >= {resolution['min_correct']:.0%} at every account and cell where an account, or "
            f"only ngpt's speed-up, is true; {resolution['worlds']} worlds each, seed sd "
            f"{resolution['seed_sd']:g}")
    if resolution["smallest"] is None:
        found = f"reads no ngpt speed-up of the scan right ({rule})"
    else:
        failure = resolution["first_failure"]
        above = ("every speed-up scanned above it read right" if failure is None
                 else f"above x{resolution['largest']:g}: P = {_p_text(failure)} at x{failure['ngpt']:g}"
                      + _where(failure))
        found = (f"reads the accounts right from x{resolution['smallest']:g} to x{resolution['largest']:g} "
                 f"({rule}; {above})")
    played = ", ".join(_row_text(r) for r in [*resolution["scanned"], *resolution["upward"]])
    return (f"readable range: {found} (least P(correct) per speed-up played, with its Monte-Carlo "
            f"{resolution['mc_level']:.0%} Clopper-Pearson interval: {played})")

