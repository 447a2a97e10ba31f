"""The report's table of contents: one call per section, in the report's order (report/sections/).

Claims are guarded twice. A grid whose largest budget is below report.min_budget_for_claims says, at the
top and in the settle-it section, that it is too small to conclude anything. And every verdict is the
speed-up stage's, from a t-interval over seeds at its file's level, stated in the settle-it section
(speedup/inference.py for an arm against the baseline, speedup/equivalence.py between arms and for the
factorial effects: the margin judges both "equivalent" and "falls short"/"exceeds"); a single seed or a
bound has no interval and is not resolved.
"""

from __future__ import annotations

from ngptlab.report.kit import plot
from ngptlab.report.kit.crossarm import Analysis
from ngptlab.report.kit.document import Contents, Document
from ngptlab.report.kit.load import Results
from ngptlab.report.sections import (
    accounts,
    calibration,
    caveats,
    conditioning,
    dose_response,
    loss,
    provenance,
    rivals,
    settle,
    speedup,
    summary,
    what_was_run,
    zero_shot,
)


def build_document(results: Results, analysis: Analysis, code_revision: str) -> Document:
    # Every figure draws the primary baseline in black, on top (kit/plot.py).
    with plot.use_baseline(results.params.speedup.baselines[0]):
        return _build(results, analysis, code_revision)


def _build(results: Results, analysis: Analysis, code_revision: str) -> Document:
    doc = Document(results.params.report.title)
    # Built once, shown in their sections and read by the summary (and the caveats).
    long = speedup.speedup_table(results)
    comparisons = settle.comparisons_table(results)
    summary.section(doc, results, long, comparisons)
    doc.add(Contents())
    what_was_run.section(doc, results)
    speedup.section(doc, results, long)
    loss.section(doc, results)
    calibration.section(doc, results)  # a WSD grid with cosine calibration runs only
    zero_shot.section(doc, results)
    conditioning.section(doc, results)
    rivals.section(doc, results)  # conditioning and the angular update rate over training
    settle.section(doc, results, analysis, comparisons)
    accounts.section(doc, results)  # the accounts' patterns over both squares
    dose_response.section(doc, results)  # the accounts as lines over the measured mechanisms
    caveats.section(doc, results, long)
    provenance.section(doc, results, code_revision)
    return doc
