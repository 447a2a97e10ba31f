"""How many documents a source may and must yield: prepare.source.max_documents (a cap, kind hf) and
prepare.source.min_documents (a floor, any kind).

The floor exists because a source can hold less than its name promises without any error: with datasets
>= 4 the Hub's OpenWebText loads only from its automatic parquet export (revision refs/convert/parquet),
which covers the first 5 GB, about 1M of the corpus's 8,013,769 documents. prepare counts the documents the
source yields (non-empty ones, before the train/val split) and publishes nothing when they fall short.

Reading a large corpus takes long (OpenWebText: ~40 GB of text), so the floor is checked twice: first from
what the source's metadata says before any document is read (check_before_reading: the row counts in
parquet footers, or an HF dataset's split sizes), which refuses in seconds; then, where the metadata says
enough or nothing, against the count read. A row count is an upper bound (empty rows are skipped), so only
a count below the floor is decisive before reading.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import IO, Protocol

from ngptlab.errors import DataError

MIN_KEY = "prepare.source.min_documents"
PARQUET_EXPORT = "refs/convert/parquet"


@dataclass(frozen=True)
class Known:
    """What a source's metadata says about its size before any document is read."""

    documents: int | None  # at most this many documents (rows, empty ones included); None: not known
    where: str  # what said so; or, without a count, why none is known


class Counted(Protocol):
    def describe(self) -> dict: ...

    def known_documents(self) -> Known: ...


def parquet_rows(paths: Iterable[str], open_file: Callable[..., IO[bytes]] = open) -> int:
    """The rows of parquet files from their footers alone (pyarrow reads the footer, no data page);
    `open_file` opens a path for reading (fsspec.open for a remote one)."""
    import pyarrow.parquet as pq

    total = 0
    for path in paths:
        with open_file(path, "rb") as f:
            total += pq.ParquetFile(f).metadata.num_rows
    return total


def check_before_reading(source: Counted, minimum: int | None) -> None:
    """DataError (one line) when the source's metadata shows fewer than `minimum` documents; otherwise a note
    on stderr of what it showed (or that it shows nothing, so the floor waits for the count read)."""
    if minimum is None:
        return
    known = source.known_documents()
    if known.documents is None:
        _note(f"{MIN_KEY} ({minimum:,}): no document count before reading ({known.where}); the documents "
             f"read are counted instead")
        return
    if known.documents < minimum:
        raise DataError(f"{MIN_KEY}: the source holds at most {known.documents:,} documents "
                        f"({known.where}), {minimum:,} required; refused before reading any, nothing was "
                        f"written. {_remedy(source.describe())}")
    _note(f"{MIN_KEY} ({minimum:,}): the source holds at most {known.documents:,} documents ({known.where}); "
         f"the documents read are counted too")


def _note(line: str) -> None:
    print(f"ngptlab prepare: {line}", file=sys.stderr, flush=True)


def check_min_documents(count: int, minimum: int | None, description: dict) -> None:
    """DataError (one line) when the source yielded fewer than `minimum` documents; `description` is the
    source's describe(), which says what to suggest instead."""
    if minimum is None or count >= minimum:
        return
    raise DataError(f"{MIN_KEY}: the source yielded {count:,} documents, {minimum:,} required; nothing was "
                    f"written (earlier shards are left as they were). {_remedy(description)}")


def _remedy(description: dict) -> str:
    kind = description.get("kind")
    if kind == "hf":
        revision = description.get("revision")
        if revision == PARQUET_EXPORT:
            why = f"{PARQUET_EXPORT} is the Hub's parquet export, which covers only a dataset's first 5 GB"
        else:
            why = f"revision {revision!r} holds fewer" if revision else "the default branch holds fewer"
        return (f"Set prepare.source.revision to a revision that holds the full data ({why}), or download "
                f"the full dataset and read it with kind: local (e.g. files: [\"owt/*.parquet\"], "
                f"format: parquet)")
    if kind == "local":
        return "Check that prepare.source.files lists the whole corpus, or lower min_documents"
    return "This source's corpus is fixed: lower or remove min_documents"
