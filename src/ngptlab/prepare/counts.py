"""How many documents a source may and must yield: prepare.source.max_documents (a cap, kind hf) and
prepare.source.min_documents (a floor, any kind).

The floor exists because a source can hold less than its name promises without any error: with datasets
>= 4 the Hub's OpenWebText loads only from its automatic parquet export (revision refs/convert/parquet),
which covers the first 5 GB, about 1M of the corpus's 8,013,769 documents. prepare counts the documents the
source yields (non-empty ones, before the train/val split) and publishes nothing when they fall short.
"""

from __future__ import annotations

from ngptlab.errors import DataError

MIN_KEY = "prepare.source.min_documents"
PARQUET_EXPORT = "refs/convert/parquet"


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
