"""The section "Which account: conditioning or the effective learning rate": the two squares read as
factorials, each account's reading with its source (speedup/reading.py: measured, from the arms' measured
kappa and angle per step, the dose-response section's fits; construction, the norm account; labels, the
label pattern where no line is fitted), and each account's label pattern tested prediction by prediction.

The conditioning square (gpt, gpt-rownorm, gpt-orth, ngpt) separates conditioning from the weight norms; the
angle square (gpt, gpt-angle, ngpt-angle, ngpt) separates nGPT's architecture from how far its matrices turn
per step, the effective learning rate (Kosson et al., arXiv 2305.17212: the angular update as its proxy).
The section shows what the speed-up files say: the readings, the statuses and the intervals they rest on.
"""

from __future__ import annotations

import math
import statistics

from ngptlab import schedule as schedules
from ngptlab.batch import tokens_per_step
from ngptlab.grid.resources import run_shape
from ngptlab.models.arms import turns_like
from ngptlab.models.layers import MATRIX_KINDS
from ngptlab.models.registry import recipe_of
from ngptlab.report.kit import plot, views
from ngptlab.report.kit.conditioning import headline_value
from ngptlab.report.kit.document import Document, Figure, FigureBlock, Heading, TableBlock, Text
from ngptlab.report.kit.load import Results, RunRecord
from ngptlab.report.kit.speedups import arm_runs, bracket, effect_text
from ngptlab.report.kit.table import Table, fmt_levels, fmt_num, fmt_text, levelled
from ngptlab.speedup.equivalence import claim_words
from ngptlab.speedup.factorial import ANGLE, CONDITIONING
from ngptlab.speedup.reading import short
from ngptlab.speedup.separation import ratio_text
from ngptlab.train import angle_targets

SQUARES = (("conditioning square", "factorial", CONDITIONING), ("angle square", "angle_factorial", ANGLE))


def accounts_table(results: Results) -> Table:
    """Every account's every prediction in every cell: what it predicts, what the interval holds, and the
    prediction's status."""
    cols = ["cell", "account", "prediction", "predicted", "required", "interval", "held", "status",
            "by_labels", "reading", "source"]
    interval = levelled(fmt_levels(d.reading.effect.level for d in results.speedups.values()
                                   if d and d.reading), "interval")
    t = Table("accounts", "Each account's label pattern, tested one by one, beside its reading", cols,
              key=["cell", "account", "prediction"],
              headers={"interval": f"S_a / S_b [{interval}]",
                       "held": "what the interval shows", "required": "in the pattern",
                       "by_labels": "the pattern's reading", "reading": "the account's reading",
                       "source": "read from"},
              formats=dict.fromkeys(cols, fmt_text),
              shown=["cell", "account", "prediction", "predicted", "interval", "held", "status", "by_labels",
                     "reading", "source"],
              note="A label pattern reads consistent only when every prediction is tested and every "
                   "prediction tested holds (an intersection-union test), inconsistent when one is shown not "
                   "to hold, else not resolved. An arm against gpt is read from its speed-up's interval, a "
                   "pair of arms from their paired contrast. The account's reading is the pattern's only "
                   "where its source says labels (no line fitted over measured mechanisms) or construction "
                   "(the norm account: fixed norms are set by construction); where it says measured, it is "
                   "the dose-response fit's (the next section).")
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
                       "status": test["status"], "by_labels": account.get("by_labels", account["reading"]),
                       "reading": account["reading"], "source": account.get("source", "labels")},
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
    cols = ["cell", "arm", "run", "step_angle", "turns_like", "target", "target_from", "to_matched", "kappa"]
    t = Table("angles", "The angle square: how far each arm's matrices turn per step, and their conditioning",
              cols, key=["cell", "arm"],
              headers={"step_angle": "angle per step, mean over training and kinds (rad)",
                       "turns_like": "set to the angle of", "target": "target at the peak (rad)",
                       "target_from": "target from", "to_matched": "angle per step / the matched arm's",
                       "kappa": "κ attention (whole), median"},
              formats={"cell": fmt_text, "arm": fmt_text, "run": fmt_text, "turns_like": fmt_text,
                       "target_from": fmt_text, "step_angle": lambda x: fmt_num(x, 3),
                       "target": lambda x: fmt_num(x, 3), "to_matched": lambda x: fmt_num(x, 3),
                       "kappa": lambda x: fmt_num(x, 3)},
              note="The angle per optimizer step is measured on the matrices the optimizer holds, W before "
                   "and after one step and the arm's constraint (observe/step_angle.py); it follows the "
                   "learning-rate schedule, so the mean over training sits below the peak. An angle arm's "
                   "target is the matched arm's angle at the schedule's peak, as train.angles holds it "
                   "(`ngptlab plan --match-angles`), or the prior before a measurement "
                   "(train/angle_targets.py; target from: the measured run, or prior). If gpt-angle's κ "
                   "moves to ngpt's, the angle square cannot separate the accounts.")
    for cell in results.speedups:
        for rep in views.representatives(results, cell):
            if rep.arm not in ANGLE.arms or rep.record is None:
                continue
            spec, like = rep.record.spec, turns_like().get(rep.arm)
            targets, source = target_of(results, rep.record) if like else ({}, None)
            t.add({"cell": cell, "arm": rep.arm, "run": spec.name, "step_angle": mean_step_angle(rep.record),
                   "turns_like": like, "target": statistics.fmean(targets.values()) if targets else None,
                   "target_from": source, "to_matched": angle_to_matched(results, cell, rep.record),
                   "kappa": headline_value(rep.record, "attn_condition_median")}, [spec.name])
    return t


def target_of(results: Results, record: RunRecord) -> tuple[dict[str, float], str]:
    """An angle arm's run's target angle per kind at the schedule's peak, and where it comes from: the
    measured run's name, or "prior" (train/angle_targets.py)."""
    train, spec = results.params.train, record.spec
    kinds = recipe_of(spec.arm).turned_kinds
    return angle_targets.targets(train, spec, run_shape(train, spec.scale), turns_like()[spec.arm], kinds)


def peak_targets(results: Results, record: RunRecord) -> dict[str, float]:
    """An angle arm's run's target angle per kind at the schedule's peak (train/angle_targets.py)."""
    return target_of(results, record)[0]


def measured(results: Results, record: RunRecord) -> bool:
    """Whether an angle arm's run turned at its matched arm's measured angle: train.angles holds its target
    in the cell, else it turned at the prior (train/angle_targets.py)."""
    return results.params.train.angles.get(record.spec.cell, {}).get(record.spec.arm) is not None


def angle_to_matched(results: Results, cell: str, record: RunRecord) -> float | None:
    """An angle arm's run's angle per step over its matched arm's (each the run the report represents the arm
    by, mean over training and kinds); None for another arm, or where either angle was not logged."""
    like = turns_like().get(record.spec.arm)
    matched = next((rep.record for rep in views.representatives(results, cell) if rep.arm == like), None)
    mine, theirs = mean_step_angle(record), mean_step_angle(matched) if matched else None
    return mine / theirs if mine is not None and theirs else None


def prior_angle_text(results: Results) -> str:
    """Where an angle arm turned at the prior, not at its matched arm's measured angle: said plainly, per
    cell, with the angle it realised against the matched arm's, and how to match it; "" where none did."""
    lines = []
    for cell in results.speedups:
        at_prior = []
        for rep in views.representatives(results, cell):
            like = turns_like().get(rep.arm)
            if like is None or rep.record is None or measured(results, rep.record):
                continue
            ratio = angle_to_matched(results, cell, rep.record)
            realised = ("its angle per step not logged" if ratio is None else
                        f"it turned x{ratio:.2g} {like}'s angle per step (mean over training and kinds)")
            at_prior.append(f"{rep.arm} at the prior, not at {like}'s measured angle: {realised}")
        if at_prior:
            lines.append(f"{cell}: {'; '.join(at_prior)}.")
    if not lines:
        return ""
    return ("**The angle arms did not turn at the matched angle.** " + " ".join(lines) + " An angle arm "
            "tests the effective-learning-rate account only at its matched arm's angle, so the angle "
            "square's readings here rest on the prior (train/angle_targets.py), not on the account. Measure "
            "the angles with `ngptlab plan --match-angles` once gpt's and ngpt's runs are in, and train the "
            "angle arms again (docs/pipeline/grow.md); a grid that pays for its runs sets "
            "`train.protocol.match_angles: true`, so they train once, at the measured angle.")


def target_curve(results: Results, record: RunRecord, peak: float, tokens: list[float]) -> list[float]:
    """The target angle the run's rotational step turned by, averaged as its metrics rows average the
    realised one: at each row, the peak times the schedule's factor, over the steps since the row before
    that measured their angle (train.step_angle_every; observe/step_angle.py)."""
    train, spec = results.params.train, record.spec
    schedule, batch = schedules.for_run(train, spec), tokens_per_step(train, spec.context)
    every = max(train.step_angle_every, 1)
    out, previous = [], 0
    for t in tokens:
        step = round(t / batch)
        measured = [s for s in range(previous, step) if (s + 1) % every == 0] or [max(step - 1, 0)]
        out.append(peak * statistics.fmean(schedule.factor(s) for s in measured))
        previous = step
    return out


def angle_figure(results: Results, cell: str) -> Figure | None:
    """Per matrix kind, the angle each arm of the angle square turned per step over training, the angle
    arms' targets dashed; None where no angle arm logged its angle."""
    reps = [rep for rep in views.representatives(results, cell) if rep.arm in ANGLE.arms
            and rep.record is not None and rep.record.observed.get("step_angle")]
    if not any(rep.arm in turns_like() for rep in reps):
        return None
    logged = {k for rep in reps for _, angles in rep.record.observed["step_angle"] for k in angles}
    kinds = [k for k in MATRIX_KINDS if k in logged]
    by_arm = {rep.arm: rep for rep in reps}
    peaks = {rep.arm: peak_targets(results, rep.record) for rep in reps if rep.arm in turns_like()}
    with plot.panels(len(kinds), 3, width=3.6, height=2.5) as (fig, axes):
        for ax, kind in zip(axes, kinds, strict=True):
            for rep in (by_arm[arm] for arm in plot.drawing_order(by_arm)):
                shown = [(t, a[kind]) for t, a in rep.record.observed["step_angle"] if a.get(kind, 0) > 0]
                if not shown:
                    continue
                tokens, angles = zip(*shown, strict=True)
                ax.plot(tokens, angles, color=plot.arm_color(rep.arm), marker=plot.arm_marker(rep.arm),
                        ms=3, lw=1, zorder=plot.arm_zorder(rep.arm))
                peak = peaks.get(rep.arm, {}).get(kind)
                if peak is not None:
                    ax.plot(tokens, target_curve(results, rep.record, peak, list(tokens)),
                            color=plot.arm_color(rep.arm), ls="--", lw=1)
            ax.set_title(kind)
            if ax.get_lines():
                plot.tokens_axis(ax)
                plot.log_axis(ax)
            else:
                plot.empty(ax, "not logged")
            ax.set_xlabel("training tokens")
            ax.set_ylabel("rad / step")
        plot.legend(fig, [*(plot.arm_handle(rep.arm) for rep in reps),
                          plot.key_line("target θ(t) of the angle arm", ls="--")])
        svg = plot.save(fig)
    caption = ("Per matrix kind, against tokens, the angle each arm of the angle square turned its matrices "
               "per optimizer step (each point the mean since the point before; observe/step_angle.py), for "
               "the run the report represents the arm by. Dashed: an angle arm's target, the matched arm's "
               "peak angle times the learning-rate schedule's factor (train/angle_targets.py), averaged "
               "alike; with the rotational step's running average the realised angle settles onto it over "
               "the first steps.")
    return Figure(f"angles_{cell}", f"The angle per step, realised and target, {cell}", caption, svg,
                  [rep.record.name for rep in reps])


def separation_table(results: Results) -> Table:
    """Whether each angle arm keeps its architecture's conditioning (speedup/separation.py)."""
    cols = ["cell", "arm", "own", "tokens", "to_own", "to_other", "margin", "verdict", "square"]
    interval = levelled(fmt_levels(e[key].get("level") for d in results.speedups.values() if d
                                   for e in ((d.separation or {}).get("arms") or {}).values()
                                   for key in ("to_own", "to_other")), "interval")
    t = Table("separation", "Can the angle square separate the accounts? Each angle arm's conditioning",
              cols, key=["cell", "arm"],
              headers={"own": "its architecture", "tokens": "κ read at (tokens)",
                       "to_own": f"κ heads vs its architecture's [{interval}]",
                       "to_other": f"κ heads vs the other's [{interval}]", "margin": "margin",
                       "square": "the square"},
              formats={**dict.fromkeys(cols, fmt_text), "tokens": lambda x: fmt_num(x, 3),
                       "margin": lambda x: fmt_num(x, 3)},
              note="κ heads: the median of the layer 3-4 Q and K head condition numbers, every arm's read at "
                   "the cell's common token count (the fewest tokens among the last measurements of the runs "
                   "entering the estimate), as a ratio paired by seed with its t-interval. An arm keeps its "
                   "architecture's conditioning when the ratio to its own lies within the margin and gpt's "
                   "and ngpt's are shown further apart than it; it drifted when the ratio to the other's "
                   "does.")
    for cell, doc in results.speedups.items():
        found = doc.separation if doc else None
        for arm, e in (found or {}).get("arms", {}).items():
            t.add({"cell": cell, "arm": arm, "own": e["own"], "tokens": found["kappa_tokens"],
                   "to_own": ratio_text(e["to_own"]), "to_other": ratio_text(e["to_other"]),
                   "margin": e["margin"], "verdict": e["verdict"], "square": found["verdict"]},
                  arm_runs(doc, arm) + arm_runs(doc, e["own"]) + arm_runs(doc, e["other"]))
    return t


SOURCES = {"measured": "from the arms' measured mechanisms", "construction": "by construction",
           "labels": "by the arms' labels: no line fitted over measured mechanisms"}


def readings_text(results: Results) -> str:
    """Per cell, each account's reading in the speed-up file's words, with its source."""
    lines = []
    for cell, doc in results.speedups.items():
        if doc and doc.reading and doc.reading.accounts:
            named = "; ".join(f"the {name} account: {short(a['reading'])}"
                              + (f" ({SOURCES.get(a['source'], a['source'])})" if a.get("source") else "")
                              for name, a in doc.reading.accounts.items())
            lines.append(f"{cell}: {named}.")
    return " ".join(lines)


def section(doc: Document, results: Results) -> None:
    """The section, where some speed-up file reads the accounts (files from before that have none)."""
    if not any(d and d.reading and d.reading.accounts for d in results.speedups.values()):
        return
    doc.add(Heading("Which account: conditioning or the effective learning rate", "which-account"))
    doc.add(Text(
        "Three accounts of nGPT's speed-up. An account is a claim about a mechanism, so the conditioning "
        "account and the effective-learning-rate account are read from each arm's measured mechanism, its "
        "kappa and its angle per step (the next section's lines), wherever the cell fits them; only where it "
        "cannot (runs from before kappa and the angle were logged) from the arms' labels, their predicted "
        "pattern: conditioning, gpt-orth (conditioning fixed) as fast as ngpt and gpt-rownorm (norms fixed) "
        "as slow as gpt; the effective learning rate, gpt-angle (gpt's architecture turned at ngpt's "
        "per-step angle) as fast as ngpt and ngpt-angle (ngpt turned at gpt's angle) as slow as gpt. The "
        "norm account, the conditioning pattern's mirror, is read by its pattern: fixed norms are set by "
        "construction, so an arm's label is its measurement. Same learning rate is not same angle: at one "
        "nominal learning rate an nGPT matrix turns several times further per step than AdamW's "
        "equilibrium angle (Kosson et al., arXiv 2305.17212), so only arms that set the angle can "
        "separate the accounts."))
    squares, angles = squares_table(results), angles_table(results)
    too_small = views.too_small(results)  # as the settle-it section: the measurements shown, nothing read
    text = ("None, by design: the grid's largest budget is below report.min_budget_for_claims."
            if too_small else readings_text(results))
    if text:
        doc.add(Text("**Readings.** " + text))
    at_prior = prior_angle_text(results)
    if at_prior:
        doc.add(Text(at_prior))
    for table in (squares, None if too_small else accounts_table(results), angles, separation_table(results)):
        if table is not None and len(table):
            doc.add(TableBlock(table))
    for cell in results.speedups:
        figure = angle_figure(results, cell)
        if figure is not None:
            doc.add(FigureBlock(figure))
