"""The section "Loss curves": final validation loss against the token budget (the paper's Fig. 2 method),
each cell's validation loss against tokens (Fig. 1), and the table of the best final losses.

A WSD grid (ngptlab.grid.trunks) draws each trunk once: the budgets of one (arm, learning rate, seed) share
it, so a smaller budget's curve starts at its branch point (shown_curve).
"""

from __future__ import annotations

import numpy as np

from ngptlab.batch import tokens_per_step
from ngptlab.report.kit import plot, views
from ngptlab.report.kit.document import Callout, Document, Figure, FigureBlock, Heading, TableBlock, Text
from ngptlab.report.kit.load import Results, RunRecord
from ngptlab.report.kit.table import Table, fmt_loss, fmt_lr, fmt_text
from ngptlab.schedule import branch_point, cooldown_fraction, shares_trunk, shares_trunks
from ngptlab.train.data import FINAL_EVAL_CAP_TOKENS


def section(doc: Document, results: Results) -> None:
    """Final loss against budget, each cell's curves, the final-loss table."""
    doc.add(Heading("Loss curves", "loss-curves"))
    fig = final_loss_vs_budget(results)
    if fig:
        doc.add(FigureBlock(fig))
    else:
        doc.add(Callout("No completed run: no loss to plot."))
    for cell in results.cells:
        fig = loss_curves(results, cell)
        if fig:
            doc.add(FigureBlock(fig))
        else:
            doc.add(Text(f"{cell}: no run with a validation curve."))
    doc.add(TableBlock(final_loss_table(results)))


def final_loss_vs_budget(results: Results) -> Figure | None:
    cells = results.cells
    arms = views.arms(results)
    with plot.panels(len(cells), 3, width=3.6, height=2.8) as (fig, axes):
        runs, drawn, references = [], False, set()
        for ax, cell in zip(axes, cells, strict=True):
            best = views.best_runs(results, cell)
            any_arm = False
            for arm in plot.drawing_order(arms):
                per_budget: dict[int, list[float]] = {}
                for (a, _seed), per in best.items():
                    if a == arm:
                        for budget, r in per.items():
                            per_budget.setdefault(budget, []).append(r.final_val_loss)
                            runs.append(r.name)
                if per_budget:
                    b = sorted(per_budget)
                    ax.plot(b, [float(np.mean(per_budget[x])) for x in b], marker=plot.arm_marker(arm),
                            color=plot.arm_color(arm), zorder=plot.arm_zorder(arm), lw=1, ms=4, label=arm)
                    any_arm = drawn = True
            if not any_arm:
                plot.empty(ax, f"{cell}: no completed runs")
                continue
            doc = results.speedups.get(cell)
            if doc and doc.targets:
                # The target and where it is read: the speed-up is where an arm's curve crosses the first.
                ax.axhline(float(np.mean([t.loss for t in doc.targets])), color=plot.KEY_COLOR, ls="--",
                           lw=0.9, zorder=1)
                for n in sorted({t.reference_budget for t in doc.targets}):
                    ax.axvline(n, color=plot.KEY_COLOR, ls=":", lw=0.9, zorder=1)
                    references.add(n)
            plot.budget_axis(ax, views.budgets(results))
            ax.set_title(cell)
            ax.set_xlabel("token budget")
            ax.set_ylabel("final validation loss")
        if not drawn:
            plot.discard(fig)
            return None
        handles = [plot.arm_handle(a) for a in arms]
        if references:
            baseline = arms[0]
            where = " and ".join(plot.fmt_budget(n) for n in sorted(references))
            handles += [plot.key_line(f"target: {baseline}'s loss at the reference budget", "--"),
                        plot.key_line(f"reference budget: {where} tokens", ":")]
        plot.legend(fig, handles)
        svg = plot.save(fig)
    return Figure("final_loss_vs_budget", "Final validation loss against token budget",
                  "Final validation loss (the final evaluation, train.final_eval_tokens) at each budget's "
                  "chosen learning rate (chosen on the swept seeds), mean over seeds (the paper's Fig. 2 "
                  "method); a tick at every budget of the grid. Dashed: the target, the baseline's loss at "
                  "the reference budget (dotted: speedup.reference_budget in tokens); an arm's speed-up is "
                  "read where its curve crosses the target.", svg, sorted(set(runs)))


def loss_curves(results: Results, cell: str) -> Figure | None:
    best = views.best_runs(results, cell)
    largest = views.budgets(results)[-1]
    with plot.panels(1, 1, width=5.5, height=3.4) as (fig, (ax,)):
        runs, drawn, thin = [], False, False
        for arm in plot.drawing_order(views.arms(results)):
            seeds = sorted(s for (a, s) in best if a == arm)
            per = best[(arm, seeds[0])] if seeds else {}
            style = {"color": plot.arm_color(arm), "zorder": plot.arm_zorder(arm)}
            for budget, r in sorted(per.items()):
                if not r.curve:
                    continue
                t, loss = zip(*shown_curve(results, r, list(per.values())), strict=True)
                last = budget == max(per)
                # The arm's marker ends its thick curve, as everywhere its points are marked; a dot ends a
                # thin one, so that a smaller budget evaluated once is still seen.
                ax.plot(t, loss, lw=1.6 if last else 0.8, alpha=1.0 if last else 0.5,
                        marker=plot.arm_marker(arm) if last else "o", markevery=[len(t) - 1],
                        ms=5 if last else 2.5, **style,
                        label=arm + ("" if budget == largest else f" (to {budget:,})") if last else None)
                thin = thin or not last
                runs.append(r.name)
                drawn = True
            for r in results.compared_runs(cell):
                if r.spec.arm == arm and r.status == "diverged" and r.curve:
                    t, loss = zip(*shown_curve(results, r, list(per.values())), strict=True)
                    ax.plot(t, loss, lw=0.8, ls=":", marker="x", markevery=[len(t) - 1], **style,
                            label=f"{arm} lr {r.spec.lr:g}, {r.spec.budget:,} (diverged)")
                    runs.append(r.name)
                    drawn = True
        if not drawn:
            plot.discard(fig)
            return None
        plot.tokens_axis(ax)
        ax.set_xlabel("training tokens")
        ax.set_ylabel("validation loss (eval windows)")
        ax.set_title(f"{cell}: validation loss, best learning rate per budget")
        handles, labels = ax.get_legend_handles_labels()
        order = [labels.index(a) for a in views.arms(results) if a in labels]  # arm order, as every legend
        order += [i for i in range(len(labels)) if i not in order]
        handles = [handles[i] for i in order]
        if thin:
            handles.append(plot.key_line("thin: a smaller budget", lw=0.8, alpha=0.5, marker="o", ms=2.5))
        plot.legend(fig, handles)
        svg = plot.save(fig)
    return Figure(f"loss_{cell}", f"Validation loss against tokens, {cell}", loss_caption(results, cell),
                  svg, sorted(set(runs)))


def shown_curve(results: Results, record: RunRecord, drawn: list[RunRecord]) -> list[tuple[float, float]]:
    """The part of a run's validation curve that the loss figure draws: all of it, except for a WSD run with a
    longer WSD run of the same learning rate and seed among `drawn`. That one carries the trunk both share,
    so this one is drawn from its branch point on (from the last evaluation at or before it, on the trunk)."""
    spec = record.spec
    longer = [o for o in drawn if shares_trunk(o.spec) and o.spec.budget > spec.budget
              and (o.spec.lr, o.spec.seed) == (spec.lr, spec.seed)]
    if not shares_trunk(spec) or not longer:
        return record.curve
    train = results.params.train
    start = branch_point(train, spec.context, spec.budget) * tokens_per_step(train, spec.context)
    on_trunk = [i for i, (tokens, _) in enumerate(record.curve) if tokens <= start]
    return record.curve[on_trunk[-1] if on_trunk else 0:]


def two_losses(results: Results, cell: str) -> str:
    """Which validation loss a curve is and which the final one: two estimates on different tokens of the
    split (train/data.py) that can differ by more than their standard errors."""
    train = results.params.train
    context = results.cell_runs(cell)[0].spec.context
    final = (f"the whole validation split (up to its first {FINAL_EVAL_CAP_TOKENS:,} tokens)"
             if train.final_eval_tokens == "all"
             else f"the validation split's first {int(train.final_eval_tokens):,} tokens")
    return (f"A curve is the periodic evaluation, every {train.eval_every_tokens:,} tokens, on the same "
            f"{train.eval_windows} validation windows ({train.eval_windows * context:,} tokens at positions "
            f"drawn by train.eval_seed; train.eval_windows); the final validation loss of the tables and the "
            f"final-loss figure is the run's final evaluation on {final}, in consecutive windows "
            "(train.final_eval_tokens). They are two estimates of the loss on different tokens of the split, "
            "so a curve's last point and the final loss can differ by more than either's standard error: "
            "compare curves with curves and final losses with final losses.")


def loss_caption(results: Results, cell: str) -> str:
    if not shares_trunks(results.schedule):
        return ("Each budget is its own run with its own cosine schedule (thick, ending in the arm's marker: "
                "the largest budget; thin, ending in a dot: smaller budgets), at the learning rate that "
                "gave the lowest final loss for that budget, smallest seed; the baseline in black, on top. "
                "Diverged runs dotted, ending in x. " + two_losses(results, cell))
    train = results.params.train
    return ("WSD: the budgets of an arm share one trunk, drawn once, as the start of its largest "
            "budget's curve (thick); every smaller budget (thin, ending in a dot) is drawn only from its "
            "branch point on, where it leaves the trunk and cools down to 0 over the last "
            f"{cooldown_fraction(train):.0%} of its budget. Each budget at the learning rate that gave the "
            "lowest final loss for it, smallest seed; a budget whose best learning rate differs from the "
            "larger budgets' leaves that rate's trunk, drawn whole. The baseline in black, on top. Diverged "
            "runs dotted, ending in x. " + two_losses(results, cell))


def final_loss_table(results: Results) -> Table:
    """Per cell and arm, the best final loss at every budget (mean over seeds) and the learning rate(s) that
    gave it: the numbers of the final-loss figure."""
    budgets = views.budgets(results)
    cols = ["cell", "arm"]
    headers, formats = {}, {"cell": fmt_text, "arm": fmt_text}
    for b in budgets:
        cols += [f"loss_{b}", f"lr_{b}", f"seeds_{b}"]
        headers[f"loss_{b}"] = f"loss at {b:,}"
        headers[f"lr_{b}"] = "best lr"
        formats[f"loss_{b}"], formats[f"lr_{b}"] = fmt_loss, lambda x: fmt_text(x if isinstance(x, str)
                                                                                else fmt_lr(x) if x else None)
    t = Table("final_loss", "Best final validation loss per arm and budget (over the learning-rate sweep, "
              "mean over seeds)", cols, key=["cell", "arm"], headers=headers, formats=formats,
              shown=[c for c in cols if not c.startswith("seeds_")])
    for cell in results.cells:
        best = views.best_runs(results, cell)
        for arm in views.arms(results):
            values: dict = {"cell": cell, "arm": arm}
            runs = []
            for b in budgets:
                chosen = [per[b] for (a, _), per in sorted(best.items()) if a == arm and b in per]
                if chosen:
                    values[f"loss_{b}"] = sum(r.final_val_loss for r in chosen) / len(chosen)
                    lrs = sorted({r.spec.lr for r in chosen})  # one per seed; usually the same
                    values[f"lr_{b}"] = lrs[0] if len(lrs) == 1 else ", ".join(fmt_lr(x) for x in lrs)
                    values[f"seeds_{b}"] = len(chosen)
                    runs += [r.name for r in chosen]
            t.add(values, runs)
    return t
