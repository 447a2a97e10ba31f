"""The section "The speed-up": how many fewer tokens each arm needs to reach the baseline's loss, how sure
that is over seeds, and how much it leans on the learning-rate grid.

Everything here reads results/speedup/<cell>.json as the speed-up stage wrote it (ngptlab.speedup:
estimator, inference, interpolate). Read top to bottom:

  speedup_table       every (cell, arm): the geometric mean over seeds with its t-interval on ln S, the
                      seeds behind it, the verdict against the baseline, the within-run estimate, whether the
                      learning rate was tuned, an angle arm's speed-up at its tuned multiplier (secondary: its
                      primary is at multiplier 1), the paper's number; one table per baseline of
                      speedup.baseline
  target_table        the loss every speed-up is measured against, per cell and seed
  speedup_pivot       cells x arms, beside the paper's nGPT factor (one per baseline, like speedup_table)
  per_seed_table      S and ln S per (cell, arm, seed): the interval can be recomputed from it by hand
  divergence_table    per (cell, arm): diverged held-out seeds / held-out seeds with the exact interval, and
                      the seeds left out of the estimate for it (speedup/divergence.py)
  minima_table        per (cell, arm, budget): the grid's best learning rate and loss beside the vertex of a
                      parabola in ln(lr) through it and its neighbours
  interpolated_table  per (cell, arm): the speed-up on the grid and interpolated, flagged where the two differ
                      by more than the seed noise
  section             the section: its text, then those tables in that order
"""

from __future__ import annotations

import math

from ngptlab import paper
from ngptlab.design.gaps import policy_gaps
from ngptlab.models.arms import turns_like
from ngptlab.report.kit import views
from ngptlab.report.kit.document import Callout, Document, Heading, TableBlock, Text
from ngptlab.report.kit.load import Results
from ngptlab.report.kit.speedups import (
    BUDGETS_SPAN,
    ONE_SEED,
    arm_runs,
    bracket,
    budgets_span_text,
    min_seeds,
    speedup_level,
    speedup_text,
)
from ngptlab.report.kit.table import (
    MISSING,
    Table,
    fmt_int,
    fmt_levels,
    fmt_loss,
    fmt_lr,
    fmt_num,
    fmt_text,
    levelled,
)
from ngptlab.speedup.arm_records import Interpolated, Speedup, Target, seed_counts
from ngptlab.speedup.crossing import reference_tokens
from ngptlab.speedup.document import SpeedupDocument
from ngptlab.speedup.inference import SIZE_KEYS
from ngptlab.speedup.lr_policy import estimand


def interval_how(results: Results) -> str:
    """How an arm's interval over seeds is made, at the level the files state."""
    return (f"{levelled(speedup_level(results), 't-interval')} on ln S over seeds (where some seeds are "
            "bounds, the censored-normal profile likelihood's, calibrated to it: the entry names it); the "
            "value is the geometric mean")


def fmt_log(x: float | None) -> str:
    """A log ratio to four decimals with its sign, so a hand computation can start from it."""
    return MISSING if x is None else f"{x:+.4f}"


def bootstrap_text(s: Speedup) -> str | None:
    return bracket(s.bootstrap_interval) if s.bootstrap_interval else None


def tuned_text(doc: SpeedupDocument, arm: str) -> str | None:
    """'yes' when every best learning rate of the arm is inside its sweep, else where it sits on an edge
    (speedup/tuning.py); None for a speed-up file without tuning (older files)."""
    if doc.tuning is None:
        return None
    edges = [e for e in doc.tuning if e.arm == arm]
    at_edge = [e for e in edges if e.edge in ("top", "bottom")]
    if at_edge:
        where = ", ".join(f"{e.edge}{' of its pruned window' if e.pruned else ''} at {e.budget:,}"
                          for e in at_edge)
        return f"no: best lr at the sweep's {where} (extend: ngptlab plan --extend-sweeps)"
    if any(e.edge is not None for e in edges):
        return "unknown: " + ", ".join(sorted({e.edge for e in edges if e.edge is not None}))
    return "yes"


def multiplier_text(doc: SpeedupDocument, arm: str) -> str | None:
    """An angle arm's secondary estimate, e.g. 'x2 (lr 0.004): 1.9 (one seed: no interval), swept seeds'; None
    for the other arms (their speed-up is already at the learning rate the policy tunes)."""
    entry = doc.arms[arm].tuned_multiplier
    if entry is None:
        return None
    if entry.lr is None or entry.speedup is None:
        return "none (the policy chose no learning rate over its sweep)"
    times = MISSING if entry.multiplier is None else f"x{entry.multiplier:g}"
    return f"{times} (lr {fmt_lr(entry.lr)}): {speedup_text(entry.speedup)}, swept seeds (optimistic)"


# ----------------------------------------------------------------------------------------------------------
# The speed-up per arm


def named_baseline(results: Results, baseline: str | None) -> tuple[str, str, str]:
    """(baseline, suffix of its tables' ids, words for their titles), the primary baseline by default: with
    one baseline the plain ids and titles, with several each table says which baseline it is against."""
    named = results.params.speedup.baselines
    baseline = baseline or named[0]
    suffix = "" if baseline == named[0] else f"_{baseline}"
    return baseline, suffix, f"against {baseline}" if len(named) > 1 else ""


def speedup_table(results: Results, baseline: str | None = None) -> Table:
    """The speed-up of every (cell, arm) against `baseline` (of speedup.baseline; default: the primary)."""
    baseline, suffix, words = named_baseline(results, baseline)
    cols = ["cell", "scale", "context", "arm", "speedup", "bound", "interval_lo", "interval_hi", "level",
            "n_seeds", "method", "log_mean", "log_sd", "bootstrap_lo", "bootstrap_hi", "verdict",
            *SIZE_KEYS, "display", "bootstrap_display", "cheap_display", "tuned", "tuned_multiplier", "paper",
            "paper_where", "note"]
    docs = {cell: doc and doc.against(baseline) for cell, doc in results.speedups.items()}
    summaries = [entry.speedup for d in docs.values() if d for entry in d.arms.values()]
    has_bootstrap = any(s.bootstrap_interval for s in summaries)
    has_angle_arms = any(entry.tuned_multiplier for d in docs.values() if d for entry in d.arms.values())
    least = min_seeds(results)
    title = (f"Speed-up {words} (tokens {baseline} needs / tokens the arm needs)" if words else
             "Speed-up over the baseline (tokens the baseline needs / tokens the arm needs)")
    bootstrap_level = fmt_levels(d.bootstrap_level for d in docs.values() if d)
    t = Table(f"speedup{suffix}", title, cols, key=["cell", "arm"],
              headers={"display": f"speed-up [{levelled(speedup_level(results), 'interval')}]",
                       "n_seeds": "seeds",
                       "bootstrap_display": f"bootstrap {levelled(bootstrap_level, 'interval')}",
                       "verdict": "against the baseline",
                       "cheap_display": "within-run estimate", "tuned": "lr tuned (best inside its sweep)",
                       "tuned_multiplier": "angle arm at its tuned multiplier",
                       "paper": "paper (nGPT)", "paper_where": "paper source"},
              formats={c: fmt_text for c in ("cell", "scale", "arm", "method", "verdict", "display",
                                             "bootstrap_display", "cheap_display", "tuned",
                                             "tuned_multiplier", "paper", "paper_where", "note", "bound")}
              | {"context": fmt_int, "n_seeds": fmt_int} | dict.fromkeys(SIZE_KEYS, fmt_int),
              shown=["cell", "arm", "display", "n_seeds", *(["bootstrap_display"] if has_bootstrap else []),
                     "verdict", *([] if suffix else ["cheap_display"]), "tuned",
                     *(["tuned_multiplier"] if has_angle_arms and not suffix else []), "paper", "note"],
              note=f"{interval_how(results)}: exp(mean ± t·sd/√n) of the seeds' ln S, with the t quantile "
                   f"at n − 1 degrees of freedom (the numbers: [Table: per seed](#table-speedup_per_seed)); "
                   f"{ONE_SEED}. A bound (`>`/`<`) has no interval either. A percentile bootstrap of mean "
                   f"ln S is shown only with at least {least} seeds (bootstrap.min_seeds): with fewer, too "
                   "few distinct resamples exist for its percentiles to mean anything"
                   + ("." if has_bootstrap else "; no arm here has that many.")
                   + " Every seed is estimated at the learning rate chosen on train.seeds' sweep "
                     "(speedup.lr_policy: the estimand above), the speed-up over the held-out seeds where "
                     "there are "
                     "two or more (the choosing seeds' optimism: selection_bias in "
                     "results/speedup/<cell>.json)."
                   + (" An angle arm is estimated at multiplier 1, the learning rate at which its angle per "
                      "step is its matched arm's (the manipulation the effective-learning-rate account "
                      "names); the multiplier the policy tunes over its sweep (x0.5, x1, x2) is a secondary "
                      "estimate on the swept seeds alone, optimistic by the winner's curse."
                      if has_angle_arms else "")
                   + " Against the baseline: the verdict rule of the [settle-it section](#settle-it).")
    for cell, doc in docs.items():
        records = results.compared_runs(cell)  # the runs a speed-up rests on
        if doc is None:
            t.add({"cell": cell, "scale": records[0].spec.scale, "context": records[0].spec.context,
                   "display": "missing",
                   "note": "no results/speedup file: some run of this cell has not finished"},
                  [r.name for r in records if r.summary])
            continue
        ref = paper.paper_speedup(doc.context)
        for arm in [baseline, *(a for a in views.arms(results) if a != baseline)]:
            entry = doc.arms.get(arm)
            if entry is None:
                continue
            s = entry.speedup
            interval, boot = s.interval or (None, None), s.bootstrap_interval or (None, None)
            is_ngpt, is_baseline = arm == "ngpt" and ref is not None, arm == doc.baseline
            t.add({"cell": cell, "scale": doc.scale, "context": doc.context, "arm": arm,
                   "speedup": s.value, "bound": s.bound, "interval_lo": interval[0],
                   "interval_hi": interval[1], "level": s.level, "n_seeds": s.n_seeds, "method": s.method,
                   "log_mean": s.log_mean, "log_sd": s.log_sd, "bootstrap_lo": boot[0],
                   "bootstrap_hi": boot[1],
                   "verdict": s.verdict, **seed_counts(s.seeds_needed),
                   "display": "1 (baseline)" if is_baseline else speedup_text(s),
                   "bootstrap_display": None if is_baseline else bootstrap_text(s),
                   "cheap_display": None if is_baseline or entry.cheap is None else speedup_text(entry.cheap),
                   "tuned": tuned_text(doc, arm),
                   "tuned_multiplier": multiplier_text(doc, arm),
                   "paper": f"~{ref['factor']}x" if is_ngpt else None,
                   "paper_where": paper.where(ref) if is_ngpt else None,
                   "note": s.note}, arm_runs(doc, arm))
    return t


def moved_targets(doc: SpeedupDocument | None) -> list[Target]:
    """The targets (one per seed) not at the reference budget: the baseline's runs there diverged."""
    return [t for t in (doc.targets if doc else ()) if t.note]


def target_table(results: Results) -> Table:
    """The loss every speed-up is measured against: per cell and seed, its value, arm, reference budget
    and the runs it comes from."""
    cols = ["cell", "seed", "loss", "arm", "reference", "reference_budget", "interpolated", "budgets", "lrs",
            "measurable", "note"]
    t = Table("speedup_target", "The speed-up target: the baseline's loss at the reference budget", cols,
              key=["cell", "seed"],
              headers={"loss": "target loss", "reference_budget": "reference budget",
                       "budgets": "from its runs at", "lrs": "their lr",
                       "measurable": BUDGETS_SPAN},
              formats={"cell": fmt_text, "seed": fmt_int, "loss": fmt_loss, "arm": fmt_text,
                       "reference": fmt_text, "reference_budget": fmt_int, "interpolated": fmt_text,
                       "budgets": fmt_text, "lrs": fmt_text, "measurable": fmt_text, "note": fmt_text},
              shown=["cell", "seed", "loss", "arm", "reference", "reference_budget", "budgets", "lrs",
                     "measurable", "note"],
              note="The target is the baseline's loss at the reference budget N (speedup.reference_budget): "
                   "its best loss there, or between two budgets interpolated along the law the estimator "
                   "fits between budgets, so that the baseline's own speed-up is 1. The budgets' span = N / "
                   "largest budget to N / smallest budget: the speed-ups the budgets run can give as "
                   "numbers; outside it only a bound exists. It is what the grid can express, not what the "
                   "design reads right: near its ends a speed-up rests on one budget or becomes a bound, and "
                   "the range the design reads (`ngptlab design --resolution`) is narrower.")
    for cell, doc in results.speedups.items():
        for target in doc.targets if doc else ():
            runs = target.runs
            t.add({"cell": cell, "seed": target.seed, "loss": target.loss, "arm": target.arm,
                   "reference": target.reference, "reference_budget": target.reference_budget,
                   "interpolated": "yes" if target.interpolated else "no",
                   "budgets": ", ".join(f"{r.budget:,}" for r in runs),
                   "lrs": ", ".join(fmt_lr(r.lr) for r in runs),
                   "measurable": " to ".join(fmt_num(x) for x in target.measurable),
                   "note": target.note}, [r.run for r in runs])
    return t


def speedup_pivot(results: Results, long: Table, baseline: str | None = None) -> Table:
    """Cells x arms, with the budgets' span (the speed-ups the cell can give as numbers) and the paper's nGPT
    factor beside;
    `long` is speedup_table(results, baseline)."""
    baseline, suffix, words = named_baseline(results, baseline)
    arm_list = [a for a in views.arms(results) if a != baseline]
    cols = ["cell", *arm_list, "measurable", "paper_ngpt"]
    title = "Speed-up per cell beside the paper's" + (f", {words}" if words else "")
    t = Table(f"speedup_by_cell{suffix}", title, cols, key=["cell"],
              headers={"paper_ngpt": "paper: nGPT", "measurable": BUDGETS_SPAN},
              formats={c: fmt_text for c in cols})
    for cell in results.cells:
        rows = [(row, runs) for row, runs in zip(long.rows, long.runs, strict=True)
                if row[long.columns.index("cell")] == cell]
        values: dict = {"cell": cell}
        runs_all: list[str] = []
        for row, runs in rows:
            arm = row[long.columns.index("arm")]
            if arm in arm_list:
                values[arm] = row[long.columns.index("display")]
                runs_all += runs
        if rows and rows[0][0][long.columns.index("arm")] is None:
            values.update({a: "missing" for a in arm_list})
        spec = results.cell_runs(cell)[0].spec
        ref = paper.paper_speedup(spec.context)
        doc = results.speedups.get(cell)
        values["measurable"] = budgets_span_text(doc and doc.against(baseline))
        values["paper_ngpt"] = (f"~{ref['factor']}x at {ref['context']:,} ({'/'.join(ref['scales'])})" if ref
                                else f"none at context {spec.context:,}")
        t.add(values, runs_all)
    return t


# ----------------------------------------------------------------------------------------------------------
# Seed by seed


def per_seed_table(results: Results) -> Table:
    """S and ln S of every seed of every arm but the baseline (whose S is 1 by construction)."""
    cols = ["cell", "arm", "seed", "speedup", "bound", "log_speedup", "tokens_to_target", "display"]
    t = Table("speedup_per_seed", "The speed-up of every seed", cols, key=["cell", "arm", "seed"],
              headers={"log_speedup": "ln S", "tokens_to_target": "tokens to target", "display": "S"},
              formats={"cell": fmt_text, "arm": fmt_text, "seed": fmt_int, "bound": fmt_text,
                       "log_speedup": fmt_log, "tokens_to_target": fmt_int, "display": fmt_text},
              shown=["cell", "arm", "seed", "display", "log_speedup", "tokens_to_target"],
              note="The speed-up table's interval from these: over an arm's n seeds, mean m and sample sd s "
                   "of ln S; interval = exp(m ± t·s/√n), t the 97.5% quantile of Student's t with n − 1 "
                   "degrees of freedom (12.71 at n = 2, 4.30 at 3, 3.18 at 4); value = exp(m). Seed s of "
                   "every arm saw the same batches. A bound's ln S is that of its bound value; an arm with "
                   "bounds among its seeds takes them into the censored-normal likelihood instead "
                   "(speedup/censored.py), whose interval is not computed by this formula.")
    for cell, doc in results.speedups.items():
        if doc is None:
            continue
        for arm in views.arms(results):
            entry = doc.arms.get(arm)
            if entry is None or arm == doc.baseline:
                continue
            for p in entry.per_seed:
                value = p.speedup.value
                t.add({"cell": cell, "arm": arm, "seed": p.seed, "speedup": value, "bound": p.speedup.bound,
                       "log_speedup": None if value is None or value <= 0 else math.log(value),
                       "tokens_to_target": p.tokens_to_target.value, "display": p.speedup.display},
                      arm_runs(doc, arm, {p.seed}))
    return t


# ----------------------------------------------------------------------------------------------------------
# Between the grid's learning rates


def _sweep_runs(doc: SpeedupDocument, arm: str, budget: int, seeds: tuple[int, ...]) -> list[str]:
    """The runs of one (arm, budget) sweep at its swept seeds: the points the parabola was drawn through."""
    return [r.run for r in doc.runs if r.arm == arm and r.budget == budget and r.seed in seeds]


def minima_table(results: Results) -> Table:
    cols = ["cell", "arm", "budget", "seeds", "lr_grid", "lr_best", "loss_best", "lr_vertex", "loss_vertex",
            "correction", "status"]
    t = Table("speedup_minima", "The best loss between the grid's learning rates", cols,
              key=["cell", "arm", "budget"],
              headers={"seeds": "swept seeds", "lr_grid": "learning rates", "lr_best": "grid best lr",
                       "loss_best": "grid best loss", "lr_vertex": "vertex lr", "loss_vertex": "vertex loss",
                       "correction": "correction"},
              formats={"cell": fmt_text, "arm": fmt_text, "budget": fmt_int, "seeds": fmt_text,
                       "lr_grid": fmt_text, "lr_best": fmt_lr, "loss_best": fmt_loss, "lr_vertex": fmt_lr,
                       "loss_vertex": fmt_loss, "correction": fmt_log, "status": fmt_text},
              note="Losses are means over the swept seeds (those that ran the (arm, budget) at more than one "
                   "learning rate). The vertex is that of the parabola in ln(lr) through the grid's best "
                   "learning rate and its two neighbours; correction = vertex loss − grid best loss (≤ 0), "
                   "added to every seed's best loss at that (arm, budget) before the speed-up is recomputed. "
                   "No vertex where the best is at an edge of the sweep, a neighbour is missing or the three "
                   "points have no upward curvature: the status says which (speedup/interpolate.py).")
    for cell, doc in results.speedups.items():
        for arm in views.arms(results):
            entry = interpolated(doc, arm)
            for m in entry.per_budget if entry else ():
                grid = m.lr_grid
                best = m.loss_grid[grid.index(m.lr_best)] if m.lr_best in grid else None
                t.add({"cell": cell, "arm": arm, "budget": m.budget,
                       "seeds": ", ".join(map(str, m.seeds)) or None,
                       "lr_grid": ", ".join(fmt_lr(x) for x in grid) or None, "lr_best": m.lr_best,
                       "loss_best": best, "lr_vertex": m.lr_vertex, "loss_vertex": m.loss_vertex,
                       "correction": m.correction, "status": m.status},
                      _sweep_runs(doc, arm, m.budget, m.seeds))
    return t


def interpolated(doc: SpeedupDocument | None, arm: str) -> Interpolated | None:
    """The arm's speed-up between the grid's learning rates; None without a document, the arm, or the
    estimate (a speed-up file from an older stage)."""
    entry = doc.arms.get(arm) if doc else None
    return entry.interpolated if entry else None


def differs_text(entry: Interpolated) -> str:
    """The flag of the interpolated table: whether interpolation moves ln S by more than the seed noise."""
    if entry.differs is not None:
        return "differs: more than the seed noise" if entry.differs else "within the seed noise"
    if entry.log_difference is None:
        return "no point estimate to compare"
    return "seed noise not measured (one seed)"


def interpolated_table(results: Results) -> Table:
    cols = ["cell", "arm", "grid_speedup", "interpolated_speedup", "grid_display", "interpolated_display",
            "log_difference", "seed_noise_log", "differs", "flag", "note"]
    t = Table("speedup_interpolated", "The speed-up on the grid and between its learning rates", cols,
              key=["cell", "arm"],
              headers={"grid_display": "on the grid", "interpolated_display": "interpolated",
                       "log_difference": "Δ mean ln S", "seed_noise_log": "seed sd of ln S",
                       "flag": "difference"},
              formats={"cell": fmt_text, "arm": fmt_text, "grid_display": fmt_text,
                       "interpolated_display": fmt_text, "log_difference": fmt_log, "seed_noise_log": fmt_num,
                       "flag": fmt_text, "note": fmt_text},
              shown=["cell", "arm", "grid_display", "interpolated_display", "log_difference",
                     "seed_noise_log", "flag", "note"],
              note=f"Both columns: {interval_how(results)}. Interpolated: every (arm, budget)'s best "
                   "loss, the target's included, moved to the vertex of the table above. Δ mean ln S = "
                   "interpolated minus grid; it differs when larger in size than the seeds' sd of ln S on "
                   "the grid.")
    for cell, doc in results.speedups.items():
        for arm in views.arms(results):
            entry = interpolated(doc, arm)
            if entry is None or arm == doc.baseline:
                continue
            grid = doc.arms[arm].speedup
            runs = [r.run for r in doc.runs if r.arm in (arm, doc.baseline)]
            t.add({"cell": cell, "arm": arm, "grid_speedup": grid.value,
                   "interpolated_speedup": entry.speedup.value,
                   "grid_display": speedup_text(grid), "interpolated_display": speedup_text(entry.speedup),
                   "log_difference": entry.log_difference, "seed_noise_log": entry.seed_noise_log,
                   "differs": entry.differs, "flag": differs_text(entry), "note": entry.note}, runs)
    return t


def interpolation_sentence(table: Table) -> str:
    """One sentence naming the arms whose speed-up moves by more than the seed noise when interpolated."""
    col = table.columns.index
    flagged = [f"{r[col('cell')]} {r[col('arm')]}" for r in table.rows if r[col("differs")] is True]
    unmeasured = [r for r in table.rows if r[col("differs")] is None]
    if flagged:
        text = ("Interpolating between learning rates moves the speed-up by more than the seed noise for "
                + ", ".join(f"`{f}`" for f in flagged) + ": the grid's spacing matters there")
    else:
        text = "Interpolating between learning rates moves no arm's speed-up by more than the seed noise"
    if unmeasured:
        text += f" ({len(unmeasured)} of {len(table)} without a measured seed noise or estimate)"
    return text + "."


def divergence_table(results: Results) -> Table:
    """Divergence as an outcome of each arm: its diverged held-out seeds over its held-out seeds, with the
    exact (Clopper-Pearson) interval, and the seeds its estimate left out (its own or the baseline's)."""
    cols = ["cell", "arm", "diverged", "seeds", "rate", "interval", "left_out"]
    level = fmt_levels(e.divergence.level for d in results.speedups.values() if d for e in d.arms.values()
                       if e.divergence is not None)
    t = Table("speedup_divergence", "Divergence of the held-out seeds", cols, key=["cell", "arm"],
              headers={"diverged": "diverged seeds", "seeds": "held-out seeds", "rate": "rate",
                       "interval": f"{level + ' ' if level else ''}interval (Clopper-Pearson)",
                       "left_out": "left out of the estimate"},
              formats={"cell": fmt_text, "arm": fmt_text, "diverged": fmt_int, "seeds": fmt_int,
                       "rate": fmt_num, "interval": fmt_text, "left_out": fmt_text},
              note="A held-out seed whose run at the chosen learning rate diverged (or whose baseline run "
                   "did: no target) is left out of the arm's speed-up, and `ngptlab plan --add-seeds` "
                   "plans a replacement seed at the same learning rate; the rate counts the arm's own "
                   "diverged seeds, so an arm that diverges often shows it.")
    for cell, doc in results.speedups.items():
        if doc is None:
            continue
        for arm in views.arms(results):
            entry = doc.arms.get(arm)
            if entry is None or entry.divergence is None:
                continue
            d = entry.divergence
            t.add({"cell": cell, "arm": arm, "diverged": d.diverged, "seeds": d.seeds, "rate": d.rate,
                   "interval": bracket(d.interval) if d.interval else None,
                   "left_out": "; ".join(f"seed {r.seed}: {r.reason}" for r in entry.replaced) or None})
    return t


# ----------------------------------------------------------------------------------------------------------
# The section


def estimand_text(results: Results) -> str:
    """The estimand in one sentence (speedup.lr_policy), and what that policy costs on a planted law."""
    params = results.params
    n_tokens = reference_tokens(params.speedup.reference_budget, params.train.budgets)
    angle_arms = any(arm in turns_like() for arm in params.train.arms)
    said = estimand(params.speedup.lr_policy, params.speedup.baselines[0], n_tokens, angle_arms)
    words = f"Estimand: {said}."
    gaps = policy_gaps(params)
    if not gaps:
        return words
    shown = "; ".join(f"{'n/a (a bound)' if g['gap'] is None else format(g['gap'], '+.3f')} at ngpt "
                      f"x{g['ngpt']:g} ({g['cell']})" for g in gaps)
    return (f"{words} What this learning-rate policy and grid cost before any seed noise: ngpt's estimated "
            f"ln S minus the planted one in a noise-free world of `ngptlab design`'s loss model, whose "
            f"optimal learning rate falls as runs get longer (illustrative parameters, design/gaps.py): "
            f"{shown}. `ngptlab design --compare-policies` sets this beside the other policies.")


def section(doc: Document, results: Results, long: Table) -> None:
    """The speed-up section; `long` is speedup_table(results), which the summary and caveats read too."""
    doc.add(Heading("The speed-up", "speedup"))
    doc.add(Text(estimand_text(results)))
    method = next((d.method for d in results.speedups.values() if d), None)
    doc.add(Text(
        "The paper's measure: how many fewer tokens an arm needs to reach the baseline's final validation "
        f"loss. Method (ngptlab.speedup): {method or 'see ngptlab.speedup.estimator'}. A value with `>` or "
        "`<` is a bound (the arm never reached the target within the grid, or beat it already at the "
        "smallest budget): never an extrapolation. The within-run estimate reads the same target off one "
        "run's own validation curve; mid-schedule losses are not annealed, so it is biased toward smaller "
        "speed-ups and is shown only beside the main estimate."))
    doc.add(Text(
        "Over seeds (seed s of every arm saw the same batches) each speed-up S is combined on the log "
        "scale: the value is the geometric mean exp(mean ln S), with a "
        f"{levelled(speedup_level(results), 't-interval')} on ln S over seeds, "
        "exponentiated; where some seeds are bounds they enter a censored-normal likelihood whose profile "
        "interval is calibrated to equal the t-interval without censoring (the entry names the method); "
        f"{ONE_SEED}. A percentile bootstrap interval is given only with at least "
        f"{min_seeds(results)} seeds."))
    for cell, cell_doc in results.speedups.items():
        for target in moved_targets(cell_doc):
            doc.add(Callout(f"{cell}, seed {target.seed}: {target.note}. Its speed-ups measure "
                            "against a different baseline loss.", kind="note"))
    doc.add(TableBlock(speedup_pivot(results, long)), TableBlock(target_table(results)), TableBlock(long))
    for baseline in results.params.speedup.baselines[1:]:
        further = speedup_table(results, baseline)
        doc.add(TableBlock(speedup_pivot(results, further, baseline)), TableBlock(further))

    doc.add(Heading("Seed by seed", "speedup-per-seed", level=3))
    seeds = per_seed_table(results)
    doc.add(TableBlock(seeds) if len(seeds) else Text("No speed-up file yet: no seed to show."))
    diverged = divergence_table(results)
    if len(diverged):
        doc.add(TableBlock(diverged))

    doc.add(Heading("Between the grid's learning rates", "speedup-interpolated", level=3))
    doc.add(Text(
        "Each arm's best loss is the best over a grid of learning rates, which can miss the arm's optimum "
        "by up to half a grid step; arms that fall differently on the grid then have their speed-ups "
        "shifted. Near its optimum the final loss is close to a parabola in ln(lr), so the speed-up is "
        "recomputed from the parabola's minimum through the best grid point and its neighbours."))
    minima, both = minima_table(results), interpolated_table(results)
    if not len(both):
        doc.add(Text("No speed-up file has an interpolated estimate (written by an older speed-up stage)."))
        return
    if len(minima):
        doc.add(TableBlock(minima))
    doc.add(TableBlock(both), Text(interpolation_sentence(both)))
