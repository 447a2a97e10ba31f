"""`ngptlab prepare --export DIR`: the configured source's documents as local parquet files, and the
`prepare.source` block (kind: local) that reads them: step 0 where the machines that prepare have no
internet (many clusters' compute nodes), run once where they do (a login node).

    DIR/part-00000-of-00081.parquet ...  one `text` column, ROWS_PER_FILE documents a file (the last fewer),
                                         in the order the source yields them, non-empty ones only (what
                                         prepare reads)
    DIR/source.yaml                      the prepare.source block: kind local, the source's name, these
                                         files, format parquet, text_field text, min_documents = the rows
    DIR/export.json                      where the documents came from (the source's description and, for
                                         kind hf, the commit its revision resolved to), each file's rows
                                         and sha256

Preparing from the block gives the same token shards as preparing from the source itself: the same
documents in the same order, and the split is a function of each document's text. The files are written
into a hidden temporary directory beside DIR, which is renamed to DIR only when complete and holding at
least prepare.source.min_documents documents, so DIR exists only whole; and DIR must be new (or empty): an
export is never merged into files already there. Their bytes are a function of the documents and the
pyarrow version alone (fixed compression and row groups, no statistics, no timestamps).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from tqdm import tqdm

from ngptlab.errors import DataError
from ngptlab.files import sha256_file
from ngptlab.prepare.counts import check_before_reading, check_min_documents
from ngptlab.prepare.sources import Source, open_source
from ngptlab.settings import Source as SourceSettings

FORMAT = "ngptlab-export/1"
ROWS_PER_FILE = 100_000  # OpenWebText: 81 files of about 200 MB
ROWS_PER_GROUP = 10_000  # documents in memory at once
SCHEMA = pa.schema([("text", pa.string())])
BLOCK_NAME = "source.yaml"
RECORD_NAME = "export.json"


@dataclass(frozen=True)
class Export:
    out_dir: Path
    block: dict  # the prepare.source block that reads the files
    documents: int


def export_source(spec: SourceSettings, out_dir: Path, cache_dir: Path, *, rows_per_file: int = ROWS_PER_FILE,
                  progress: bool = True) -> Export:
    """Write the documents of `spec` under `out_dir` (the module docstring); returns the block that reads
    them."""
    out_dir = Path(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise DataError(f"--export {out_dir}: exists and is not an empty directory; an export is written "
                        f"whole into a new one (remove it, or name another)")
    source = open_source(spec, cache_dir)
    check_before_reading(source, spec.min_documents)  # seconds, where reading OpenWebText takes an hour
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.export-"))
    try:
        rows = _write_parts(source, tmp, rows_per_file, progress)
        count = sum(rows)
        check_min_documents(count, spec.min_documents, source.describe())
        if count == 0:
            raise DataError("prepare.source: the source yielded no (non-empty) documents")
        names = [f"part-{i:05d}-of-{len(rows):05d}.parquet" for i in range(len(rows))]
        for i, name in enumerate(names):
            os.replace(tmp / _part(i), tmp / name)
        block = {"kind": "local", "name": spec.name, "files": [str(out_dir / name) for name in names],
                 "format": "parquet", "text_field": "text", "min_documents": count}
        (tmp / BLOCK_NAME).write_text(block_text(block, source))
        record = {"format": FORMAT, "from": {**source.describe(), **source.resolved()}, "documents": count,
                  "files": [{"file": name, "rows": n, "sha256": sha256_file(tmp / name)}
                            for name, n in zip(names, rows, strict=True)],
                  "pyarrow": pa.__version__}
        (tmp / RECORD_NAME).write_text(json.dumps(record, indent=2) + "\n")
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)  # mkdtemp's 0700: the mode a plain mkdir gives
        os.replace(tmp, out_dir)  # onto a missing or empty directory only
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Export(out_dir, block, count)


def block_text(block: dict, source: Source) -> str:
    """The prepare.source block as YAML, with where it came from as a comment."""
    origin = source.describe()
    named = origin.get("dataset") or origin["name"]
    return (f"# prepare.source for the documents of {named} (kind {origin['kind']}) exported here by\n"
            f"# `ngptlab prepare --export`: put it under `prepare:` in the params file. Paths are as\n"
            f"# given to --export: relative to where `ngptlab prepare` runs, unless absolute.\n"
            + yaml.safe_dump({"source": block}, sort_keys=False, width=110))


def _part(i: int) -> str:
    return f".part-{i:05d}.parquet"


def _write_parts(source: Source, tmp: Path, rows_per_file: int, progress: bool) -> list[int]:
    """Stream the documents into parquet files of `rows_per_file` rows each (row groups of ROWS_PER_GROUP);
    returns each file's rows."""
    rows: list[int] = []
    docs = source.documents()
    with tqdm(desc=f"export {source.name}", unit="doc", disable=not progress, mininterval=0.5,
              dynamic_ncols=True) as bar:
        while True:
            part = islice(docs, rows_per_file)
            group = list(islice(part, ROWS_PER_GROUP))
            if not group:
                return rows
            path = tmp / _part(len(rows))
            n = 0
            with pq.ParquetWriter(path, SCHEMA, compression="zstd", use_dictionary=False,
                                  write_statistics=False) as writer:
                while group:
                    writer.write_table(pa.table({"text": pa.array(group, pa.string())}, schema=SCHEMA))
                    n += len(group)
                    bar.update(len(group))
                    group = list(islice(part, ROWS_PER_GROUP))
            with open(path, "rb") as f:
                os.fsync(f.fileno())
            rows.append(n)
