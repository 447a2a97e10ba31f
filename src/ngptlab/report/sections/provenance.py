"""The section "Provenance": the code revision and inputs the report was rendered from, every run of the grid
with its outcome, each run's hashes, and the code accepted as changing no number (reports/provenance.json has
them all, report/provenance.py)."""

from __future__ import annotations

from ngptlab import layout
from ngptlab.report.kit.document import Document, Heading, TableBlock, Text
from ngptlab.report.kit.load import Results
from ngptlab.report.kit.table import Table, fmt_int, fmt_loss, fmt_lr, fmt_sha, fmt_text
from ngptlab.report.provenance import accepted_code


def section(doc: Document, results: Results, code_revision: str) -> None:
    """The rendering's inputs, every run, every run's hashes."""
    doc.add(Heading("Provenance", "provenance"))
    doc.add(Text(
        f"Rendered by code revision `{code_revision}` from {len(results.inputs)} input files (results/ and "
        f"{layout.tokens_dir(results.source)}/meta.json{'' if results.meta else ', which is missing'}); no "
        "checkpoint was read. "
        "[reports/provenance.json](provenance.json) lists, for each number in the tables and for each "
        "figure, the runs behind it; for each run its resolved parameters, checkpoint sha256, data sha256s "
        "and code revision; and the sha256 of every input file. Every table is also a CSV under "
        "reports/tables/."))
    doc.add(TableBlock(runs_table(results)))
    doc.add(TableBlock(provenance_table(results), link_runs=False))
    accepted = accepted_table(results)
    if len(accepted):
        doc.add(TableBlock(accepted, link_runs=False))


def runs_table(results: Results) -> Table:
    cols = ["run", "cell", "arm", "budget", "lr", "seed", "schedule", "status", "final_val_loss", "tokens",
            "steps", "train_flops", "conditioning"]
    t = Table("runs", "Every run of the grid", cols, key=["run"],
              headers={"final_val_loss": "final val loss", "train_flops": "train FLOPs"},
              formats={"run": fmt_text, "cell": fmt_text, "arm": fmt_text, "status": fmt_text,
                       "conditioning": fmt_text, "budget": fmt_int, "lr": fmt_lr, "seed": fmt_int,
                       "final_val_loss": fmt_loss, "tokens": fmt_int, "steps": fmt_int},
              shown=["cell", "arm", "budget", "lr", "seed", "schedule", "status", "final_val_loss", "tokens",
                     "steps", "conditioning"])
    for r in results.runs.values():
        s = r.summary or {}
        cond = ("missing" if r.conditioning is None else "stale" if r.stale_conditioning else "yes")
        t.add({"run": r.name, "cell": r.spec.cell, "arm": r.spec.arm, "budget": r.spec.budget,
               "lr": r.spec.lr, "seed": r.spec.seed, "schedule": r.spec.schedule, "status": r.status,
               "final_val_loss": r.final_val_loss, "tokens": s.get("tokens"), "steps": s.get("steps"),
               "train_flops": s.get("train_flops"), "conditioning": cond if r.summary else None}, [r.name])
    return t


def provenance_table(results: Results) -> Table:
    cols = ["run", "status", "checkpoint_sha256", "train_sha256", "val_sha256", "code_revision",
            "summary_sha256", "conditioning_sha256"]
    t = Table("provenance", "Provenance of every run", cols, key=["run"],
              headers={"checkpoint_sha256": "checkpoint sha256", "train_sha256": "train.bin sha256",
                       "val_sha256": "val.bin sha256", "code_revision": "code",
                       "summary_sha256": "summary sha256", "conditioning_sha256": "conditioning sha256"},
              formats={"run": fmt_text, "status": fmt_text, **{c: fmt_sha for c in cols[2:]}},
              note="Hashes shortened to 12 characters here; reports/tables/provenance.csv and "
                   "reports/provenance.json have them in full.")
    for r in results.runs.values():
        s = r.summary or {}
        data = s.get("data") or {}
        t.add({"run": r.name, "status": r.status, "checkpoint_sha256": s.get("checkpoint_sha256"),
               "train_sha256": data.get("train_sha256"), "val_sha256": data.get("val_sha256"),
               "code_revision": s.get("code_revision"),
               "summary_sha256": r.summary_sha256, "conditioning_sha256": r.conditioning_sha256}, [r.name])
    return t


def accepted_table(results: Results) -> Table:
    """Each refactor accepted on bit-identical golden traces (`ngptlab plan --accept-code`): its job kept the
    lineage key, so its results are the earlier code's."""
    cols = ["stage", "arm", "revision", "accepted_at", "traces"]
    t = Table("accepted_code", "Code accepted as changing no number", cols, key=["stage", "arm", "revision"],
              headers={"revision": "against revision", "accepted_at": "accepted",
                       "traces": "golden traces (sha256)"},
              formats={"stage": fmt_text, "arm": fmt_text, "revision": fmt_sha, "accepted_at": fmt_text,
                       "traces": fmt_text},
              note="Edits of these jobs' code were accepted where tiny deterministic runs through every path "
                   "of the grid (golden traces) were bit-identical before and after, so their lineage keys, "
                   "and results, stayed (docs/provenance.md, 'Accepting a refactor').")
    for entry in accepted_code(results.root):
        traces = entry.get("traces") or {}
        t.add({"stage": entry["stage"], "arm": entry["arm"], "revision": entry["revision"],
               "accepted_at": entry["accepted_at"],
               "traces": ", ".join(f"{path} {str(sha)[:12]}" for path, sha in traces.items())})
    return t
