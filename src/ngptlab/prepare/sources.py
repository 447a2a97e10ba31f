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

Any kind: min_documents (null = no floor; counts.py): prepare refuses a source that yields fewer, before
reading it where its metadata already shows fewer (known_documents(): parquet footers, or the split sizes
an HF dataset's metadata records).

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
from ngptlab.prepare.counts import Known, parquet_rows
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

    def known_documents(self) -> Known:
        """What the metadata says about the number of documents, without reading them (counts.py)."""

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

    def known_documents(self) -> Known:
        return Known(None, "the embedded corpus is counted by reading it")

    def resolved(self) -> dict:
        return {}


class HFSource:
    def __init__(self, spec: SourceSettings):
        self.name, self.dataset, self.config = spec.name, spec.dataset, spec.config  # dataset: required
        self.split, self.text_field, self.revision = spec.split, spec.text_field, spec.revision
        self.max_documents = spec.max_documents
        self.where = f"HF dataset {self.dataset}" + (f" ({self.config})" if self.config else "")
        self._resolved: dict = {}
        self._builder = None

    def describe(self) -> dict:
        info = {"kind": "hf", "name": self.name, "dataset": self.dataset, "config": self.config,
                "split": self.split, "revision": self.revision, "text_field": self.text_field,
                "max_documents": self.max_documents}
        return {**info, "fingerprint": fingerprint(info)}

    def builder(self):
        """What load_dataset(streaming=True) starts from: the dataset's metadata and list of data files (no
        data), its hash the commit read; made once."""
        if self._builder is None:
            datasets = import_datasets()
            self._builder = datasets.load_dataset_builder(self.dataset, self.config, revision=self.revision)
        return self._builder

    def documents(self) -> Iterator[str]:
        where = self.where
        try:
            builder = self.builder()
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

    def known_documents(self) -> Known:
        """The rows in the footers of the split's data files where they are parquet (on the Hub, a ranged
        read of each file's end), else the split's size in the dataset's metadata (its card's dataset_info),
        else nothing: offline, or where the Hub cannot be reached, the builder itself cannot be made."""
        split = f"split {self.split!r} of {self.where}"
        try:
            builder = self.builder()
        except Exception as err:  # offline, no such dataset: documents() says so in full
            return Known(None, f"no metadata of {split}: {_first_line(err)}")
        files = [str(f) for f in (builder.config.data_files or {}).get(self.split, ())]
        footers = None
        if files and all(f.endswith(".parquet") for f in files):
            import fsspec  # hf:// paths: huggingface_hub's filesystem, as datasets reads them

            try:
                return Known(parquet_rows(files, fsspec.open), f"{footers_of(len(files))} of {split}")
            except Exception as err:
                footers = f"its parquet footers cannot be read: {_first_line(err)}"
        info = (builder.info.splits or {}).get(self.split)
        if info is not None and info.num_examples:
            return Known(info.num_examples, f"the num_examples of {split} in its metadata")
        return Known(None, footers or f"the metadata of {split} has no row count")

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

    def known_documents(self) -> Known:
        if self.format != "parquet":
            return Known(None, f"{self.format} files record no row count")
        try:
            rows = parquet_rows(str(p) for p in self.files)
        except Exception as err:  # not a parquet file: reading it says so in full
            return Known(None, f"the parquet footers cannot be read: {_first_line(err)}")
        return Known(rows, f"{footers_of(len(self.files))} in prepare.source.files")

    def resolved(self) -> dict:
        return {}


def footers_of(n: int) -> str:
    return "the footer of 1 parquet file" if n == 1 else f"the footers of {n} parquet files"


def _first_line(err: Exception) -> str:
    return f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"


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
