"""The section "Zero-shot accuracy": zero-shot accuracy (results/evaluate/<cell>.json) beside the loss.

Per cell: accuracy of each arm's best-learning-rate run per budget and task (arm x budget), accuracy against
tokens per arm when two or more budgets were evaluated, and whether ordering the arms by accuracy gives the
same order as ordering them by final validation loss (Kendall's tau between the two orders). A cell without
its evaluation file, or an (arm, budget) the stage could not evaluate, is a named hole.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from ngptlab import layout, paper
from ngptlab.errors import ResultsError
from ngptlab.files import read_json, sha256_file
from ngptlab.report.kit import plot
from ngptlab.report.kit.document import (
    Bullets,
    Callout,
    Document,
    Figure,
    FigureBlock,
    Heading,
    TableBlock,
    Text,
)
from ngptlab.report.kit.load import Results
from ngptlab.report.kit.table import Table, fmt_int, fmt_loss, fmt_lr, fmt_text


def load_evaluations(results: Results) -> dict[str, dict | None]:
    """cell -> its evaluate JSON, or None when missing; every file read is added to the provenance inputs."""
    out: dict[str, dict | None] = {}
    for cell in results.cells:
        path = results.root / layout.evaluate_file(cell)
        out[cell] = None
        if path.is_file():
            doc = read_json(path, ResultsError, mapping=False)
            if doc.get("cell") != cell or not isinstance(doc.get("runs"), list):
                raise ResultsError(f"{path}: not the evaluation of cell {cell} (missing 'cell' or 'runs')")
            out[cell] = doc
            results.inputs[path.relative_to(results.root).as_posix()] = sha256_file(path)
    return out


def accuracy_table(evaluations: dict[str, dict | None]) -> Table:
    table = Table("evaluate_accuracy", "Zero-shot accuracy (arm x budget, each arm's best learning rate)",
                  ["cell", "arm", "budget", "lr", "seed", "final_val_loss", "task", "acc", "acc_stderr",
                   "acc_norm", "n"],
                  headers={"final_val_loss": "val loss", "acc_stderr": "± stderr", "acc_norm": "acc_norm"},
                  formats={"cell": fmt_text, "arm": fmt_text, "budget": fmt_int, "lr": fmt_lr,
                           "seed": fmt_int, "final_val_loss": fmt_loss, "task": fmt_text, "n": fmt_int},
                  key=["cell", "arm", "budget", "seed", "task"],
                  note="lm-evaluation-harness, zero-shot; acc_norm: per-byte normalised (multiple choice).")
    for cell, doc in evaluations.items():
        for run in (doc or {}).get("runs", []):
            for task, r in run["results"].items():
                table.add({"cell": cell, "arm": run["arm"], "budget": run["budget"], "lr": run["lr"],
                           "seed": run["seed"], "final_val_loss": run["final_val_loss"], "task": task,
                           "acc": r["acc"], "acc_stderr": r.get("acc_stderr"), "acc_norm": r.get("acc_norm"),
                           "n": r["n"]}, [run["run"]])
    return table


def kendall_tau(a: list[str], b: list[str]) -> float:
    """Kendall's tau between two orders of the same items (1: the same order, -1: reversed)."""
    pos = {x: i for i, x in enumerate(b)}
    pairs = list(combinations(a, 2))
    if not pairs:
        return float("nan")
    return sum(1 if pos[x] < pos[y] else -1 for x, y in pairs) / len(pairs)


def order_table(evaluations: dict[str, dict | None]) -> Table:
    """Per cell, budget and task: the arms ordered by loss (lowest first) and by accuracy (highest first)."""
    table = Table("evaluate_order", "Does the arm order by accuracy match the order by loss?",
                  ["cell", "budget", "task", "by_loss", "by_accuracy", "same_order", "kendall_tau"],
                  headers={"by_loss": "by loss (best first)", "by_accuracy": "by accuracy (best first)",
                           "same_order": "same", "kendall_tau": "Kendall tau"},
                  formats={"cell": fmt_text, "budget": fmt_int, "task": fmt_text, "by_loss": fmt_text,
                           "by_accuracy": fmt_text},
                  key=["cell", "budget", "task"],
                  note="Mean over seeds; ties in accuracy keep the loss order.")
    for cell, doc in evaluations.items():
        runs = (doc or {}).get("runs", [])
        for budget in sorted({r["budget"] for r in runs}):
            at = [r for r in runs if r["budget"] == budget]
            for task in (doc or {}).get("tasks", {}):
                loss, acc = {}, {}
                for r in at:
                    if task in r["results"] and r["final_val_loss"] is not None:
                        loss.setdefault(r["arm"], []).append(float(r["final_val_loss"]))
                        acc.setdefault(r["arm"], []).append(r["results"][task]["acc"])
                if len(loss) < 2:
                    continue
                by_loss = sorted(loss, key=lambda a: np.mean(loss[a]))
                by_acc = sorted(by_loss, key=lambda a: -np.mean(acc[a]))
                table.add({"cell": cell, "budget": budget, "task": task, "by_loss": " < ".join(by_loss),
                           "by_accuracy": " > ".join(by_acc), "same_order": by_loss == by_acc,
                           "kendall_tau": kendall_tau(by_loss, by_acc)},
                          [r["run"] for r in at])
    return table


def accuracy_vs_tokens(evaluations: dict[str, dict | None]) -> Figure | None:
    """Accuracy against the token budget per arm, one panel per (cell, task); None with under 2 budgets."""
    panels = [(cell, task, doc) for cell, doc in evaluations.items() if doc
              for task in doc.get("tasks", {}) if len({r["budget"] for r in doc["runs"]}) >= 2]
    if not panels:
        return None
    runs = []
    with plot.panels(len(panels), 3, width=3.6, height=2.8) as (fig, axes):
        arms = []
        for ax, (cell, task, doc) in zip(axes, panels, strict=True):
            for arm in plot.drawing_order(sorted({r["arm"] for r in doc["runs"]})):
                per = {}
                for r in doc["runs"]:
                    if r["arm"] == arm and task in r["results"]:
                        per.setdefault(r["budget"], []).append(r["results"][task]["acc"])
                        runs.append(r["run"])
                b = sorted(per)
                ax.plot(b, [float(np.mean(per[x])) for x in b], marker=plot.arm_marker(arm),
                        color=plot.arm_color(arm), zorder=plot.arm_zorder(arm), lw=1, ms=4, label=arm)
                arms.append(arm)
            plot.budget_axis(ax, sorted({r["budget"] for r in doc["runs"]}))
            ax.set_title(f"{cell}: {task}")
            ax.set_xlabel("token budget")
            ax.set_ylabel("accuracy")
        plot.arm_legend(fig, sorted(set(arms)), markers=True)
        svg = plot.save(fig)
    return Figure("evaluate_accuracy_vs_tokens", "Zero-shot accuracy against token budget",
                  "Each arm's best-learning-rate run at each evaluated budget, mean over seeds.", svg,
                  sorted(set(runs)))


def section(doc: Document, results: Results) -> None:
    """The downstream-accuracy section: holes, the accuracy table, the order check, the paper's tasks."""
    evaluations = load_evaluations(results)
    doc.add(Heading("Zero-shot accuracy", "evaluate"))
    doc.add(Text(
        "Zero-shot accuracy of each arm's best-learning-rate run (as the speed-up selected it) through "
        "lm-evaluation-harness (ngptlab.evaluate). Offline, the tasks are built from the held-out validation "
        "documents: `ngptlab_lastword` (LAMBADA-style: the next word is the greedy continuation) and "
        "`ngptlab_continuation` (the true continuation against three from other documents; chance 0.25)."))
    holes = [f"{cell}: no results/evaluate/{cell}.json (the evaluate job did not run or failed)"
             for cell, d in evaluations.items() if d is None]
    holes += [f"{cell}: {h['arm']} at {h['budget']:,} tokens, seed {h['seed']}: {h['reason']}"
              for cell, d in evaluations.items() if d for h in d.get("holes", [])]
    if holes:
        doc.add(Callout("Not evaluated: " + "; ".join(holes) + "."))
    accuracy = accuracy_table(evaluations)
    if len(accuracy):
        doc.add(TableBlock(accuracy))
        order = order_table(evaluations)
        doc.add(TableBlock(order) if len(order) else
                Text("Fewer than two arms were evaluated at any budget: no order to compare with the loss."))
        fig = accuracy_vs_tokens(evaluations)
        if fig:
            doc.add(FigureBlock(fig))
    versions = sorted({d["lm_eval_version"] for d in evaluations.values() if d})
    items = [f"lm-eval version: {', '.join(versions) or 'none ran'}; the task files' sha256 are in "
             "results/evaluate/<cell>.json."]
    downstream = paper.paper_numbers().get("downstream") or {}
    if downstream:
        items.append(f"The paper's downstream tasks: {', '.join(downstream.get('tasks', []))} "
                     f"({paper.where(downstream)}).")
        ref = downstream.get("values")
        if ref:
            accuracy = ", ".join(f"{task} {value:.2f}%" for task, value in ref["accuracy_percent"].items())
            items.append(f"The paper's only tabulated accuracies (its ablations' baseline, Table 6): "
                         f"{ref['arm']} {ref['scale']} at context {ref['context']} after "
                         f"~{ref['tokens'] / 1e9:.0f}B tokens: {accuracy}; validation loss "
                         f"{ref['val_loss']}. Its GPT/nGPT comparison is in curves only (Figs. 3, 8, "
                         "9), so no row of the table above has a paper value.")
    doc.add(Bullets(items))
