"""The section "Conditioning": each arm's matrices at its representative run (views.representatives), in five
subsections, each a figure per cell and a table: the embeddings (the paper's Fig. 4), every layer (Figs. 5,
10), trained against initialisation and random matrices, layers 3 and 4 (Figs. 11-12, beside the paper's
numbers), and post-hoc renormalization (Fig. 10's dotted lines)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from ngptlab.paper import paper_numbers, where
from ngptlab.report.kit import plot, views
from ngptlab.report.kit.conditioning import headline_value, matrix_entry, reference_value, spectrum
from ngptlab.report.kit.crossarm import CONDITION_COLUMNS
from ngptlab.report.kit.document import (
    Bullets,
    Callout,
    Document,
    Figure,
    FigureBlock,
    Heading,
    TableBlock,
    Text,
    run_names,
)
from ngptlab.report.kit.load import Results, RunRecord
from ngptlab.report.kit.table import Table, fmt_int, fmt_lr, fmt_text
from ngptlab.results import read_float

KINDS = ("q", "k", "v", "o", "mlp_u", "mlp_v", "mlp_o")
PAPER_LAYERS = (3, 4)


def section(doc: Document, results: Results) -> None:
    """The text, the arms not shown and why, then the five subsections."""
    doc.add(Heading("Conditioning", "conditioning"))
    largest = views.budgets(results)[-1]
    doc.add(Text(
        f"The matrices of each arm's best run at the largest budget ({largest:,} tokens; smallest seed), "
        "analysed by ngptlab.condition in float64: condition number κ = σmax/σmin (∞ when numerically "
        "singular), per head for Q, K and V as in the paper. Layers are numbered from 1 as in the paper. "
        "Every arm's matrix is its effective matrix, one definition for all: the linear map the forward "
        "pass applies to its normalised input (multipliers, scalars, nGPT's s_u, s_v and s_z, and the "
        "gain of the RMSNorm in front of it), formed in float64 (src/ngptlab/observe/effective.py); the "
        "raw parameter is analysed as a second variant. Every headline κ has two references beside it: "
        "the same run's matrices at initialisation (rebuilt from its seed) and the median κ of Gaussian "
        "matrices of the same shape."))
    stale = [n for n, r in results.runs.items() if r.stale_conditioning]
    if stale:
        doc.add(Callout("Conditioning results analysed a checkpoint other than the one the run's summary "
                        "names (stale; rerun `ngptlab condition`): "
                        + run_names(stale) + "."))
    notes = [n for n in (_not_shown(results, c) for c in results.cells) if n]
    if notes:
        doc.add(Text("Arms without a figure line below, and why:"), Bullets(notes))
    sections = (("Embeddings", "conditioning-embeddings", embeddings, None),
                ("Every layer", "conditioning-layers", every_layer, conditioning_table),
                ("Trained, at initialisation, and random", "conditioning-references", references,
                 reference_table),
                ("Layers 3 and 4", "conditioning-layers34", layers34, layer34_table),
                ("Post-hoc renormalization", "conditioning-renormalization", renormalization,
                 renormalization_table))
    for title, anchor, make_figure, make_table in sections:
        doc.add(Heading(title, anchor, level=3))
        for cell in results.cells:
            fig = make_figure(results, cell)
            doc.add(FigureBlock(fig) if fig else Text(f"{cell}: no conditioning result to plot."))
        if make_table:
            doc.add(TableBlock(make_table(results)))


def _not_shown(results: Results, cell: str) -> str | None:
    gone = []
    for rep in views.representatives(results, cell):
        if rep.record is None:
            gone.append(f"{rep.arm} ({rep.reason})")
        elif rep.record.conditioning is None:
            gone.append(f"{rep.arm} (no conditioning result for `{rep.record.name}`)")
    return f"{cell}: not shown: " + "; ".join(gone) + "." if gone else None


def _reps(results: Results, cell: str) -> list[views.Representative]:
    return [rep for rep in views.representatives(results, cell)
            if rep.record is not None and rep.record.conditioning is not None]


# ----------------------------------------------------------------------------------------------------------
# Embeddings


def embeddings(results: Results, cell: str) -> Figure | None:
    reps = _reps(results, cell)
    if not reps:
        return None
    with plot.panels(6, 3, width=3.2, height=2.6) as (fig, axes):
        for row, kind in enumerate(("embed_in", "embed_out")):
            ax_norm, ax_eig, ax_cos = axes[3 * row], axes[3 * row + 1], axes[3 * row + 2]
            for rep in _drawing_order(reps):
                style = {"color": plot.arm_color(rep.arm), "zorder": plot.arm_zorder(rep.arm)}
                rec = matrix_entry(rep.record, kind, None)
                hist = (rec or {}).get("row_norms", {}).get("histogram")
                if hist:
                    edges, counts = np.asarray(hist["edges"], float), np.asarray(hist["counts"], float)
                    # Fraction of rows per bin, not a density: unit-norm arms are a spike of width ~0.
                    ax_norm.stairs(counts / max(counts.sum(), 1), edges, label=rep.arm, **style)
                eig = spectrum(rep.record, kind, "cov_eigenvalue")
                if eig is not None:
                    ax_eig.plot(np.arange(1, len(eig) + 1), eig, lw=1, label=rep.arm, **style)
                cos = (rec or {}).get("pairwise_cosine", {}).get("histogram")
                if cos:
                    counts = np.asarray(cos["counts"], float)
                    ax_cos.stairs(counts / max(counts.sum(), 1), np.asarray(cos["edges"], float),
                                  label=rep.arm, **style)
            name = "input" if kind == "embed_in" else "output"
            ax_norm.set_title(f"{name} embeddings: row norms")
            ax_norm.set_xlabel("norm")
            ax_norm.set_ylabel("fraction of rows")
            ax_eig.set_title(f"{name} embeddings: covariance eigenvalues")
            ax_eig.set_xlabel("index (sorted)")
            ax_eig.set_ylabel("eigenvalue / median")
            plot.log_axis(ax_eig)
            plot.index_axis(ax_eig)
            ax_cos.set_title(f"{name} embeddings: pairwise dot products")
            ax_cos.set_xlabel("cosine of two rows")
            ax_cos.set_ylabel("fraction of pairs")
        plot.arm_legend(fig, [rep.arm for rep in reps])
        svg = plot.save(fig)
    return Figure(f"embeddings_{cell}", f"Embeddings, {cell}",
                  "As the paper's Fig. 4: distribution of the embedding row norms, the eigenvalues of "
                  "the mean-centred covariance of the embeddings, sorted, over their median (a flat "
                  "spectrum is a well-conditioned embedding), and the distribution of the dot products of "
                  "pairs of unit-normalised rows of a fixed sample (centred on 0 = isotropic).", svg,
                  [r.record.name for r in reps])


# ----------------------------------------------------------------------------------------------------------
# Every layer


def every_layer(results: Results, cell: str) -> Figure | None:
    reps = _reps(results, cell)
    if not reps:
        return None
    skipped_inf = False
    with plot.panels(len(KINDS), 4, width=2.7, height=2.2) as (fig, axes):
        for ax, kind in zip(axes, KINDS, strict=True):
            for rep in _drawing_order(reps):
                points = []
                for entry in rep.record.conditioning["matrices"].values():
                    if entry["kind"] != kind:
                        continue
                    v = entry["variants"].get("effective") or {}
                    value = (v.get("heads") or {}).get("condition_number_median") if kind in ("q", "k", "v") \
                        else v.get("condition_number")
                    if value is None:
                        continue
                    value = read_float(value)
                    if math.isinf(value):
                        skipped_inf = True
                        continue
                    points.append((entry["layer"] + 1, value))
                if points:
                    x, y = zip(*sorted(points), strict=True)
                    ax.plot(x, y, marker=plot.arm_marker(rep.arm), ms=3, lw=1, color=plot.arm_color(rep.arm),
                            zorder=plot.arm_zorder(rep.arm), label=rep.arm)
            plot.log_axis(ax)
            plot.index_axis(ax)
            ax.set_title(f"{kind}: κ" + (" (median over heads)" if kind in ("q", "k", "v") else ""))
            ax.set_xlabel("layer (1-based)")
        plot.arm_legend(fig, [rep.arm for rep in reps], markers=True)
        svg = plot.save(fig)
    caption = ("As the paper's Figs. 5 and 10: condition number σmax/σmin of every attention and MLP matrix "
               "of every layer, per head (median over heads) for Q, K, V, each arm's best run at the "
               "largest budget.")
    if skipped_inf:
        caption += " Numerically singular matrices (κ = ∞) are not drawn; the tables list them."
    return Figure(f"layers_{cell}", f"Condition numbers of every layer, {cell}", caption, svg,
                  [r.record.name for r in reps])


def conditioning_table(results: Results, variant: str = "effective") -> Table:
    cols = ["cell", "arm", "run", "budget", "lr", *CONDITION_COLUMNS]
    t = Table(f"conditioning_{variant}", f"Headline conditioning numbers ({variant} matrices)", cols,
              key=["cell", "arm"], headers=dict(CONDITION_COLUMNS),
              formats={"cell": fmt_text, "arm": fmt_text, "run": fmt_text, "budget": fmt_int, "lr": fmt_lr},
              shown=["cell", "arm", *CONDITION_COLUMNS],
              note="Each arm's best run at the largest budget (smallest seed). κ = condition number "
                   "σmax/σmin; ∞ = numerically singular (σmin/σmax below condition.singular_tol).")
    for cell in results.cells:
        for rep in views.representatives(results, cell):
            r = rep.record
            if r is None or r.conditioning is None:
                t.add({"cell": cell, "arm": rep.arm,
                       "run": rep.reason or f"{r.name}: no conditioning result"}, [r.name] if r else [])
                continue
            t.add({"cell": cell, "arm": rep.arm, "run": r.name, "budget": r.spec.budget, "lr": r.spec.lr,
                   **{k: headline_value(r, k, variant) for k in CONDITION_COLUMNS}}, [r.name])
    return t


# ----------------------------------------------------------------------------------------------------------
# Trained, at initialisation, and random


REFERENCE_METRICS = (("attn_head_condition_median", "attention κ, median over heads"),
                     ("attn_condition_median", "attention κ (whole), median"),
                     ("mlp_condition_median", "MLP κ, median"),
                     ("embed_in_cov_condition", "input embedding covariance κ"))


def references(results: Results, cell: str) -> Figure | None:
    reps = _reps(results, cell)
    if not reps:
        return None
    series = [("trained", "trained (the arm's colour)", "o", True), ("init", "at initialisation", "s", False),
              ("gaussian", "Gaussian, same shape", "D", False)]
    svg = _dot_panels(reps, REFERENCE_METRICS, series,
                      lambda rep, source, key: reference_value(rep.record, source, key))
    return Figure(f"references_{cell}", f"Trained against initialisation and random, {cell}",
                  "Condition numbers of each arm's effective matrices after training, the same run's "
                  "matrices at initialisation (rebuilt from its seed), and the median for Gaussian "
                  "matrices of the same shape: a difference between arms that the references share is the "
                  "shape or the initialisation, not learning.", svg, [r.record.name for r in reps])


REFERENCE_KEYS = {**{k: v for k, v in CONDITION_COLUMNS.items() if "condition" in k},
                  **{f"layer{layer}_{kind}_{what}": f"κ layer {layer} {kind.upper()}{label}"
                     for layer in PAPER_LAYERS for kind in ("q", "k")
                     for what, label in (("condition", ""),
                                         ("head_condition_median", ", median over heads"))}}


def reference_table(results: Results) -> Table:
    """Every headline κ of each arm's representative run beside its two references."""
    cols = ["cell", "arm", "metric", "trained", "init", "gaussian", "run"]
    t = Table("references", "Condition numbers: trained, at initialisation, and Gaussian of the same shape",
              cols, key=["cell", "arm", "metric"],
              headers={"init": "at initialisation (same seed)", "gaussian": "Gaussian median, same shape"},
              formats={"cell": fmt_text, "arm": fmt_text, "metric": fmt_text, "run": fmt_text},
              shown=["cell", "arm", "metric", "trained", "init", "gaussian"],
              note="Effective matrices. init = the same run's step-0 matrices, rebuilt from its seed exactly "
                   "as train builds them; gaussian = the median κ of seeded Gaussian matrices of the same "
                   "shape (condition/reference.py).")
    for cell, arm, r in _analysed_representatives(results):
        for key, label in REFERENCE_KEYS.items():
            t.add({"cell": cell, "arm": arm, "metric": label, "run": r.name,
                   **{source: reference_value(r, source, key)
                      for source in ("trained", "init", "gaussian")}}, [r.name])
    return t


# ----------------------------------------------------------------------------------------------------------
# Layers 3 and 4


def layers34(results: Results, cell: str) -> Figure | None:
    reps = _reps(results, cell)
    if not reps:
        return None
    with plot.panels(4, 2, width=4.2, height=3.0) as (fig, axes):
        for ax, (layer, kind) in zip(axes, [(3, "q"), (3, "k"), (4, "q"), (4, "k")], strict=True):
            drawn = False
            for rep in _drawing_order(reps):
                entry = matrix_entry(rep.record, kind, layer - 1)
                heads = [spectrum(rep.record, kind, "singular_value", layer=layer - 1, head=head)
                         for head in range(len((entry or {}).get("heads", {}).get("condition_number", [])))]
                heads = [sv for sv in heads if sv is not None]
                if not heads or len({len(sv) for sv in heads}) != 1:
                    continue
                # One line per arm, the median head, and the range of its heads: a line per head and arm
                # (the paper's) is dozens of lines nobody can tell apart.
                sv = np.asarray(heads, float)
                index = np.arange(1, sv.shape[1] + 1)
                style = {"color": plot.arm_color(rep.arm), "zorder": plot.arm_zorder(rep.arm)}
                ax.fill_between(index, sv.min(axis=0), sv.max(axis=0), alpha=0.12, lw=0, **style)
                ax.plot(index, np.median(sv, axis=0), lw=1.2, marker=plot.arm_marker(rep.arm), ms=3.5,
                        markevery=max(1, len(index) // 5), label=rep.arm, **style)
                drawn = True
            if not drawn:
                plot.empty(ax, f"no layer {layer} in this model")
                continue
            plot.log_axis(ax)
            plot.index_axis(ax)
            ax.set_title(f"layer {layer}, {kind.upper()}: sorted singular values per head")
            ax.set_xlabel("index (sorted, largest first)")
            ax.set_ylabel("σ / median σ of the head")
        plot.arm_legend(fig, [rep.arm for rep in reps], markers=True)
        svg = plot.save(fig)
    return Figure(f"layers34_{cell}", f"Layers 3 and 4, {cell}",
                  "As the paper's Figs. 11-12: the sorted singular values of the heads of the query and key "
                  "matrices at layers 3 and 4 (1-based), each head's over its median. One line per arm: the "
                  "median over its heads at each index; the shaded band: the range over its heads (the "
                  "paper draws a line per head). The baseline in black, on top. The table below gives the "
                  "whole-matrix and per-head-median condition numbers beside the paper's.",
                  svg, [r.record.name for r in reps])


def layer34_table(results: Results) -> Table:
    """Q/K condition numbers at the paper's layers 3 and 4 (1-based), ours beside the paper's."""
    cols = ["source", "cell", "arm", "run"]
    headers = {}
    for layer in PAPER_LAYERS:
        for kind in ("q", "k"):
            cols += [f"layer{layer}_{kind}_condition", f"layer{layer}_{kind}_head_condition_median"]
            headers[f"layer{layer}_{kind}_condition"] = f"L{layer} {kind.upper()} κ"
            headers[f"layer{layer}_{kind}_head_condition_median"] = f"L{layer} {kind.upper()} κ heads med."
    t = Table("layers34", "Attention Q and K at layers 3 and 4 (paper's 1-based numbering)", cols,
              key=["source", "cell", "arm"], headers=headers,
              formats={"source": fmt_text, "cell": fmt_text, "arm": fmt_text, "run": fmt_text},
              shown=[c for c in cols if c != "run"],
              note="κ = whole-matrix condition number; 'heads med.' = median over heads of the per-head "
                   "condition numbers. The paper's legends print one 'cond' per matrix and model (shown in "
                   "the κ columns); its captions say the panels show the singular values 'for all heads' "
                   "but not whether cond is per head, pooled or whole, so both of ours are shown. Paper: "
                   + "; ".join(f"{e['arm']} {e['scale']} layer {e['layer']}: {where(e)}"
                               for e in paper_numbers()["condition"]))
    paper_rows: dict[tuple[str, str], dict] = {}  # one row per (arm, scale), its layers side by side
    for entry in paper_numbers()["condition"]:
        values = paper_rows.setdefault((entry["arm"], entry["scale"]), {
            "source": f"paper ({entry['scale']})", "cell": None, "arm": entry["arm"], "run": None})
        for kind in ("q", "k"):
            values[f"layer{entry['layer']}_{kind}_condition"] = float(entry[kind])
    for values in paper_rows.values():
        t.add(values, [])
    for cell in results.cells:
        for rep in views.representatives(results, cell):
            r = rep.record
            values = {"source": "this run", "cell": cell, "arm": rep.arm, "run": r.name if r else rep.reason}
            if r is not None and r.conditioning is not None:
                values.update({c: headline_value(r, c) for c in cols[4:]})
            t.add(values, [r.name] if r else [])
    return t


# ----------------------------------------------------------------------------------------------------------
# Post-hoc renormalization


def renormalization(results: Results, cell: str) -> Figure | None:
    reps = _reps(results, cell)
    if not reps:
        return None
    variants = ("effective", "renormalized", "underlying")
    metrics = (("attn_head_condition_median", "attention κ, median over heads"),
               ("embed_in_cov_condition", "input embedding covariance κ"))
    series = [(variant, variant + (" (the arm's colour)" if filled else ""), marker, filled)
              for variant, marker, filled in zip(variants, "osD", (True, False, False), strict=True)]

    def value(rep: views.Representative, variant: str, key: str) -> float | None:
        found = rep.record.headline(variant).get(key)
        return None if found is None else read_float(found)

    svg = _dot_panels(reps, metrics, series, value)
    return Figure(f"renormalization_{cell}", f"Post-hoc renormalization, {cell}",
                  "Condition numbers of the linear maps the forward pass applies to its normalised inputs "
                  "(effective), the same after nGPT's normalization applied after training (renormalized; "
                  "the paper's Fig. 10 dotted lines), and the raw parameters (underlying). Renormalizing a "
                  "GPT after the fact shows how much of "
                  "nGPT's conditioning the normalization alone explains.", svg, [r.record.name for r in reps])


RENORM_COLUMNS = {
    "attn_head_condition_median": "κ attention, median over heads",
    "attn_condition_median": "κ attention (whole), median",
    "mlp_condition_median": "κ MLP, median",
    "embed_in_cov_condition": "κ input emb. cov.",
    "embed_out_cov_condition": "κ output emb. cov.",
}


def renormalization_table(results: Results) -> Table:
    cols = ["cell", "arm", "variant", "run", *RENORM_COLUMNS]
    t = Table("renormalization", "Post-hoc renormalization: the same matrices with unit vectors along the "
              "embedding dimension", cols, key=["cell", "arm", "variant"], headers=dict(RENORM_COLUMNS),
              formats={"cell": fmt_text, "arm": fmt_text, "variant": fmt_text, "run": fmt_text},
              shown=["cell", "arm", "variant", *RENORM_COLUMNS],
              note="effective = the linear map the forward pass applies to its normalised input "
                   "(multipliers, scalars, nGPT's s_u/s_v/s_z and the preceding RMSNorm gain included, in "
                   "float64; observe/effective.py); renormalized = the same after nGPT's normalization "
                   "(the paper's Fig. 10 dotted lines); underlying = the raw parameter.")
    for cell, arm, r in _analysed_representatives(results):
        for variant in r.conditioning.get("variants", []):
            t.add({"cell": cell, "arm": arm, "variant": variant, "run": r.name,
                   **{k: headline_value(r, k, variant) for k in RENORM_COLUMNS}}, [r.name])
    return t


# ----------------------------------------------------------------------------------------------------------
# Shared by the subsections


def _dot_panels(reps: list, panels, series: list[tuple[str, str, str, bool]], value) -> bytes:
    """One panel per (metric, title), on a log axis: a column of dots per arm, one per series (key, label,
    marker, filled) at value(rep, series key, metric), side by side; missing and infinite values are left
    out. Dots, not bars: a bar's length on a log axis is measured from an arbitrary floor (κ = 1.14 would
    look like none). The first series is filled in the arm's colour, the others hollow grey references.
    Returns the SVG."""
    offset = 0.22
    with plot.panels(len(panels), 2, width=4.6, height=2.8) as (fig, axes):
        for ax, (metric, title) in zip(axes, panels, strict=True):
            for j, (key, _, marker, filled) in enumerate(series):
                for i, rep in enumerate(reps):
                    v = value(rep, key, metric)
                    if v is None or math.isinf(v):
                        continue
                    x = i + (j - (len(series) - 1) / 2) * offset
                    if filled:
                        ax.plot([x], [v], ls="", marker=marker, ms=6, color=plot.arm_color(rep.arm),
                                mec="black", mew=0.5, zorder=plot.arm_zorder(rep.arm, 3))
                    else:
                        ax.plot([x], [v], ls="", marker=marker, ms=6, color=plot.KEY_COLOR, mfc="none",
                                mew=1.0, zorder=2)
            ax.axhline(1.0, color=plot.KEY_COLOR, lw=0.8, ls=":", zorder=1)  # κ's floor: the axis shows it
            ax.set_xticks(range(len(reps)), [rep.arm for rep in reps], rotation=30, ha="right")
            ax.set_xlim(-0.6, len(reps) - 0.4)
            plot.log_axis(ax)
            ax.set_title(title)
        handles = [plot.key_handle(marker, label, hollow=not filled) for _, label, marker, filled in series]
        plot.legend(fig, [*handles, plot.key_line("κ = 1, its least", ":")])
        return plot.save(fig)


def _drawing_order(reps: list) -> list:
    """The representatives in the order to draw them: the baseline's last, on top (kit/plot.py)."""
    by_arm = {rep.arm: rep for rep in reps}
    return [by_arm[arm] for arm in plot.drawing_order(by_arm)]


def _analysed_representatives(results: Results) -> Iterator[tuple[str, str, RunRecord]]:
    """(cell, arm, run) of each arm's representative run per cell that the condition stage analysed."""
    for cell in results.cells:
        for rep in views.representatives(results, cell):
            if rep.record is not None and rep.record.conditioning is not None:
                yield cell, rep.arm, rep.record

