"""The section "Settle it": is conditioning why nGPT trains faster?

The 2x2 arms break the paper's correlation: gpt-rownorm fixes the weight norms and leaves conditioning free,
gpt-orth fixes conditioning and leaves the norms free. Every verdict here is the speed-up stage's
(speedup/inference.py, speedup/equivalence.py), read from results/speedup/<cell>.json, never re-derived:
against the baseline from the t-interval of mean ln S at the file's level; between arms and for the
factorial effects by the symmetric rule (a difference, like an equivalence, must clear the margin). The
reading of the account is the JSON's (speedup/reading.py), per cell and again after Holm's adjustment
across cells (speedup/across_cells.py). The evidence beside it, each arm's speed-up against its
conditioning and its effective learning rate (the figure, the per-arm table, the rank correlations), is
settle_evidence.py's.
Read top to bottom:

  comparisons_table   each probe arm against the baseline, with the seeds a 1.5x difference would need
  contrasts_table     the paired contrasts: gpt-orth and gpt-rownorm against nGPT, and against each other
  factorial_table     the 2x2 as a factorial: conditioning, norm and interaction effects, per cell
  primary_table       the primary effect per cell, its reading, whether the effective learning rate
                      confounds it (speedup/rivals.py), and both after Holm across cells
  verdict_text        what the primary effect says about the conditioning account, cell by cell
  section             the section: its text, the evidence, the tables, the verdict
A grid below report.min_budget_for_claims concludes nothing, whatever the intervals say.
"""

from __future__ import annotations

from collections.abc import Mapping

from ngptlab.models.arms import arm as arm_row
from ngptlab.report.kit import views
from ngptlab.report.kit.crossarm import Analysis
from ngptlab.report.kit.document import Document, FigureBlock, Heading, TableBlock, Text
from ngptlab.report.kit.load import Results
from ngptlab.report.kit.speedups import (
    BUDGETS_SPAN,
    arm_runs,
    bracket,
    budgets_span_text,
    censored_text,
    contrast_level,
    effect_text,
    speedup_level,
    speedup_text,
)
from ngptlab.report.kit.table import Table, fmt_int, fmt_num, fmt_text, levelled
from ngptlab.report.sections.settle_evidence import (
    ANGULAR_HOW,
    SETTLE_METRICS,
    settle_figure,
    settle_table,
    tracking_table,
)
from ngptlab.speedup.across_cells import HOLM, primary_across_cells
from ngptlab.speedup.arm_records import Speedup, seed_counts
from ngptlab.speedup.document import SpeedupDocument
from ngptlab.speedup.effect_records import Contrast
from ngptlab.speedup.equivalence import CLAIMS, claim_words
from ngptlab.speedup.factorial import CODING
from ngptlab.speedup.inference import RESOLVE_RATIO, SIZE_KEYS
from ngptlab.speedup.reading import ACCOUNTS, EFFECTIVE_LR, runs_angle_square, short
from ngptlab.speedup.rivals import rule as confound_rule
from ngptlab.speedup.separation import clause as separation_clause

# The comparisons that separate the two accounts, each arm against the baseline, within a cell.
COMPARISONS = (
    ("gpt-orth", "conditioning fixed, norms free"),
    ("gpt-rownorm", "norms fixed, conditioning free"),
    ("ngpt", f"norms fixed, conditioning {arm_row('ngpt').conditioning}"),
    ("gpt-angle", "gpt turned at ngpt's per-step angle"),
    ("ngpt-angle", "ngpt turned at gpt's per-step angle"),
)
# The rule of speed-up files without verdicts (an older speed-up stage), as compare_to_baseline applies it.
OLD_RULE = ("'faster' and 'slower' only when the whole interval lies on one side of 1; a bound alone is "
            "never a verdict.")


# ----------------------------------------------------------------------------------------------------------
# The verdicts


def rule(results: Results) -> dict:
    """{verdict_rule, equivalence_margin, resolve_ratio} of the speed-up files (one params file: the same in
    every cell); verdict_rule None when no file has one (an older speed-up stage)."""
    docs = [d for d in results.speedups.values() if d and d.verdict_rule is not None]
    if not docs:
        return {"verdict_rule": None, "equivalence_margin": None, "resolve_ratio": RESOLVE_RATIO}
    return {"verdict_rule": docs[0].verdict_rule, "equivalence_margin": docs[0].equivalence_margin,
            "resolve_ratio": docs[0].resolve_ratio}


def compare_to_baseline(s: Speedup) -> str:
    """faster | slower | not distinguishable from 1, from one arm's speed-up entry, only when its interval
    lies wholly on one side of 1: the rule of speed-up files written before the speed-up stage gave
    verdicts. A bound alone, or one seed, is no verdict."""
    if s.value is None:
        return "no estimate"
    if s.bound:
        return "not resolved (a bound)"
    if not s.interval:
        return "not resolved (one seed: no interval)"
    lo, hi = s.interval
    if lo > 1:
        return "faster"
    if hi < 1:
        return "slower"
    return "not distinguishable from 1"


SIZES_HOW = ("two-sided paired t test on ln S at the interval's level, power 0.8, from the noncentral t "
             "at the sd measured over the k seeds here (df k − 1); at the sd's upper bound: the same at the "
             "one-sided 80% chi-square upper confidence bound of that sd, since a sd from few seeds "
             "understates the need often; for equivalence: two one-sided t tests at (1 − level) / 2 each "
             "side (the interval inside the margin, as the verdict reads it), power 0.8 at a true ratio of "
             "1, exact TOST power")


def size_headers(ratio: float, margin: float | None) -> dict[str, str]:
    """The headers of the three seeds-needed columns."""
    within = f" within x{margin:g}" if margin is not None else ""
    return {"seeds_needed_text": f"seeds to resolve x{ratio:g}",
            "seeds_needed_upper_text": f"seeds to resolve x{ratio:g} (sd's 80% upper bound)",
            "seeds_needed_equivalence_text": f"seeds to show equivalence{within}"}


def _seeds_needed_text(s: Speedup, key: str = "seeds_needed") -> str | None:
    needed = s.seeds_needed.get(key)
    if s.verdict is None or needed is None:
        return None  # an older speed-up file: no seed count
    return str(needed.count) if needed.count is not None else needed.note


def comparisons_table(results: Results) -> Table:
    ratio, margin = rule(results)["resolve_ratio"], rule(results)["equivalence_margin"]
    sizes = list(size_headers(ratio, margin))
    cols = ["cell", "arm", "design", "speedup_display", "verdict", *SIZE_KEYS, *sizes, "measurable"]
    interval = levelled(speedup_level(results), "interval")
    t = Table("comparisons", "The 2x2: each probe arm against the baseline", cols, key=["cell", "arm"],
              headers={"speedup_display": f"speed-up [{interval}]", "design": "what it fixes",
                       "verdict": "against the baseline",
                       "measurable": BUDGETS_SPAN}
              | size_headers(ratio, margin),
              formats={c: fmt_text for c in cols} | dict.fromkeys(SIZE_KEYS, fmt_int),
              shown=["cell", "arm", "design", "speedup_display", "verdict", *sizes, "measurable"],
              note="If conditioning is what speeds nGPT up, gpt-orth should be faster than gpt and "
                   "gpt-rownorm should not be, unless its conditioning improved too. The verdict follows the "
                   "rule stated above, from the t-interval of mean ln S against 0 (the baseline's); seeds to "
                   f"resolve x{ratio:g}: the seeds that would give 80% power to tell a x{ratio:g} speed-up "
                   f"from none ({SIZES_HOW}).")
    for cell, doc in results.speedups.items():
        if doc is None:
            continue
        for arm, design in COMPARISONS:
            entry = doc.arms.get(arm)
            if entry is None:
                continue
            s = entry.speedup
            t.add({"cell": cell, "arm": arm, "design": design, "speedup_display": speedup_text(s),
                   "verdict": s.verdict if s.verdict is not None else compare_to_baseline(s),
                   **seed_counts(s.seeds_needed),
                   **{f"{key}_text": _seeds_needed_text(s, key) for key in SIZE_KEYS},
                   "measurable": budgets_span_text(doc)}, arm_runs(doc, arm))
    return t


def contrast_seeds_text(c: Contrast, key: str = "seeds_needed") -> str | None:
    """The seeds a contrast needs (key: one of SIZE_KEYS), or why that is not known."""
    needed = c.seeds_needed.get(key)
    if needed is None:
        return None  # an older speed-up file: only seeds_needed
    if needed.count is not None:
        return str(needed.count)
    if c.log_sd is None:
        return "not measured (one seed)" if c.n_seeds == 1 else "not measured (no seed to pair)"
    return "more than a thousand"


def _ratio_text(c: Contrast) -> str:
    if c.ratio is None:
        return "n/a"
    text = fmt_num(c.ratio)
    if c.interval:
        return f"{text} {bracket(c.interval)}{censored_text(c)}"
    return f"{text} (no interval)"


def contrasts_table(results: Results) -> Table:
    ratio, margin = rule(results)["resolve_ratio"], rule(results)["equivalence_margin"]
    sizes = list(size_headers(ratio, margin))
    cols = ["cell", "label", "a", "b", "n_seeds", "seeds", "ratio", "interval_lo", "interval_hi", "log_mean",
            "log_sd", "ratio_display", "verdict", *SIZE_KEYS, *sizes, "note"]
    level = contrast_level(results)
    interval = levelled(level, "interval")
    t = Table("contrasts", "Paired contrasts: the probe arms against nGPT and each other", cols,
              key=["cell", "label"],
              headers={"label": "contrast", "n_seeds": "seeds", "ratio_display": f"S_a / S_b [{interval}]"}
              | size_headers(ratio, margin),
              formats={c: fmt_text for c in ("cell", "label", "a", "b", "seeds", "ratio_display", "verdict",
                                             *sizes, "note")}
              | {"n_seeds": fmt_int} | dict.fromkeys(SIZE_KEYS, fmt_int),
              shown=["cell", "label", "n_seeds", "ratio_display", "verdict", *sizes, "note"],
              note="Paired by seed: D = ln S_a − ln S_b over the seeds both arms have (seed s of every arm "
                   "saw the same batches); ratio = exp(mean D) = S_a / S_b, with the "
                   f"{levelled(level, 't-interval')} on mean D, exponentiated; where a "
                   "seed's speed-up is a bound, D is bounded too and the interval is the censored-normal "
                   "profile likelihood's, calibrated to the t-interval (the entry says so). The verdict "
                   f"reads a as against b. Seeds to resolve x{ratio:g}: the seeds that would give 80% power "
                   f"to exclude no difference were the true ratio x{ratio:g}, at the sd of D measured here "
                   "(two seeds at least; "
                   f"{SIZES_HOW}).")
    for cell, doc in results.speedups.items():
        for c in doc.contrasts if doc else ():
            seeds = set(c.seeds) or None  # no paired seed: the contrast rests on every seed's runs
            lo, hi = c.interval or (None, None)
            t.add({"cell": cell, "label": c.label, "a": c.a, "b": c.b, "n_seeds": c.n_seeds,
                   "seeds": ", ".join(map(str, c.seeds)) or None, "ratio": c.ratio,
                   "interval_lo": lo, "interval_hi": hi, "log_mean": c.log_mean, "log_sd": c.log_sd,
                   "ratio_display": _ratio_text(c), "verdict": c.verdict, **seed_counts(c.seeds_needed),
                   **{f"{key}_text": contrast_seeds_text(c, key) for key in SIZE_KEYS}, "note": c.note},
                  arm_runs(doc, c.a, seeds) + arm_runs(doc, c.b, seeds))
    return t


# ----------------------------------------------------------------------------------------------------------
# What the data show


def _stated(c: Contrast | None, label: str) -> str:
    return f"{label} missing" if c is None else f"{c.label} {c.verdict} ({_ratio_text(c)})"


def _seeds_sentence(contrasts: list[Contrast | None], ratio: float, n_seeds: int) -> str:
    parts = [f"{c.label} {contrast_seeds_text(c)}" for c in contrasts if c is not None]
    if not parts:
        return ""
    if all(c is None or c.log_sd is None for c in contrasts):
        return (f" Seeds to resolve a x{ratio:g} difference: not measured (one seed: the seed noise is "
                "unmeasured).")
    return (f" Seeds to resolve a x{ratio:g} difference at the seed noise measured: {'; '.join(parts)} "
            f"(this grid has {n_seeds}).")


EFFECT_LABELS = {"conditioning": "conditioning effect", "norm": "norm effect", "interaction": "interaction"}
CLAIM_HEADERS = {"exceeds": "Holm p: exceeds", "falls_short": "Holm p: falls short",
                 "equivalent": "Holm p: equivalent"}


def factorial_table(results: Results) -> Table:
    cols = ["cell", "effect", "ratio", "interval_lo", "interval_hi", "ratio_display", "method", "level",
            "n_seeds", "verdict", "note"]
    t = Table("factorial", "The 2x2 as a factorial: effects on the speed-up, paired by seed", cols,
              key=["cell", "effect"],
              headers={"ratio_display": "effect, as a ratio of speed-ups [interval]", "n_seeds": "seeds"},
              formats={c: fmt_text for c in ("cell", "effect", "ratio_display", "method", "verdict", "note")}
              | {"n_seeds": fmt_int, "level": lambda x: f"{x:.0%}"},
              shown=["cell", "effect", "ratio_display", "method", "level", "n_seeds", "verdict", "note"],
              note=f"Per seed, paired (speedup/factorial.py): {CODING}. exp() of each is shown. Seeds where "
                   "an arm has only a bound are left out (note). Verdict by the symmetric rule stated above.")
    for cell, doc in results.speedups.items():
        f = doc.factorial if doc else None
        if f is None:
            continue
        seeds = set(f.seeds)
        runs = [r for arm in f.arms for r in arm_runs(doc, arm, seeds)]
        for name, e in f.effects.items():
            lo, hi = e.interval or (None, None)
            t.add({"cell": cell, "effect": EFFECT_LABELS[name], "ratio": e.ratio, "interval_lo": lo,
                   "interval_hi": hi, "ratio_display": effect_text(e), "method": e.method, "level": e.level,
                   "n_seeds": e.n_seeds, "verdict": e.verdict, "note": f.note}, runs)
    return t


def angle_square_text(doc: SpeedupDocument, account: Mapping) -> str:
    """What reads the effective learning rate in a cell that runs the angle square: the angle account's own
    test, and whether the square can separate the accounts (speedup/reading.py, speedup/separation.py)."""
    separated = separation_clause(doc.separation)
    said = (f"tested by the angle square, not on this interval: the {EFFECTIVE_LR.name} account reads "
            f"{short(account['reading'])} (section \"Which account\")")
    return f"{said}; {separated}" if separated else said


def confound_text(doc: SpeedupDocument) -> str:
    """Whether the effective learning rate confounds the primary effect: the speed-up file's verdict with the
    interval it rests on (speedup/rivals.py, in the reading's words), or why there is none; in a cell that
    fits the angle line over every arm's measured angle, that line's reading of the effective-learning-rate
    account, and in one that runs the angle square otherwise, the square's reading: each replaces that
    verdict."""
    angle = doc.reading.accounts.get(EFFECTIVE_LR.name) if doc.reading else None
    if angle is not None and angle.get("source") == "measured" and not doc.reading.effective_lr_clause:
        return f"read from every arm's measured angle per step (the angle line): {angle['words']}"
    if angle is not None and runs_angle_square(doc.arms):
        return angle_square_text(doc, angle)
    if doc.rivals is None:
        return "not checked (a speed-up file without rivals: rerun the speedup stage)"
    if doc.rivals.primary.note is not None:
        return f"not measured: {doc.rivals.primary.note}"
    clause = doc.reading.effective_lr_clause if doc.reading else None
    return clause or "not checked on its interval (an older speed-up file: rerun the speedup stage)"


def primary_table(results: Results) -> Table:
    cols = ["cell", "primary", "ratio", "interval_lo", "interval_hi", "ratio_display", "verdict", "reading",
            "confounded", "confound", *CLAIMS, "holm_verdict", "holm_reading"]
    t = Table("primary", "The primary effect per cell, and across cells after Holm's adjustment", cols,
              key=["cell"],
              headers={"primary": "primary effect", "ratio_display": "effect [interval]",
                       "verdict": "verdict in the cell", "reading": "reading in the cell",
                       "confound": "effective learning rate (angular rate)",
                       "holm_verdict": "verdict across cells (Holm)", "holm_reading": "reading across cells "
                       "(Holm)"} | CLAIM_HEADERS,
              formats={c: fmt_text for c in ("cell", "primary", "ratio_display", "verdict", "reading",
                                             "confounded", "confound", "holm_verdict", "holm_reading")}
              | {c: lambda x: fmt_num(x, 3) for c in CLAIMS},
              shown=["cell", "primary", "ratio_display", "verdict", "reading", "confound", *CLAIMS,
                     "holm_verdict", "holm_reading"],
              note=f"Across cells: {HOLM} (speedup/multiplicity.py). Holm's adjusted p-values, not a pooled "
                   "estimate: the cells differ in scale and context and the question is asked per cell. "
                   "Effective learning rate: the primary effect's factorial weights applied to ln angular "
                   f"rate per seed ({ANGULAR_HOW}), paired t over seeds, exponentiated; "
                   f"{confound_rule(rule(results)['equivalence_margin'] or 1.25)}. In a cell that fits the "
                   "angle line over every arm's measured angle, or runs the angle square, the "
                   "effective-learning-rate account's own reading replaces it.")
    for row in primary_across_cells(results.speedups):
        r = row.reading
        lo, hi = r.effect.interval or (None, None)
        t.add({"cell": row.cell, "primary": EFFECT_LABELS[r.primary], "ratio": r.effect.ratio,
               "interval_lo": lo, "interval_hi": hi, "ratio_display": effect_text(r.effect),
               "verdict": r.effect.verdict, "reading": r.words, "confounded": r.confounded_by_effective_lr,
               "confound": confound_text(results.speedups[row.cell]), **(row.holm_p or dict.fromkeys(CLAIMS)),
               "holm_verdict": row.holm_verdict, "holm_reading": row.holm_reading})
    return t


def verdict_text(results: Results, comparisons: Table, too_small: bool) -> str:
    if too_small:
        return ("Nothing, by design: the budgets are below report.min_budget_for_claims, so no comparison "
                "above is evidence for or against either account.")
    if not len(comparisons):
        return "No cell has a speed-up estimate yet; nothing to conclude."
    lines = []
    across = {row.cell: row for row in primary_across_cells(results.speedups)}
    for cell, doc in results.speedups.items():
        if doc is None:
            continue
        if doc.reading is None:
            lines.append(f"{cell}: its speed-up file has no reading (an older speed-up stage; rerun "
                         f"`ngptlab speedup --cell {cell}`): nothing concluded.")
            continue
        r, row = doc.reading, across[cell]
        pairs = {(c.a, c.b): c for c in doc.contrasts}
        orth, rownorm = pairs.get(("gpt-orth", "ngpt")), pairs.get(("gpt-rownorm", "ngpt"))
        holm = (f"; across the {row.n_cells} cells with an interval (Holm): {row.holm_verdict}, "
                f"{row.holm_reading}" if row.holm_p is not None else "")
        held = "; ".join(f"{t['a']} vs {t['b']} {t['status']}" for t in r.pattern)
        measured = r.accounts.get("conditioning", {})
        # read from the measured mechanisms, the label predictions do not decide it: its line's words do
        pattern = (f"; read from the arms' measured kappa: {measured['words']}"
                   if measured.get("source") == "measured" else
                   f"; the account's predictions: {held}" if held else "")
        lines.append(f"{cell}: the {EFFECT_LABELS[r.primary]} {effect_text(r.effect)}: "
                     f"{r.effect.verdict or 'n/a'}{pattern}; so {r.words}{holm}. Beside it: "
                     f"{_stated(orth, 'gpt-orth vs ngpt')}, {_stated(rownorm, 'gpt-rownorm vs ngpt')}."
                     + _seeds_sentence([orth, rownorm], doc.resolve_ratio, len(doc.seeds)))
    return " ".join(lines)


def primary_name(results: Results) -> str | None:
    """The params file's primary effect (speedup.primary_contrast), as the speed-up files record it."""
    found = [d.reading.primary for d in results.speedups.values() if d and d.reading]
    return found[0] if found else None


def rule_text(results: Results) -> str:
    r = rule(results)
    if r["verdict_rule"] is None:
        return "**The rule.** " + OLD_RULE
    primary = primary_name(results)
    predictions = " ".join(
        f"By its label pattern, the account that {account.claim} predicts "
        + "; ".join(f"{a} vs {b} {claim_words(claim, r['equivalence_margin'])}" for a, b, claim in
                    account.pattern) + "." for account in ACCOUNTS)
    reading = ("" if primary is None else
               f" An account is a claim about a mechanism: the conditioning and effective-learning-rate "
               f"accounts are read from each arm's measured kappa and angle per step wherever the cell "
               f"fits their lines (the dose-response section), the norm account by its pattern (fixed "
               f"norms are set by construction), and the others by their label patterns only where no "
               f"line is fitted. {predictions} A pattern reads consistent "
               f"with an account only when every prediction holds by its own test at the level (an "
               f"intersection-union test), inconsistent when any is shown not to hold, else not resolved; "
               f"so a world where only ngpt is fast reads inconsistent with both, though the conditioning "
               f"effect carries half of ngpt's speed-up. The pre-specified primary effect, the "
               f"{EFFECT_LABELS[primary]} (speedup.primary_contrast), is the headline number. Across cells: "
               f"{HOLM}, applied to the primary effect; a cell's reading stays consistent across cells only "
               f"where the primary effect's adjusted claim holds too. Holm's adjusted p-values, not a pooled "
               f"estimate, because the cells differ in scale and context.")
    return (f"**The rule.** {r['verdict_rule']} The equivalence margin is x{r['equivalence_margin']:g} "
            "(speedup.equivalence_margin): two arms within it of each other are called equivalent, and two "
            "arms are called different only beyond it." + reading)


def section(doc: Document, results: Results, analysis: Analysis, comparisons: Table) -> None:
    """The settle-it section; `comparisons` is comparisons_table(results), which the summary reads too."""
    primary = primary_name(results)
    named = f" (primary effect: {EFFECT_LABELS[primary]})" if primary else ""
    doc.add(Heading(f"Settle it: is conditioning why?{named}", "settle-it"))
    doc.add(Text(
        "The paper's evidence is correlational: nGPT is both faster and better conditioned. The 2x2 arms "
        "break the correlation with everything else equal: `gpt-rownorm` fixes the weight norms (nGPT's "
        "unit rows) but leaves conditioning free; `gpt-orth` fixes the conditioning (κ = 1) but not the "
        "norms. If conditioning is the cause, gpt-orth should match nGPT's speed-up and gpt-rownorm fall "
        "short of it, unless its conditioning improves too; read as a factorial, fixing conditioning has an "
        "effect and fixing the norms none. gpt-nowd, gpt-lrm and gpt-scalar control for "
        "weight decay and for learnable norms."))
    doc.add(Text(rule_text(results)))
    fig = settle_figure(results, analysis.arm_rows, SETTLE_METRICS)
    doc.add(FigureBlock(fig) if fig else Text("No cell has both a speed-up and conditioning results yet."))
    doc.add(TableBlock(settle_table(results, analysis.arm_rows, analysis.cross)), TableBlock(comparisons))
    contrasts = contrasts_table(results)
    if len(contrasts):
        doc.add(TableBlock(contrasts))
    factorial = factorial_table(results)
    if len(factorial):
        doc.add(TableBlock(factorial), TableBlock(primary_table(results)))
    tracking = tracking_table(results, analysis.arm_rows, analysis.cross)
    if len(tracking):
        doc.add(TableBlock(tracking))
    doc.add(Text("**What the data show.** " + verdict_text(results, comparisons, views.too_small(results))))
