"""`ngptlab report`: render reports/report.md, reports/report.html (self-contained), reports/figures/*.svg,
reports/tables/*.csv, reports/provenance.json and reports/metrics/<cell>/<arm>.json from results/, params and
data/tokens/<source>/meta.json.

No checkpoint is read, so after a `dvc pull` of the small files alone the report re-renders, byte for byte
(nothing in it depends on the time or on the machine; the code revision is an input like the others).

Everything is rendered in memory first; only then is each file written to a temporary name in its
directory and renamed into place, report.html last. A bad input therefore leaves the previous report as it
was. Figures, tables and metrics files of an earlier render that this one no longer produces are removed, so
the folder holds exactly one report.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

from ngptlab import options
from ngptlab.files import write_bytes_atomic
from ngptlab.report import build, metrics, provenance
from ngptlab.report.kit import render
from ngptlab.report.kit.crossarm import Analysis, arm_table, cross_arm_table, tracking
from ngptlab.report.kit.document import Document
from ngptlab.report.kit.load import load_results
from ngptlab.revision import code_revision as git_revision
from ngptlab.settings import Params


def configure(parser: argparse.ArgumentParser) -> None:
    options.add_root(parser)
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="output directory (default: <root>/reports)")


@dataclass
class Rendered:
    files: dict[str, bytes]  # relative path under the output directory -> content
    seconds: float
    document: Document  # what was rendered (tables with their typed values, figures)


def render_report(params: Params, root: str | Path = ".", params_path: str | Path | None = None,
                  code_revision: str | None = None) -> Rendered:
    """Render every output file in memory (nothing written)."""
    started = time.perf_counter()
    root = Path(root)
    revision = code_revision or git_revision()
    results = load_results(params, root, params_path)
    cross = cross_arm_table(params, root, allow_missing=True)
    analysis = Analysis(cross=cross, arm_rows=arm_table(cross), tracking=tracking(cross))
    doc = build.build_document(results, analysis, revision)
    files: dict[str, bytes] = {}
    for figure in doc.figures:
        files[f"figures/{figure.id}.svg"] = figure.svg
    for table in doc.tables:
        files[f"tables/{table.id}.csv"] = table.to_csv().encode()
    record = provenance.build_provenance(results, doc, revision)
    files["provenance.json"] = provenance.to_json(record).encode()
    files.update(metrics.files(metrics.headline_metrics(results)))
    files["report.md"] = render.to_markdown(doc).encode()
    files["report.html"] = render.to_html(doc).encode()
    return Rendered(files, time.perf_counter() - started, doc)


def write_report(rendered: Rendered, out: str | Path) -> list[Path]:
    """Write the rendered files (report.html last) and drop stale figures/tables; return the paths written."""
    out = Path(out)
    order = sorted(rendered.files, key=lambda p: (p == "report.html", p))
    written = []
    for rel in order:
        write_bytes_atomic(out / rel, rendered.files[rel])
        written.append(out / rel)
    for sub, suffix in (("figures", ".svg"), ("tables", ".csv"), (metrics.DIRECTORY, ".json")):
        for path in sorted((out / sub).rglob(f"*{suffix}")):
            if path.relative_to(out).as_posix() not in rendered.files:
                path.unlink()
    return written


def run(args: argparse.Namespace, params: Params) -> int:
    rendered = render_report(params, args.root, args.params)
    out = Path(args.out) if args.out else Path(args.root) / "reports"
    write_report(rendered, out)
    html_size = len(rendered.files["report.html"])
    n_fig = sum(p.startswith("figures/") for p in rendered.files)
    n_tab = sum(p.startswith("tables/") for p in rendered.files)
    print(f"wrote {out}/report.html ({html_size / 1024:.0f} KiB, self-contained), report.md, {n_fig} "
          f"figures, {n_tab} tables, provenance.json in {rendered.seconds:.1f} s")
    return 0
