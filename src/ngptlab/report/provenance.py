"""reports/provenance.json: for each number in the report, the runs behind it, and for each run what it was
trained on and with.

Layout:
  report      {title, params_file, params_sha256, code_revision}
  params      the resolved params the report was rendered with
  data        {source, meta_sha256, splits{train, val: {tokens, documents, sha256}}} (null when meta.json is
              missing)
  inputs      {relative path: sha256} of every file the report read
  timing      {files, sha256, note}: of those, the timing files (results/timing/) the compute table's speeds
              come from, and the sha256 of their "<path> <sha256>" lines: measured speed is no stage's input
              in either tool, so a run trained again rewrites it without rerunning the report
  runs        {run: {status, spec, checkpoint_sha256, data{source, train_sha256, val_sha256}, params (the
              run's resolved train params), code_revision, summary_sha256, conditioning_sha256}}
  tables      {table id: {title, csv, columns, key}}   key = the columns whose values name a row in number ids
  numbers     [{id: "<table>/<row key>/<column>", table, column, value, runs[]}]   every numeric table cell
  figures     {figure id: {title, runs[]}}
  accepted_code  [{stage, arm, fingerprint, accepted_as, revision, accepted_at, traces{path: sha256}}]: the
              code accepted as changing no number (`ngptlab plan --accept-code`, results/accepted-code.json)
Everything in it is a function of the inputs (and the code revision), so re-rendering gives the same bytes. It
does not copy dvc.lock: the report stage does not depend on it (its own entry there records this very file),
and the checkpoints' and shards' hashes already come from the files the report reads.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ngptlab import layout
from ngptlab.files import sha256_file
from ngptlab.report.kit.document import Document
from ngptlab.report.kit.load import Results


def _json_value(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


def numbers(doc: Document) -> list[dict]:
    """Every numeric cell of every table, with the runs of its row."""
    out = []
    for t in doc.tables:
        for i, row in enumerate(t.rows):
            for column, value in zip(t.columns, row, strict=True):
                if isinstance(value, bool) or not isinstance(value, int | float):
                    continue
                if column in t.key:
                    continue
                out.append({"id": f"{t.id}/{t.row_key(i)}/{column}", "table": t.id, "column": column,
                            "value": _json_value(value), "runs": t.runs[i]})
    return out


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


ACCEPTED_FIELDS = ("stage", "arm", "fingerprint", "accepted_as", "revision", "accepted_at", "traces")


def accepted_code(root: Path) -> list[dict]:
    """The record of refactors accepted on bit-identical golden traces (plan/accept.py), each entry's fields
    of ACCEPTED_FIELDS; none where there is no readable record (`ngptlab plan --check` names a broken one)."""
    try:
        entries = json.loads((Path(root) / layout.ACCEPTED_CODE).read_text())["accepted"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return [{key: entry.get(key) for key in ACCEPTED_FIELDS} for entry in entries if isinstance(entry, dict)]


def build_provenance(results: Results, doc: Document, code_revision: str) -> dict:
    meta = results.meta
    data = None
    if meta is not None:
        data = {"source": results.source,
                "meta_sha256": results.inputs.get(f"{layout.tokens_dir(results.source)}/meta.json"),
                "splits": {s: {k: (meta.get("splits", {}).get(s) or {}).get(k)
                               for k in ("tokens", "documents", "sha256")} for s in ("train", "val")}}
    runs = {}
    for name, r in results.runs.items():
        s = r.summary or {}
        runs[name] = {
            "status": r.status,
            "spec": r.spec.as_dict(),
            "checkpoint_sha256": s.get("checkpoint_sha256"),
            "data": s.get("data"),
            "params": s.get("params"),
            "code_revision": s.get("code_revision"),
            "summary_sha256": r.summary_sha256,
            "conditioning_sha256": r.conditioning_sha256,
        }
    params_file = results.params_path
    timing_files, timing_sha256 = results.timing_digest()
    return {
        "report": {"title": results.params.report.title,
                   "params_file": _relative(params_file, results.root) if params_file else None,
                   "params_sha256": (sha256_file(params_file)
                                     if params_file and params_file.is_file() else None),
                   "code_revision": code_revision},
        "params": asdict(results.params),  # every key, defaults filled in
        "data": data,
        "inputs": results.inputs,
        "timing": {"files": timing_files, "sha256": timing_sha256,
                   "note": "measured speed, not part of the results' lineage: no stage of Snakemake or DVC "
                           "depends on it, so a run trained again rewrites it and reruns nothing"},
        "runs": runs,
        "tables": {t.id: {"title": t.title, "csv": f"tables/{t.id}.csv", "columns": t.columns, "key": t.key}
                   for t in doc.tables},
        "numbers": numbers(doc),
        "figures": {f.id: {"title": f.title, "runs": f.runs} for f in doc.figures},
        "accepted_code": accepted_code(results.root),
    }


def to_json(provenance: dict) -> str:
    return json.dumps(provenance, indent=1, allow_nan=False, sort_keys=False) + "\n"
