"""The train/val split: deterministic, seeded, one decision per document.

A document goes to validation when a seeded hash of its text falls below `val_fraction`:

    key = seed.to_bytes(8, "little", signed=True)
    data = text.encode("utf-8", "surrogatepass")
    u = int.from_bytes(blake2b(data, key=key, digest_size=8).digest(), "little") / 2**64
    split = "val" if u < val_fraction else "train"

Why a hash of the content rather than a shuffled index list:
- it streams: each document is decided on its own, without knowing the corpus size in advance (an HF
  dataset streamed with a document cap has no length up front) and without holding the corpus in memory;
- it does not depend on the order or on the other documents: adding documents to a corpus never moves an
  existing document from one split to the other;
- identical documents always land in the same split, so a duplicated article cannot leak into validation.
The share of validation documents is val_fraction in expectation, not exactly; meta.json records the counts.
Python's hash() is salted per process, so blake2b (in hashlib, stable everywhere) is used instead.
"""

from __future__ import annotations

import hashlib

_SCALE = float(1 << 64)


def is_val(text: str, val_fraction: float, seed: int) -> bool:
    """True when the document `text` belongs to the validation split (see the module docstring)."""
    data = text.encode("utf-8", "surrogatepass")  # a lone surrogate (possible in JSON) must not crash
    digest = hashlib.blake2b(data, key=_seed_key(seed), digest_size=8).digest()
    return int.from_bytes(digest, "little") / _SCALE < val_fraction


def _seed_key(seed: int) -> bytes:
    return int(seed).to_bytes(8, "little", signed=True)


def describe(val_fraction: float, seed: int) -> dict:
    """What meta.json records about the split."""
    return {
        "method": "per document: val iff blake2b-64(utf-8 text, key=seed as int64 little-endian) / 2^64 "
                  "< val_fraction",
        "val_fraction": val_fraction,
        "seed": seed,
    }
