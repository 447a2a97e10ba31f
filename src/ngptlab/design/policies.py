"""`ngptlab design --compare-policies`: the same design under each learning-rate policy, side by side.

The candidates (ngptlab.speedup.lr_policy): largest (one learning rate per arm, chosen at its largest
budget: one trunk per added seed under wsd), crossing (each arm's best learning rate where it reaches the
target; added seeds train only up to the budget past that crossing), budget (the best learning rate per
budget: under wsd one trunk per distinct chosen rate) and cosine, the paper's method (train.schedule cosine,
every budget its own run, the best learning rate per budget; no calibration runs, which only a wsd grid
has). Each row: per truth and cell, the noise-free gap to the planted law (the estimand's ln S minus the
law's, for the primary effect and for ngpt), how often ngpt's interval covers the planted law, how often
the reading is right, and the GPU-hours the protocol trains in that truth. The rule the project adopts:
the cheapest policy whose |gap| <= MAX_GAP at every planted truth.
"""

from __future__ import annotations

from dataclasses import replace

from ngptlab.design.printout import log_value
from ngptlab.plan.estimate import gpu_hours_text
from ngptlab.schedule import COSINE
from ngptlab.settings import Params

CANDIDATES = ("largest", "crossing", "budget", "cosine")
MAX_GAP = 0.02  # in ln S: a 2% error in the speed-up the paper's table is compared with


def under_policy(params: Params, candidate: str) -> Params:
    """params with speedup.lr_policy set to the candidate (cosine: the schedule and the per-budget rule)."""
    if candidate == COSINE:
        train = replace(params.train, schedule=COSINE, calibrate=None)
        return replace(params, train=train, speedup=replace(params.speedup, lr_policy="budget"))
    return replace(params, speedup=replace(params.speedup, lr_policy=candidate))


def comparison_rows(documents: dict[str, dict]) -> list[dict]:
    """[{policy, truth, cell, gap_primary, gap_ngpt, coverage_planted_ngpt, correct, gpu_hours}] from
    {policy: design_document}."""
    rows = []
    for policy, document in documents.items():
        for scenario in document["scenarios"]:
            for cell, s in scenario["cells"].items():
                primary, ngpt = s["estimates"]["primary"], s["estimates"].get("arm ngpt")
                rows.append({"policy": policy, "truth": scenario["truth"], "cell": cell,
                             "gap_primary": primary["policy_gap"],
                             "gap_ngpt": ngpt and ngpt["policy_gap"],
                             "coverage_planted_ngpt": ngpt and ngpt["coverage_planted"],
                             "correct": s["correct"], "gpu_hours": scenario["protocol_gpu_hours"]})
    return rows


def adopted(rows: list[dict]) -> str | None:
    """The cheapest policy (its largest GPU-hours over the truths) whose gaps all lie within MAX_GAP."""
    eligible: dict[str, float] = {}
    for policy in dict.fromkeys(r["policy"] for r in rows):
        mine = [r for r in rows if r["policy"] == policy]
        gaps = [g for r in mine for g in (r["gap_primary"], r["gap_ngpt"])]
        if all(g is not None and abs(g) <= MAX_GAP for g in gaps):
            eligible[policy] = max(r["gpu_hours"] for r in mine)
    return min(eligible, key=eligible.__getitem__) if eligible else None


def comparison_lines(rows: list[dict]) -> list[str]:
    def pct(p: dict | None) -> str:
        return f"{'n/a':>13}" if p is None or p["p"] is None else f"{p['p']:6.1%} ±{p['se']:5.1%}"

    header = (f"{'policy':<9} {'truth':<26} {'gap primary':>11} {'gap ngpt':>9} {'ngpt covers law':>15} "
              f"{'correct reading':>15} {'GPU-hours':>9}")
    lines = ["learning-rate policies compared (gap: the noise-free estimand's ln S minus the planted law's; "
             "GPU-hours: what the protocol trains in that truth)", header, "-" * len(header)]
    for r in rows:
        lines.append(f"{r['policy']:<9} {r['truth']:<26} {log_value(r['gap_primary']):>11} "
                     f"{log_value(r['gap_ngpt']):>9} {pct(r['coverage_planted_ngpt']):>15} "
                     f"{pct(r['correct']):>15} {gpu_hours_text(r['gpu_hours']):>9}")
    choice = adopted(rows)
    lines.append(f"the cheapest policy with |gap| <= {MAX_GAP} at every truth: {choice or 'none'}")
    return lines
