"""The section "The rival accounts over training": per cell, each arm's loss gap to the baseline against
tokens beside the two accounts that move with it, the conditioning (κ of the input embedding's covariance and
of the attention heads of layers 3 and 4) and the effective learning rate (the angular update rate of the
effective matrices, Kosson et al. 2023, arXiv 2305.17212), at the representative runs
(views.representatives); a sentence per arm says which separates from the baseline first.

The numbers are those a run's metrics rows hold at its evaluation points (observe/observer.py): the
angular rate at every point, κ at every train.condition_every_evals-th point and the last.

Separation: an arm's quantity separates from the baseline's at the first evaluation point (of those where
both runs have it) from which on it stays outside a band around the baseline's: |ln(arm / baseline)| >
ln RATIO_BAND for κ and the angular rate, |loss gap| > LOSS_BAND nats for the validation loss. One that is
back inside the band at the last point has not separated.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ngptlab.report.kit import plot, views
from ngptlab.report.kit.document import Document, Figure, FigureBlock, Heading, TableBlock, Text
from ngptlab.report.kit.load import Results, RunRecord
from ngptlab.report.kit.table import Table, fmt_int, fmt_text
from ngptlab.report.kit.views import Representative
from ngptlab.speedup.common_kappa import HEAD_KEYS
from ngptlab.speedup.rivals import RATE_KINDS

RATIO_BAND = 1.25  # κ and the angular rate: a factor 1.25 either way
LOSS_BAND = 0.02  # nats: about the spread of the eval windows' loss between neighbouring evaluations


def _mean_of(names: tuple[str, ...], median: bool = False) -> Callable[[dict[str, float]], float | None]:
    def value(numbers: dict[str, float]) -> float | None:
        found = [numbers[name] for name in names if name in numbers]
        if not found:
            return None
        return float(np.median(found) if median else np.mean(found))
    return value


@dataclass(frozen=True)
class Quantity:
    name: str  # column and panel title
    field: str  # the metrics rows' field ("loss": the validation curve)
    value: Callable[[dict[str, float]], float | None]

    def points(self, record: RunRecord) -> dict[float, float]:
        """tokens -> value at the run's evaluation points that have it."""
        if self.field == "loss":
            return dict(record.curve)
        out = {}
        for tokens, numbers in record.observed.get(self.field, []):
            value = self.value(numbers)
            if value is not None:
                out[tokens] = value
        return out

    def separated(self, arm: float, base: float) -> bool:
        if self.field == "loss":
            return abs(arm - base) > LOSS_BAND
        if math.isinf(arm) and math.isinf(base):
            return False
        if arm <= 0 or base <= 0:
            return False
        return abs(math.log(arm / base)) > math.log(RATIO_BAND)


QUANTITIES = (
    Quantity("loss", "loss", lambda _: None),
    Quantity("angular rate", "angular_rate", _mean_of(RATE_KINDS)),
    Quantity("κ input embedding", "kappa", _mean_of(("embed_in_cov_condition",))),
    Quantity("κ heads, layers 3-4", "kappa", _mean_of(HEAD_KEYS, median=True)),
)


def first_separation(quantity: Quantity, arm: dict[float, float], base: dict[float, float]) -> float | None:
    """The tokens of the first common evaluation point from which on the arm stays outside the band; None
    where it is inside at the last one (or they share no point)."""
    first = None
    for tokens in sorted(set(arm) & set(base), reverse=True):
        if not quantity.separated(arm[tokens], base[tokens]):
            break
        first = tokens
    return first


def separations(arm: RunRecord, base: RunRecord) -> dict[str, float | None]:
    return {q.name: first_separation(q, q.points(arm), q.points(base)) for q in QUANTITIES}


def sentence(arm: str, found: dict[str, float | None], observed: bool) -> str:
    """Which quantity separates from the baseline first, in words."""
    if not observed:
        return f"{arm}: no angular rate or κ over training (a run trained before they were logged)."
    # ties keep QUANTITIES' order
    order = sorted(((tokens, name) for name, tokens in found.items() if tokens is not None),
                   key=lambda point: point[0])
    never = [name for name, tokens in found.items() if tokens is None]
    if not order:
        return f"{arm}: nothing separates from the baseline within the bands."
    steps = [f"{name} (from {tokens:,.0f} tokens)" for tokens, name in order]
    first = [name for tokens, name in order if tokens == order[0][0]]
    lead = (f"the {first[0]} separates first" if len(first) == 1
            else f"the {' and '.join(first)} separate together first")
    text = f"{arm}: {lead}; in order: {', '.join(steps)}."
    return text + (f" Not separated: {', '.join(never)}." if never else "")


def section(doc: Document, results: Results) -> None:
    doc.add(Heading("The rival accounts over training", "rivals"))
    doc.add(Text(
        "Two accounts of a speed-up move with conditioning: the conditioning itself (κ of the input "
        "embedding's covariance, and the median over the Q and K heads of the paper's layers 3 and 4) and "
        "the effective learning rate, the angle by which the optimizer turns each effective matrix per step "
        "(mean over the attention and MLP matrix kinds; normalised weights turn a step of size lr into a "
        "rotation of size lr / norm). Each is drawn against tokens beside the loss gap to the baseline (the "
        "arm's validation loss minus the baseline's at the same tokens), at each arm's best run at the "
        "largest budget (smallest seed). A quantity separates at the first evaluation point from which on it "
        f"stays outside a band around the baseline's: a factor {RATIO_BAND:g} for κ and the angular rate, "
        f"{LOSS_BAND:g} nats for the loss."))
    doc.add(Text(
        "What this shows is correlational: an ordering in time between curves of the same runs. An arm "
        "differs from the baseline in its whole parametrisation, so a κ or an angular rate that separates "
        "before the loss is consistent with its account, not evidence that it causes the gap; one that "
        "separates only after the loss, or never, speaks against it as the sole account. Each arm is one "
        "run: no interval over seeds stands behind an ordering."))
    table = separation_table(results)
    for cell in results.cells:
        reps = _reps(results, cell)
        if len(reps) < 2:
            doc.add(Text(f"{cell}: no run of the baseline and another arm at the largest budget to compare."))
            continue
        fig = figure(cell, reps)
        doc.add(FigureBlock(fig))
        base = reps[0].record
        lines = [sentence(rep.arm, separations(rep.record, base), _observed(rep.record) and _observed(base))
                 for rep in reps[1:]]
        doc.add(Text(f"{cell}: " + " ".join(lines)))
    doc.add(TableBlock(table))


def _observed(record: RunRecord) -> bool:
    return any(record.observed.get(field) for field in ("angular_rate", "kappa"))


def _reps(results: Results, cell: str) -> list[Representative]:
    """The cell's representative runs with a validation curve, the baseline's first; none without it."""
    reps = [rep for rep in views.representatives(results, cell)
            if rep.record is not None and rep.record.curve]
    baseline = views.arms(results)[0]
    return reps if reps and reps[0].arm == baseline else []


def figure(cell: str, reps: list[Representative]) -> Figure:
    base = reps[0].record
    with plot.panels(len(QUANTITIES), 4, width=3.0, height=2.5) as (fig, axes):
        for ax, quantity in zip(axes, QUANTITIES, strict=True):
            base_points = quantity.points(base)
            for rep in sorted(reps, key=lambda rep: plot.is_baseline(rep.arm)):  # the baseline last, on top
                points = quantity.points(rep.record)
                if quantity.field == "loss":
                    points = {t: v - base_points[t] for t, v in points.items() if t in base_points}
                shown = sorted((t, v) for t, v in points.items() if math.isfinite(v))
                if shown:
                    t, v = zip(*shown, strict=True)
                    ax.plot(t, v, color=plot.arm_color(rep.arm), marker=plot.arm_marker(rep.arm), ms=3,
                            lw=1, zorder=plot.arm_zorder(rep.arm), label=rep.arm)
            shown_base = sorted((t, v) for t, v in base_points.items() if math.isfinite(v))
            if quantity.field == "loss":
                ax.axhspan(-LOSS_BAND, LOSS_BAND, color="0.85", lw=0)
                ax.set_title("loss gap to the baseline")
                ax.set_ylabel("Δ val. loss, eval windows (nats)")
            else:
                if shown_base:
                    t, v = zip(*shown_base, strict=True)
                    ax.fill_between(t, np.array(v) / RATIO_BAND, np.array(v) * RATIO_BAND, color="0.85", lw=0)
                if any(line.get_ydata().size for line in ax.get_lines()):
                    plot.log_axis(ax)
                ax.set_title(quantity.name)
                ax.set_ylabel("rad / step" if quantity.field == "angular_rate" else "κ")
            if ax.get_lines():
                plot.tokens_axis(ax)
            else:
                plot.empty(ax, "not logged")
            ax.set_xlabel("training tokens")
        plot.arm_legend(fig, [rep.arm for rep in reps], markers=True)
        svg = plot.save(fig)
    return Figure(f"rivals_{cell}", f"The rival accounts over training, {cell}",
                  "Against tokens, each arm's best run at the largest budget: the validation loss of the "
                  "periodic evaluation (train.eval_windows, the loss curves' loss, not the final one) "
                  "minus the baseline's, the angular update rate of the effective matrices (mean over the "
                  "attention and MLP kinds) and two headline κ over training. Grey: the band around the "
                  f"baseline inside which an arm has not separated (±{LOSS_BAND:g} nats; a factor "
                  f"{RATIO_BAND:g}). The baseline in black, on top.",
                  svg, [rep.record.name for rep in reps])


def separation_table(results: Results) -> Table:
    cols = ["cell", "arm", "run", *(q.name for q in QUANTITIES), "first"]
    t = Table("rivals", "Where each quantity separates from the baseline (tokens; — : not separated at the "
              "last evaluation point)", cols, key=["cell", "arm"],
              formats={"cell": fmt_text, "arm": fmt_text, "run": fmt_text, "first": fmt_text,
                       **{q.name: fmt_int for q in QUANTITIES}},
              shown=["cell", "arm", *(q.name for q in QUANTITIES), "first"],
              note=f"Bands: |ln ratio| > ln {RATIO_BAND:g} for κ and the angular rate, |gap| > {LOSS_BAND:g} "
                   "nats for the loss; from that point to the last evaluation. Correlational: see the text.")
    for cell in results.cells:
        reps = _reps(results, cell)
        for rep in reps[1:]:
            found = separations(rep.record, reps[0].record)
            separated = {tokens for tokens in found.values() if tokens is not None}
            first = [name for name, tokens in found.items() if separated and tokens == min(separated)]
            t.add({"cell": cell, "arm": rep.arm, "run": rep.record.name, **found,
                   "first": ", ".join(first) or None}, [rep.record.name, reps[0].record.name])
    return t
