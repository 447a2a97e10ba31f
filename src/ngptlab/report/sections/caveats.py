"""The section "Caveats": what limits every number above, from the grid's size and seeds to the schedule,
the data and the estimators' biases."""

from __future__ import annotations

from ngptlab.paper import paper_numbers, paper_speedup
from ngptlab.report.kit import views
from ngptlab.report.kit.document import Bullets, Document, Heading
from ngptlab.report.kit.load import Results
from ngptlab.report.kit.speedups import min_seeds
from ngptlab.report.kit.table import Table
from ngptlab.schedule import calibration_budgets, shares_trunks


def section(doc: Document, results: Results, long: Table) -> None:
    """`long`: the speed-up table (sections/speedup.py), whose bounds are a caveat."""
    doc.add(Heading("Caveats", "caveats"))
    train = results.params.train
    items = []
    if views.too_small(results):
        items.append(f"Budgets up to {max(train.budgets):,} tokens, below report.min_budget_for_claims "
                     f"({results.params.report.min_budget_for_claims:,}): too small to conclude "
                     "anything.")
    if len(train.seeds) == 1:
        items.append("One seed: every speed-up is a point estimate without an interval; differences between "
                     "arms may be noise.")
    elif len(train.seeds) < min_seeds(results):
        n = len(train.seeds)
        items.append(f"{n} seeds: every interval is a t-interval on ln S with {n - 1} degree"
                     f"{'s' if n > 2 else ''} of freedom, wide at so few seeds and resting on ln S being "
                     "roughly normal over seeds; no bootstrap interval below "
                     f"{min_seeds(results)} seeds.")
    paper_scales = set(paper_numbers()["paper"]["scales"])
    other = [s for s in train.scales if s not in paper_scales]
    if other:
        items.append(f"Scale{'s' if len(other) > 1 else ''} {', '.join(other)} "
                     f"{'are' if len(other) > 1 else 'is'} not the paper's "
                     f"({', '.join(sorted(paper_scales))}): its numbers are not directly comparable.")
    no_ref = [c for c in train.contexts if paper_speedup(c) is None]
    if no_ref:
        items.append(f"The paper reports no speed-up at context{'s' if len(no_ref) > 1 else ''} "
                     f"{', '.join(f'{c:,}' for c in no_ref)}.")
    source = results.params.prepare.source
    if source.kind != "hf":
        items.append(f"Data: `{source.name}` ({source.kind}), not the paper's OpenWebText.")
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
    items += _schedule(results)
    items.append("The within-run speed-up estimate reads mid-schedule losses, which are not annealed: it is "
                 "biased toward smaller speed-ups.")
    items.append("The rank correlations across arms rest on few arms per cell and treat a bound as its bound "
                 "value; they describe, they do not test.")
    items.append("The paper's numbers are those printed in arXiv v1 of 2410.01131 (sections, figures and "
                 "pages are v1's); src/ngptlab/paper/paper_numbers.yaml records where each one stands.")
    doc.add(Bullets(items))


def _schedule(results: Results) -> list[str]:
    """The caveats a WSD grid adds."""
    train = results.params.train
    if not shares_trunks(results.schedule):
        return []
    calibrated = ("see [Calibration](#calibration) for whether WSD shifts every arm's loss alike"
                  if calibration_budgets(train) else "no calibration runs (train.calibrate): whether WSD "
                  "shifts every arm's loss alike is not known")
    return [f"Schedule WSD, not the paper's cosine: every speed-up here is one under WSD; {calibrated}."]
