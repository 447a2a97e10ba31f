"""The summary at the top of the report: what the grid is, what the paper claims, what this run shows, and
how sure that is (or that the grid is too small to conclude anything).

It reads the speed-up table (nGPT's speed-up per cell) and the 2x2 comparisons (how many are resolved),
which the table of contents builds once for the speed-up and settle-it sections.
"""

from __future__ import annotations

from ngptlab import layout
from ngptlab.paper import paper_numbers
from ngptlab.report.kit import views
from ngptlab.report.kit.document import Callout, Document, Text, run_names
from ngptlab.report.kit.load import Results
from ngptlab.report.kit.speedups import resolved, speedup_level
from ngptlab.report.kit.table import Table, fmt_budget, levelled


def section(doc: Document, results: Results, long: Table, comparisons: Table) -> None:
    """`long`: the speed-up table (sections/speedup.py); `comparisons`: the 2x2's (sections/settle.py)."""
    counts = views.status_counts(list(results.runs.values()))
    train = results.params.train
    largest = max(train.budgets)
    doc.add(Text(
        f"This report covers the {len(results.runs)} runs of the grid in `{shown_path(results)}`: "
        f"scale{'s' if len(train.scales) > 1 else ''} {', '.join(train.scales)}, "
        f"contexts {', '.join(f'{c:,}' for c in train.contexts)}, "
        f"{len(train.arms)} arms, token budgets up to {fmt_budget(largest)}, "
        f"{len(train.seeds)} seed{'s' if len(train.seeds) > 1 else ''}, trained on `{results.source}`. "
        f"{counts['completed']} completed, {counts['diverged']} diverged, {counts['missing']} missing."))
    ref = paper_numbers()
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
            f"other than those of {layout.tokens_dir(results.source)}/meta.json, which the data table "
            "describes: "
            f"{run_names(stale)}. Their numbers are not of this data; `snakemake` or `dvc repro` retrains "
            "them (their lineage keys changed with the data's)."))
    seeds = len(train.seeds)
    if views.too_small(results):
        doc.add(Callout(
            f"**Too small to conclude anything.** The largest token budget here is {largest:,} tokens, below "
            f"report.min_budget_for_claims = {results.params.report.min_budget_for_claims:,}. The "
            "numbers show that the pipeline runs end to end; they say nothing about whether nGPT trains "
            "faster or why. No conclusion is drawn below."))
    else:
        sure = ("one seed: point estimates without intervals, so no comparison below is called resolved"
                if seeds == 1 else f"{seeds} seeds: {levelled(speedup_level(results), 't-intervals')} "
                                   "on ln S over seeds")
        verdict = comparisons.columns.index("verdict")
        settled = [r for r in comparisons.rows if resolved(r[verdict])]
        doc.add(Callout(f"**How sure.** {sure}; {len(settled)} of {len(comparisons)} probe-arm comparisons "
                        "are resolved (faster, slower or equivalent by the rule of [Settle it](#settle-it)). "
                        "See [Caveats](#caveats).", kind="note"))


def shown_path(results: Results) -> str:
    """The params file as the reader would name it: relative to the results root when it lies there."""
    path = results.params_path
    if path is None:
        return "params"
    try:
        return path.resolve().relative_to(results.root.resolve()).as_posix()
    except ValueError:
        return str(path)
