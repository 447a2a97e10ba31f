"""The report's content: sections in the report's order, each from tables and figures, with text that states
only what the numbers show.

Order: what was run; the speed-up; the loss curves; calibration (a WSD grid with cosine calibration runs
only); zero-shot accuracy; conditioning (embeddings, every layer, trained vs init vs random, layers 3 and 4,
post-hoc renormalization); settle it; caveats; provenance.

The speed-up section (report/speedup.py) and the settle-it section (report/settle.py) are modules of their
own, each with its tables and text; this module orders the sections and writes the others.

Claims are guarded twice. A grid whose largest budget is below report.min_budget_for_claims says, at the
top and in the settle-it section, that it is too small to conclude anything. And a comparison is called
"faster", "slower" or "equivalent" only by the speed-up stage's rule (speedup/inference.py, stated in the
settle-it section): from the 95% t-interval on the mean log ratio over seeds, faster or slower when it lies
wholly above or below 0, equivalent when it lies within the equivalence margin; a single seed or a bound has
no interval and is not resolved.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ngptlab.report import (
    crossarm,
    evaluation,
    figures,
    paper,
    schedule,
    settle,
    speedup,
    sweeps,
    tables,
    views,
)
from ngptlab.report.document import (
    Bullets,
    Callout,
    Contents,
    Document,
    FigureBlock,
    Heading,
    TableBlock,
    Text,
)
from ngptlab.report.load import Results
from ngptlab.report.table import Table, fmt_short


@dataclass
class Analysis:
    """The cross-arm outputs (report/crossarm.py), computed once by the command."""

    cross: pd.DataFrame  # cross_arm_table(..., allow_missing=True)
    arm_rows: pd.DataFrame  # arm_table(cross)
    tracking: pd.DataFrame  # tracking(cross)


def too_small(results: Results) -> bool:
    return max(results.params["train"]["budgets"]) < results.params["report"]["min_budget_for_claims"]


def _shown_path(results: Results) -> str:
    """The params file as the reader would name it: relative to the results root when it lies there."""
    path = results.params_path
    if path is None:
        return "params"
    try:
        return path.resolve().relative_to(results.root.resolve()).as_posix()
    except ValueError:
        return str(path)


def build_document(results: Results, analysis: Analysis, code_revision: str) -> Document:
    doc = Document(results.params["report"]["title"])
    long = speedup.speedup_table(results)
    comparisons = settle.comparisons_table(results)
    _summary(doc, results, long, comparisons)
    doc.add(Contents())
    _what_was_run(doc, results)
    speedup.section(doc, results, long)
    _loss(doc, results)
    schedule.section(doc, results)
    evaluation.section(doc, results)
    _conditioning(doc, results)
    settle.section(doc, results, analysis, comparisons, too_small(results))
    _caveats(doc, results, long)
    _provenance(doc, results, code_revision)
    return doc


# ----------------------------------------------------------------------------------------------------------


def _summary(doc: Document, results: Results, long: Table, comparisons: Table) -> None:
    counts = views.status_counts(list(results.runs.values()))
    train = results.params["train"]
    largest = max(train["budgets"])
    doc.add(Text(
        f"This report covers the {len(results.runs)} runs of the grid in `{_shown_path(results)}`: "
        f"scale{'s' if len(train['scales']) > 1 else ''} {', '.join(train['scales'])}, "
        f"contexts {', '.join(f'{c:,}' for c in train['contexts'])}, "
        f"{len(train['arms'])} arms, token budgets up to {largest:,} ({fmt_short(largest)}), "
        f"{len(train['seeds'])} seed{'s' if len(train['seeds']) > 1 else ''}, trained on `{results.source}`. "
        f"{counts['completed']} completed, {counts['diverged']} diverged, {counts['missing']} missing."))
    ref = paper.paper_numbers()
    doc.add(Text(
        "**What the paper claims.** " + ref["paper"]["citation"] + ": nGPT reaches GPT's validation loss in "
        + ", ".join(f"~{e['factor']}x" for e in ref["speedup"]) + " fewer tokens at contexts "
        + ", ".join(f"{e['context']:,}" for e in ref["speedup"])
        + f" respectively ({' and '.join(ref['paper']['scales'])} models, {ref['paper']['data']}), and shows "
        "that nGPT's matrices are far better conditioned. "
        "Whether the conditioning is the reason it trains faster is what the probe arms here test."))
    shown = []
    for row in long.rows:
        values = dict(zip(long.columns, row, strict=True))
        if values["arm"] == "ngpt":
            shown.append(f"{values['cell']}: {values['display']}")
    missing = [c for c, d in results.speedups.items() if d is None]
    text = "**What this run shows.** nGPT's speed-up over the baseline: " + ("; ".join(shown) if shown else
                                                                            "not available") + "."
    if missing:
        text += f" No speed-up for {', '.join(missing)} (runs missing)."
    doc.add(Text(text))
    stale = views.runs_on_other_data(results)
    if stale:
        doc.add(Callout(
            f"**Trained on other data.** {len(stale)} of {len(results.runs)} runs recorded token shards "
            f"other than those of data/tokens/{results.source}/meta.json, which the data table describes: "
            f"{_names(stale)}. Their numbers are not of this data; `snakemake` or `dvc repro` retrains them "
            "(their lineage keys changed with the data's)."))
    seeds = len(train["seeds"])
    if too_small(results):
        doc.add(Callout(
            f"**Too small to conclude anything.** The largest token budget here is {largest:,} tokens, below "
            f"report.min_budget_for_claims = {results.params['report']['min_budget_for_claims']:,}. The "
            "numbers show that the pipeline runs end to end; they say nothing about whether nGPT trains "
            "faster or why. No conclusion is drawn below."))
    else:
        sure = ("one seed: point estimates without intervals, so no comparison below is called resolved"
                if seeds == 1 else f"{seeds} seeds: 95% t-intervals on ln S over seeds")
        verdict = comparisons.columns.index("verdict")
        resolved = [r for r in comparisons.rows if settle.resolved(r[verdict])]
        doc.add(Callout(f"**How sure.** {sure}; {len(resolved)} of {len(comparisons)} probe-arm comparisons "
                        "are resolved (faster, slower or equivalent by the rule of [Settle it](#settle-it)). "
                        "See [Caveats](#caveats).", kind="note"))


def _names(names: list[str], limit: int = 12) -> str:
    """`a`, `b`, ... and N more (see the table of every run)."""
    shown = ", ".join(f"`{n}`" for n in names[:limit])
    rest = len(names) - limit
    return shown + (f" and {rest} more (see [every run](#table-runs))" if rest > 0 else "")


def _what_was_run(doc: Document, results: Results) -> None:
    doc.add(Heading("What was run", "what-was-run"))
    doc.add(Text(
        "Every run is one (scale, context, arm, token budget, learning rate, seed). "
        + schedule.protocol(results.params["train"]) + " The learning rate is swept per arm, the only "
        "hyperparameter the paper tuned. The arms and what they fix:"))
    doc.add(Bullets([f"`{arm}`: weight norms {crossarm.arm_design(arm)[0]}, conditioning "
                     f"{crossarm.arm_design(arm)[1]}" for arm in views.arms(results)]))
    doc.add(TableBlock(tables.grid_table(results)), TableBlock(tables.data_table(results)),
            TableBlock(tables.compute_table(results)))
    sweeps.section(doc, results)
    missing = results.missing("train")
    diverged = [n for n, r in results.runs.items() if r.status == "diverged"]
    if missing:
        doc.add(Callout(f"{len(missing)} run{'s are' if len(missing) > 1 else ' is'} missing (failed, killed "
                        "or not run: no results/train/<cell>/<run>/summary.json): "
                        + _names(missing)
                        + ". Why a run failed is in its log, logs/train/<cell>/<run>.log. Everything below "
                        "is rendered from the runs that exist."))
    if diverged:
        doc.add(Callout(f"{len(diverged)} run{'s' if len(diverged) > 1 else ''} diverged (loss non-finite or "
                        "above train.diverge_loss); they are shown as such and left out of every speed-up: "
                        + _names(diverged) + ".", kind="note"))
    doc.add(TableBlock(tables.status_table(results)))
    doc.add(Text("Every run, with its final loss, tokens and steps: [Table: every run](#table-runs) in "
                 "the provenance appendix."))


def _loss(doc: Document, results: Results) -> None:
    doc.add(Heading("Loss curves", "loss-curves"))
    fig = figures.final_loss_vs_budget(results)
    if fig:
        doc.add(FigureBlock(fig))
    else:
        doc.add(Callout("No completed run: no loss to plot."))
    for cell in results.cells:
        fig = figures.loss_curves(results, cell)
        if fig:
            doc.add(FigureBlock(fig))
        else:
            doc.add(Text(f"{cell}: no run with a validation curve."))
    doc.add(TableBlock(tables.final_loss_table(results)))


def _not_shown(results: Results, cell: str) -> str | None:
    gone = []
    for rep in views.representatives(results, cell):
        if rep.record is None:
            gone.append(f"{rep.arm} ({rep.reason})")
        elif rep.record.conditioning is None:
            gone.append(f"{rep.arm} (no conditioning result for `{rep.record.name}`)")
    return f"{cell}: not shown: " + "; ".join(gone) + "." if gone else None


def _conditioning(doc: Document, results: Results) -> None:
    doc.add(Heading("Conditioning", "conditioning"))
    largest = views.budgets(results)[-1]
    doc.add(Text(
        f"The matrices of each arm's best run at the largest budget ({largest:,} tokens; smallest seed), "
        "analysed by ngptlab.condition in float64: condition number κ = σmax/σmin (∞ when numerically "
        "singular), per head for Q, K and V as in the paper. Layers are numbered from 1 as in the paper. "
        "Every arm's matrix is its effective matrix, one definition for all: the linear map the forward "
        "pass applies to its normalised input (multipliers, scalars, nGPT's s_u, s_v and s_z, and the "
        "gain of the RMSNorm in front of it), formed in float64 (src/ngptlab/condition/effective.py); the "
        "raw parameter is analysed as a second variant. Every headline κ has two references beside it: "
        "the same run's matrices at initialisation (rebuilt from its seed) and the median κ of Gaussian "
        "matrices of the same shape."))
    stale = [n for n, r in results.runs.items() if r.stale_conditioning]
    if stale:
        doc.add(Callout("Conditioning results analysed a checkpoint other than the one the run's summary "
                        "names (stale; rerun `ngptlab condition`): "
                        + _names(stale) + "."))
    notes = [n for n in (_not_shown(results, c) for c in results.cells) if n]
    if notes:
        doc.add(Text("Arms without a figure line below, and why:"), Bullets(notes))
    sections = (("Embeddings", "conditioning-embeddings", figures.embeddings, None),
                ("Every layer", "conditioning-layers", figures.every_layer, tables.conditioning_table),
                ("Trained, at initialisation, and random", "conditioning-references", figures.references,
                 tables.reference_table),
                ("Layers 3 and 4", "conditioning-layers34", figures.layers34, tables.layer34_table),
                ("Post-hoc renormalization", "conditioning-renormalization", figures.renormalization,
                 tables.renormalization_table))
    for title, anchor, make_figure, make_table in sections:
        doc.add(Heading(title, anchor, level=3))
        for cell in results.cells:
            fig = make_figure(results, cell)
            doc.add(FigureBlock(fig) if fig else Text(f"{cell}: no conditioning result to plot."))
        if make_table:
            doc.add(TableBlock(make_table(results)))


def _caveats(doc: Document, results: Results, long: Table) -> None:
    doc.add(Heading("Caveats", "caveats"))
    train = results.params["train"]
    items = []
    if too_small(results):
        items.append(f"Budgets up to {max(train['budgets']):,} tokens, below report.min_budget_for_claims "
                     f"({results.params['report']['min_budget_for_claims']:,}): too small to conclude "
                     "anything.")
    if len(train["seeds"]) == 1:
        items.append("One seed: every speed-up is a point estimate without an interval; differences between "
                     "arms may be noise.")
    elif len(train["seeds"]) < speedup.min_seeds(results):
        n = len(train["seeds"])
        items.append(f"{n} seeds: every interval is a t-interval on ln S with {n - 1} degree"
                     f"{'s' if n > 2 else ''} of freedom, wide at so few seeds and resting on ln S being "
                     "roughly normal over seeds; no bootstrap interval below "
                     f"{speedup.min_seeds(results)} seeds.")
    paper_scales = set(paper.paper_numbers()["paper"]["scales"])
    other = [s for s in train["scales"] if s not in paper_scales]
    if other:
        items.append(f"Scale{'s' if len(other) > 1 else ''} {', '.join(other)} "
                     f"{'are' if len(other) > 1 else 'is'} not the paper's "
                     f"({', '.join(sorted(paper_scales))}): its numbers are not directly comparable.")
    no_ref = [c for c in train["contexts"] if paper.paper_speedup(c) is None]
    if no_ref:
        items.append(f"The paper reports no speed-up at context{'s' if len(no_ref) > 1 else ''} "
                     f"{', '.join(f'{c:,}' for c in no_ref)}.")
    source = results.params["prepare"]["source"]
    if source["kind"] != "hf":
        items.append(f"Data: `{source['name']}` ({source['kind']}), not the paper's OpenWebText.")
    bounds = [r for r in long.rows if r[long.columns.index("bound")]]
    if bounds:
        items.append(f"{len(bounds)} speed-up{'s are' if len(bounds) > 1 else ' is a'} "
                     f"bound{'s' if len(bounds) > 1 else ''} (`>`/`<`): the arm's curve did not cross the "
                     "target within the budgets run; a wider budget range would turn them into numbers.")
    missing = results.missing("train")
    if missing:
        items.append(f"{len(missing)} of {len(results.runs)} runs missing; cells with a missing run have no "
                     "speed-up.")
    diverged = [r for r in results.runs.values() if r.status == "diverged"]
    if diverged:
        items.append(f"{len(diverged)} run{'s' if len(diverged) > 1 else ''} diverged and "
                     f"{'are' if len(diverged) > 1 else 'is'} excluded from the speed-up; an arm whose best "
                     "learning rate diverges is judged on the learning rates that did not.")
    if results.missing("conditioning"):
        items.append(f"{len(results.missing('conditioning'))} finished runs have no conditioning result.")
    items += schedule.caveats(results)
    items.append("The within-run speed-up estimate reads mid-schedule losses, which are not annealed: it is "
                 "biased toward smaller speed-ups.")
    items.append("The rank correlations across arms rest on few arms per cell and treat a bound as its bound "
                 "value; they describe, they do not test.")
    items.append("The paper's numbers are those printed in arXiv v1 of 2410.01131 (sections, figures and "
                 "pages are v1's); src/ngptlab/report/paper_numbers.yaml records where each one stands.")
    doc.add(Bullets(items))


def _provenance(doc: Document, results: Results, code_revision: str) -> None:
    doc.add(Heading("Provenance", "provenance"))
    doc.add(Text(
        f"Rendered by code revision `{code_revision}` from {len(results.inputs)} input files (results/ and "
        f"data/tokens/{results.source}/meta.json{'' if results.meta else ', which is missing'}); no "
        "checkpoint was read. "
        "[reports/provenance.json](provenance.json) lists, for each number in the tables and for each "
        "figure, the runs behind it; for each run its resolved parameters, checkpoint sha256, data sha256s "
        "and code revision; and the sha256 of every input file. Every table is also a CSV under "
        "reports/tables/."))
    doc.add(TableBlock(tables.runs_table(results)))
    doc.add(TableBlock(tables.provenance_table(results), link_runs=False))
