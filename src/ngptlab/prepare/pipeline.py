"""The prepare stage: documents -> GPT-2 tokens -> train.bin / val.bin -> meta.json, as one restartable step.

1. The inputs key (source fingerprint, tokenizer ranks, split rule, shard format) is computed without
   reading any text. If meta.json carries the same key and every .bin matches its recorded size and
   sha256, the stage does nothing and touches nothing. Otherwise a source whose metadata already shows
   fewer than prepare.source.min_documents documents is refused before any is read (counts.py).
2. Otherwise, under an exclusive lock on the output directory, documents stream in batches of
   `batch_documents`: the main thread reads a batch and assigns each document its split, then hands the
   batch to one of `workers` threads, which encodes it (tiktoken's Rust core releases the GIL, so the
   threads run in parallel; tokens come back as arrays, never as Python lists of ints) and packs it as
   uint16. Batches are appended to the temporary shards in reading order. At most workers + 2 batches of
   documents and tokens are in memory at once, whatever the corpus size.
3. Only when both shards are complete, and the source yielded at least prepare.source.min_documents
   documents (counts.py; otherwise the temporaries are deleted and anything earlier stays as it was): the
   old meta.json is removed, the shards are renamed into place, and the new meta.json is written last (see
   shards.py for why this ordering is safe against kills). meta.json's source adds what reading found out:
   the document count and, for kind hf, the commit the revision resolved to.
"""

from __future__ import annotations

import contextlib
import platform
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from itertools import islice
from pathlib import Path

import numpy as np
import tiktoken
from tqdm import tqdm

import ngptlab
from ngptlab import runlock
from ngptlab.errors import DataError
from ngptlab.prepare import split
from ngptlab.prepare.counts import MIN_KEY, check_before_reading, check_min_documents
from ngptlab.prepare.shards import (
    DTYPE,
    META_NAME,
    SPLITS,
    ShardWriter,
    load_meta,
    remove_stale_temporaries,
    verify_shards,
    write_meta,
)
from ngptlab.prepare.sources import Source, fingerprint, open_source
from ngptlab.prepare.tokenizer import (
    EOT_TOKEN,
    GPT2_RANKS_SHA256,
    VOCAB_SIZE,
    encode_ordinary_array,
    gpt2_encoding,
    tokenizer_info,
)
from ngptlab.settings import Prepare

FORMAT = "ngptlab-tokens/1"  # bump when the shard layout or meta.json meaning changes
LAYOUT = "uint16 little-endian; each document's tokens followed by one <|endoftext|> (50256), as nanoGPT"


def lock_path(out_dir: Path) -> Path:
    """Beside the token directory, not in it: the directory holds exactly what DVC should version."""
    return out_dir.with_name(f".{out_dir.name}.prepare.lock")


@dataclass(frozen=True)
class Outcome:
    out_dir: Path
    meta: dict
    skipped: bool  # True: the shards on disk already matched the inputs; nothing was written
    reason: str  # why the stage ran, or why it did not


def token_dir(data_dir: Path, name: str) -> Path:
    return Path(data_dir) / "tokens" / name


def inputs_key(source_description: dict, settings: Prepare) -> str:
    """Everything that determines the bytes of the shards; batch size and workers do not."""
    return fingerprint({
        "format": FORMAT,
        "source": source_description["fingerprint"],
        "tokenizer": GPT2_RANKS_SHA256,
        "split": split.describe(settings.val_fraction, settings.split_seed),
    })


def check_up_to_date(out_dir: Path, key: str, min_documents: int | None = None) -> tuple[dict | None, str]:
    """(meta, reason): meta when the shards on disk were made from exactly these inputs, are intact, and
    hold at least `min_documents` documents."""
    if not (out_dir / META_NAME).is_file():
        return None, f"no {out_dir / META_NAME}"
    try:
        recorded = load_meta(out_dir)
        if recorded.get("inputs_key") != key:  # cheap, so before hashing the shards
            return None, "the inputs (source, split or tokenizer) differ from those in meta.json"
        count = sum(recorded["splits"][s].get("documents", 0) for s in SPLITS)
        if min_documents is not None and count < min_documents:
            # the same inputs yield the same count, except a Hub branch that moved: read it again
            return None, f"meta.json records {count:,} documents, fewer than {MIN_KEY} {min_documents:,}"
        meta = verify_shards(out_dir)
    except DataError as err:
        return None, f"existing shards fail verification ({err})"
    return meta, "inputs and sha256 of every shard match meta.json"


def prepare_tokens(settings: Prepare, data_dir: Path, cache_dir: Path, *, force: bool = False,
                   progress: bool = True) -> Outcome:
    """Run the stage for params' prepare section; returns what is on disk afterwards (see the module
    docstring)."""
    source = open_source(settings.source, cache_dir)
    minimum = settings.source.min_documents
    out_dir = token_dir(data_dir, source.name)
    description = source.describe()
    key = inputs_key(description, settings)
    meta, reason = check_up_to_date(out_dir, key, minimum)
    if meta is not None and not force:
        return Outcome(out_dir, meta, True, reason)
    check_before_reading(source, minimum)  # seconds, where reading would take an hour

    out_dir.parent.mkdir(parents=True, exist_ok=True)  # the lock sits beside the token directory
    with _exclusive(out_dir):
        meta, reason = check_up_to_date(out_dir, key, minimum)  # a concurrent run may have just finished it
        if meta is not None and not force:
            return Outcome(out_dir, meta, True, reason)
        reason = "--force" if force else reason
        with _token_dir_kept_only_if_used(out_dir):
            meta = _rewrite(source, description, minimum, settings, out_dir, key, cache_dir, progress)
    return Outcome(out_dir, meta, False, reason)


def _rewrite(source: Source, description: dict, minimum: int | None, settings: Prepare, out_dir: Path,
             key: str, cache_dir: Path, progress: bool) -> dict:
    """Encode into temporaries and publish them (module docstring, steps 2 and 3); returns the new meta."""
    remove_stale_temporaries(out_dir)
    enc = gpt2_encoding(cache_dir)
    writers = {s: ShardWriter(out_dir / f"{s}.bin") for s in SPLITS}
    try:
        _encode(source, enc, settings, writers, progress)
        records = {s: w.close() for s, w in writers.items()}
        count = sum(r["documents"] for r in records.values())
        check_min_documents(count, minimum, description)  # before anything earlier is touched
        _check_nonempty(records, settings)
        (out_dir / META_NAME).unlink(missing_ok=True)  # from here on, no meta.json until all is in place
        for w in writers.values():
            w.publish()
    except BaseException:
        for w in writers.values():
            w.abort()
        raise
    found = {"min_documents": minimum, "documents_yielded": count, **source.resolved()}
    meta = _meta({**description, **found}, settings, enc, records, key)
    write_meta(out_dir, meta)
    return meta


def _encode(source: Source, enc: tiktoken.Encoding, settings: Prepare, writers: dict[str, ShardWriter],
            progress: bool) -> None:
    """Read batches in this thread; encode them on `workers` threads; write results in reading order."""
    bar = tqdm(total=source.expected_documents(), desc=f"prepare {source.name}", unit="doc",
               disable=not progress, mininterval=0.5, dynamic_ncols=True)
    tokens = 0
    in_flight: deque[Future] = deque()
    with bar, ThreadPoolExecutor(max_workers=settings.workers, thread_name_prefix="encode") as pool:
        for batch in _batched(source.documents(), settings.batch_documents):
            is_val = [split.is_val(doc, settings.val_fraction, settings.split_seed) for doc in batch]
            in_flight.append(pool.submit(_encode_batch, enc, batch, is_val))
            if len(in_flight) > settings.workers:  # bounded: keep every worker busy, no more
                tokens = _write(in_flight.popleft().result(), writers, bar, tokens)
        while in_flight:
            tokens = _write(in_flight.popleft().result(), writers, bar, tokens)


def _encode_batch(enc: tiktoken.Encoding, docs: list[str], is_val: list[bool]) -> dict:
    """One batch's tokens, packed per split as uint16 with an EOT after every document."""
    arrays = [encode_ordinary_array(enc, doc) for doc in docs]  # tiktoken releases the GIL while encoding
    packed = {}
    for name, want in (("train", False), ("val", True)):
        chosen = [a for a, v in zip(arrays, is_val, strict=True) if v is want]
        out = np.empty(sum(a.size for a in chosen) + len(chosen), dtype=DTYPE)
        pos = 0
        for a in chosen:
            out[pos:pos + a.size] = a
            out[pos + a.size] = EOT_TOKEN
            pos += a.size + 1
        packed[name] = (out, len(chosen))
    return packed


def _write(packed: dict, writers: dict[str, ShardWriter], bar: tqdm, tokens: int) -> int:
    """Append one batch to the shards; returns the running token count."""
    for name, (array, n_docs) in packed.items():
        writers[name].write(array, n_docs)
        tokens += array.size
        bar.update(n_docs)
    bar.set_postfix_str(f"{tokens:,} tokens", refresh=False)
    return tokens


def _batched(items: Iterable[str], n: int) -> Iterator[list[str]]:
    it = iter(items)
    while batch := list(islice(it, n)):
        yield batch


def _check_nonempty(records: dict, settings: Prepare) -> None:
    total = sum(r["documents"] for r in records.values())
    if total == 0:
        raise DataError("prepare.source: the source yielded no (non-empty) documents")
    for name, record in records.items():
        if record["documents"] == 0:
            raise DataError(f"prepare.val_fraction: {settings.val_fraction} of {total} documents left the "
                            f"{name} split empty; use more documents or another val_fraction")


def _meta(description: dict, settings: Prepare, enc: tiktoken.Encoding, records: dict, key: str) -> dict:
    return {
        "format": FORMAT,
        "layout": LAYOUT,
        "dtype": "uint16",
        "source": description,
        "tokenizer": tokenizer_info(enc),
        "vocab_size": VOCAB_SIZE,
        "split": split.describe(settings.val_fraction, settings.split_seed),
        "splits": records,
        "inputs_key": key,
        "tool_versions": tool_versions(),
        "written_with": {"batch_documents": settings.batch_documents, "workers": settings.workers},
    }


def tool_versions() -> dict:
    versions = {"ngptlab": ngptlab.__version__, "python": platform.python_version()}
    for dist in ("tiktoken", "datasets", "numpy"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return versions


@contextlib.contextmanager
def _token_dir_kept_only_if_used(out_dir: Path) -> Iterator[None]:
    """Create the token directory (under the lock); if this run created it and fails, remove it again when
    empty, so a refused source leaves no trace."""
    created = not out_dir.exists()
    out_dir.mkdir(exist_ok=True)
    try:
        yield
    except BaseException:
        if created:
            with contextlib.suppress(OSError):  # not empty: leave it
                out_dir.rmdir()
        raise


@contextlib.contextmanager
def _exclusive(out_dir: Path) -> Iterator[None]:
    """One writer per token directory, also where flock does not work across nodes (ngptlab/runlock.py)."""
    path = lock_path(out_dir)
    try:
        lock = runlock.acquire(path)
    except runlock.LockHeld as held:
        raise DataError(f"{out_dir}: another `ngptlab prepare` is writing here ({path} is locked by "
                        f"{held.holder})") from None
    with lock:
        yield
