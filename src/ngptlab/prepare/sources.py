"""Text sources, each a stream of documents (str), named by `prepare.source` in params.yaml.

kind: embedded   the default corpus (embedded.py): no keys beyond `name`.
kind: hf         an HF dataset read through `datasets.load_dataset(..., streaming=True)`:
                 dataset (id, e.g. Skylion007/openwebtext, or a local dataset directory), config (null),
                 split ("train"), text_field ("text"), max_documents (null = all), revision (null = default).
kind: local      local files through the datasets `text` / `json` / `parquet` / `csv` builders (streaming, so
                 nothing is copied into the HF cache and HF_DATASETS_OFFLINE=1 works):
                 files (list of paths or globs, relative to the working directory), format ("text"),
                 text_field ("text"; json/parquet/csv), sample_by ("document"; text only).
                 Text format: one document per file by default; `sample_by: paragraph` makes each
                 blank-line-separated paragraph a document, `sample_by: line` each line.

Any kind: min_documents (null = no floor; counts.py): prepare refuses a source that yields fewer.

Empty documents are skipped. Each source also describes itself for meta.json, including a fingerprint of
its raw input: the pinned archive hashes (embedded), the sha256 of every file in reading order (local), or
the dataset id, config, split and revision (hf: a remote dataset cannot be hashed without reading it all).
That description is cheap (it decides whether there is anything to do); what only reading can tell, the
commit an hf revision resolved to, comes from resolved() afterwards.
"""

from __future__ import annotations

import glob
import hashlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

from ngptlab.errors import DataError
from ngptlab.files import sha256_file
from ngptlab.prepare import embedded
from ngptlab.prepare.hf import import_datasets, resolved_revision
from ngptlab.settings import Source as SourceSettings


class Source(Protocol):
    name: str

    def describe(self) -> dict:
        """Everything that determines the documents, for meta.json and the no-op check (cheap to compute)."""

    def documents(self) -> Iterator[str]:
        """The documents, in a fixed order."""

    def expected_documents(self) -> int | None:
        """An upper bound for the progress bar, when one is known."""

    def resolved(self) -> dict:
        """What reading found out that describe() cannot know cheaply; call after documents() is exhausted."""


def open_source(spec: SourceSettings, cache_dir: Path) -> Source:
    """Build the source that `prepare.source` describes (validated with the params file)."""
    if spec.kind == "embedded":
        return EmbeddedSource(spec.name, cache_dir)
    if spec.kind == "hf":
        return HFSource(spec)
    return LocalSource(spec)


def fingerprint(obj: object) -> str:
    """sha256 of the canonical JSON of `obj`."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def iter_texts(ds, field: str, where: str, batch_size: int = 1000) -> Iterator[str]:
    """The non-empty strings of column `field` of a streaming dataset, read in batches (a Python dict per
    row would cost more than the JSON parsing itself on corpora of millions of short documents)."""
    for batch in ds.iter(batch_size=batch_size):
        if field not in batch:
            raise DataError(f"{where}: records have no field {field!r} (prepare.source.text_field); "
                            f"fields: {', '.join(sorted(batch))}")
        yield from (text for text in batch[field] if isinstance(text, str) and text)


class EmbeddedSource:
    def __init__(self, name: str, cache_dir: Path):
        self.name = name
        self.cache_dir = cache_dir

    def describe(self) -> dict:
        info = {"kind": "embedded", "name": self.name, **embedded.describe()}
        return {**info, "fingerprint": fingerprint(info)}

    def documents(self) -> Iterator[str]:
        yield from embedded.documents(embedded.fetch_embedded(self.cache_dir))

    def expected_documents(self) -> int | None:
        return None

    def resolved(self) -> dict:
        return {}


class HFSource:
    def __init__(self, spec: SourceSettings):
        self.name, self.dataset, self.config = spec.name, spec.dataset, spec.config  # dataset: required
        self.split, self.text_field, self.revision = spec.split, spec.text_field, spec.revision
        self.max_documents = spec.max_documents
        self._resolved: dict = {}

    def describe(self) -> dict:
        info = {"kind": "hf", "name": self.name, "dataset": self.dataset, "config": self.config,
                "split": self.split, "revision": self.revision, "text_field": self.text_field,
                "max_documents": self.max_documents}
        return {**info, "fingerprint": fingerprint(info)}

    def documents(self) -> Iterator[str]:
        datasets = import_datasets()

        where = f"HF dataset {self.dataset}" + (f" ({self.config})" if self.config else "")
        try:
            # what load_dataset(streaming=True) does, keeping the builder: its hash is the commit read
            builder = datasets.load_dataset_builder(self.dataset, self.config, revision=self.revision)
            self._resolved = resolved_revision(builder.hash, self.dataset)
            ds = builder.as_streaming_dataset(split=self.split)
            if self.max_documents is not None:
                ds = ds.take(self.max_documents)
            yield from iter_texts(ds, self.text_field, where)
        except DataError:
            raise
        except Exception as err:  # the Hub unreachable, no such dataset or split: one clear line
            hint = ""
            if "scripts are no longer supported" in str(err) and self.revision is None:
                # datasets >= 4 runs no loading scripts (OpenWebText's main branch was one); the Hub's
                # automatic parquet conversion of the same data lives on another revision
                hint = (" (prepare.source.revision: refs/convert/parquet reads the Hub's parquet export, "
                        "which covers only a dataset's first 5 GB: set prepare.source.min_documents to the "
                        "full count, or read a full download with kind: local)")
            raise DataError(f"{where}, split {self.split!r}: cannot be read: {type(err).__name__}: "
                            f"{err}{hint}") from None

    def expected_documents(self) -> int | None:
        return self.max_documents

    def resolved(self) -> dict:
        return self._resolved


class LocalSource:
    def __init__(self, spec: SourceSettings):
        self.name, self.format, self.text_field, self.sample_by = (spec.name, spec.format, spec.text_field,
                                                                   spec.sample_by)
        self.files = _expand(spec.files or ())  # the schema: files given for kind local

    def describe(self) -> dict:
        info = {"kind": "local", "name": self.name, "format": self.format, "text_field": self.text_field,
                "files": [str(p) for p in self.files]}
        if self.format == "text":
            info["sample_by"] = self.sample_by
        # the content (in reading order) and how it is read fix the documents; paths do not
        how = {k: v for k, v in info.items() if k not in ("name", "files")}
        content = [sha256_file(p) for p in self.files]
        return {**info, "fingerprint": fingerprint({**how, "content_sha256": content})}

    def documents(self) -> Iterator[str]:
        datasets = import_datasets()

        kwargs = {"sample_by": self.sample_by} if self.format == "text" else {}
        field = "text" if self.format == "text" else self.text_field
        ds = datasets.load_dataset(self.format, data_files=[str(p) for p in self.files], split="train",
                                   streaming=True, **kwargs)
        try:
            yield from iter_texts(ds, field, f"local {self.format} files {self.files[0]}...")
        except DataError:
            raise
        except Exception as err:  # a malformed json line, a parquet file that is not one
            raise DataError(f"prepare.source.files ({self.format}): cannot be read: {type(err).__name__}: "
                            f"{err}") from None

    def expected_documents(self) -> int | None:
        return None

    def resolved(self) -> dict:
        return {}


def _expand(patterns: Sequence[str]) -> list[Path]:
    """Paths and globs -> existing files, in the order given (each glob sorted), without repeats."""
    files: list[Path] = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern, recursive=True)) if glob.has_magic(pattern) else [pattern]
        matches = [m for m in matches if Path(m).is_file()]
        if not matches:
            raise DataError(f"prepare.source.files: {pattern!r} matches no file")
        files.extend(Path(m) for m in matches if Path(m) not in files)
    return files
