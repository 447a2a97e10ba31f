"""The section "Which account: conditioning or the effective learning rate": the two squares read as
factorials, and each account's predicted pattern tested prediction by prediction (speedup/reading.py).

The conditioning square (gpt, gpt-rownorm, gpt-orth, ngpt) separates conditioning from the weight norms; the
angle square (gpt, gpt-angle, ngpt-angle, ngpt) separates nGPT's architecture from how far its matrices turn
per step, the effective learning rate (Kosson et al., arXiv 2305.17212: the angular update as its proxy).
The section shows what the speed-up files say: the readings, the statuses and the intervals they rest on.
"""

from __future__ import annotations

import math
import statistics

from ngptlab.grid.resources import run_shape
from ngptlab.models import ARMS
from ngptlab.models.matched_angle import TURNS_LIKE
from ngptlab.report.kit import views
from ngptlab.report.kit.conditioning import headline_value
from ngptlab.report.kit.document import Document, Heading, TableBlock, Text
from ngptlab.report.kit.load import Results, RunRecord
from ngptlab.report.kit.speedups import arm_runs, bracket, effect_text
from ngptlab.report.kit.table import Table, fmt_num, fmt_text
from ngptlab.speedup.equivalence import claim_words
from ngptlab.speedup.factorial import ANGLE, CONDITIONING
from ngptlab.speedup.reading import short
from ngptlab.train import angle_targets

SQUARES = (("conditioning square", "factorial", CONDITIONING), ("angle square", "angle_factorial", ANGLE))


def accounts_table(results: Results) -> Table:
    """Every account's every prediction in every cell: what it predicts, what the interval holds, and the
    prediction's status."""
    cols = ["cell", "account", "prediction", "predicted", "required", "interval", "held", "status", "reading"]
    t = Table("accounts", "Each account's predictions, tested one by one", cols, key=["cell", "account",
                                                                                      "prediction"],
              headers={"interval": "S_a / S_b [95% interval]", "held": "what the interval shows",
                       "required": "in the pattern", "reading": "the account's reading"},
              formats=dict.fromkeys(cols, fmt_text),
              shown=["cell", "account", "prediction", "predicted", "interval", "held", "status", "reading"],
              note="An account's reading is consistent only when every prediction of its pattern is tested "
                   "and every prediction tested holds (an intersection-union test), inconsistent when one is "
                   "shown not to hold, else not resolved. Predictions outside the pattern (the other "
                   "square's arms) are tested where the cell has the whole pattern. An arm against gpt is "
                   "read from its speed-up's interval, a pair of arms from their paired contrast.")
    margin = next((d.equivalence_margin for d in results.speedups.values() if d and d.equivalence_margin),
                  1.25)
    for cell, doc in results.speedups.items():
        reading = doc.reading if doc else None
        for name, account in (reading.accounts if reading else {}).items():
            for test in account["pattern"]:
                interval = test["log_interval"]
                t.add({"cell": cell, "account": name, "prediction": f"{test['a']} vs {test['b']}",
                       "predicted": claim_words(test["predicted"], margin),
                       "required": "yes" if test.get("required", True) else "no",
                       "interval": None if interval is None else bracket([math.exp(x) for x in interval]),
                       "held": "nothing" if test["held"] is None else claim_words(test["held"], margin),
                       "status": test["status"], "reading": account["reading"]},
                      arm_runs(doc, test["a"]) + arm_runs(doc, test["b"]))
    return t


def squares_table(results: Results) -> Table:
    """Both squares' factorial effects per cell."""
    cols = ["cell", "square", "effect", "ratio_display", "verdict", "note"]
    t = Table("squares", "Both squares as factorials: effects on the speed-up, paired by seed", cols,
              key=["cell", "square", "effect"],
              headers={"ratio_display": "effect, as a ratio of speed-ups [interval]"},
              formats=dict.fromkeys(cols, fmt_text),
              note=f"Coding: {CONDITIONING.coding}. Angle square: {ANGLE.coding}. Verdict by the symmetric "
                   "rule (the margin judges both a difference and an equivalence).")
    for cell, doc in results.speedups.items():
        for label, key, square in SQUARES:
            f = getattr(doc, key) if doc else None
            if f is None:
                continue
            runs = [r for arm in square.arms for r in arm_runs(doc, arm, set(f.seeds))]
            for name, e in f.effects.items():
                t.add({"cell": cell, "square": label, "effect": name, "ratio_display": effect_text(e),
                       "verdict": e.verdict, "note": f.note}, runs)
    return t


def mean_step_angle(record: RunRecord) -> float | None:
    """A run's angle per optimizer step, mean over its metrics rows and their matrix kinds (None: not
    logged)."""
    rows = [statistics.fmean(angles.values()) for _, angles in record.observed.get("step_angle", [])
            if angles]
    return statistics.fmean(rows) if rows else None


def angles_table(results: Results) -> Table:
    """Each arm of the angle square beside its angle per step and its conditioning: the run the report
    represents the arm by in the cell (the best run at the largest budget)."""
    cols = ["cell", "arm", "run", "step_angle", "turns_like", "target", "kappa"]
    t = Table("angles", "The angle square: how far each arm's matrices turn per step, and their conditioning",
              cols, key=["cell", "arm"],
              headers={"step_angle": "angle per step, mean over training and kinds (rad)",
                       "turns_like": "set to the angle of", "target": "target at the peak (rad)",
                       "kappa": "κ attention (whole), median"},
              formats={"cell": fmt_text, "arm": fmt_text, "run": fmt_text, "turns_like": fmt_text,
                       "step_angle": lambda x: fmt_num(x, 3), "target": lambda x: fmt_num(x, 3),
                       "kappa": lambda x: fmt_num(x, 3)},
              note="The angle per optimizer step is measured on the matrices the optimizer holds, W before "
                   "and after one step and the arm's constraint (observe/step_angle.py); it follows the "
                   "learning-rate schedule, so the mean over training sits below the peak. An angle arm's "
                   "target is the matched arm's angle at the schedule's peak, as train.angles holds it "
                   "(`ngptlab plan --match-angles`), or the prior before a measurement "
                   "(train/angle_targets.py). If gpt-angle's κ moves to ngpt's, the angle square cannot "
                   "separate the accounts.")
    train = results.params.train
    for cell in results.speedups:
        for rep in views.representatives(results, cell):
            if rep.arm not in ANGLE.arms or rep.record is None:
                continue
            spec, target, like = rep.record.spec, None, TURNS_LIKE.get(rep.arm)
            if like is not None:
                kinds = ARMS[rep.arm].recipe_type.turned_kinds
                angles, _ = angle_targets.targets(train, spec, run_shape(train, spec.scale), like, kinds)
                target = statistics.fmean(angles.values())
            t.add({"cell": cell, "arm": rep.arm, "run": spec.name, "step_angle": mean_step_angle(rep.record),
                   "turns_like": like, "target": target,
                   "kappa": headline_value(rep.record, "attn_condition_median")}, [spec.name])
    return t


def readings_text(results: Results) -> str:
    """Per cell, each account's reading in the speed-up file's words."""
    lines = []
    for cell, doc in results.speedups.items():
        if doc and doc.reading and doc.reading.accounts:
            named = "; ".join(f"the {name} account: {short(a['reading'])}"
                              for name, a in doc.reading.accounts.items())
            lines.append(f"{cell}: {named}.")
    return " ".join(lines)


def section(doc: Document, results: Results) -> None:
    """The section, where some speed-up file reads the accounts (files from before that have none)."""
    if not any(d and d.reading and d.reading.accounts for d in results.speedups.values()):
        return
    doc.add(Heading("Which account: conditioning or the effective learning rate", "which-account"))
    doc.add(Text(
        "Three accounts of nGPT's speed-up, each a predicted pattern over the arms. Conditioning: gpt-orth "
        "(conditioning fixed) as fast as ngpt, gpt-rownorm (norms fixed) as slow as gpt. The norms: the "
        "mirror. The effective learning rate: gpt-angle (gpt's architecture turned at ngpt's per-step "
        "angle) as fast as ngpt, ngpt-angle (ngpt turned at gpt's angle) as slow as gpt, and gpt-orth as "
        "gpt. Same learning rate is not same angle: at one nominal learning rate an nGPT matrix turns "
        "several times further per step than AdamW's equilibrium angle (Kosson et al., arXiv 2305.17212), "
        "so only arms that set the angle can separate the accounts."))
    squares, angles = squares_table(results), angles_table(results)
    too_small = views.too_small(results)  # as the settle-it section: the measurements shown, nothing read
    text = ("None, by design: the grid's largest budget is below report.min_budget_for_claims."
            if too_small else readings_text(results))
    if text:
        doc.add(Text("**Readings.** " + text))
    for table in (squares, None if too_small else accounts_table(results), angles):
        if table is not None and len(table):
            doc.add(TableBlock(table))
