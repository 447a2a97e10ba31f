"""The GPT-2 BPE encoding, exactly as tiktoken's `gpt2`, with or without tiktoken's download host.

Attempts, in order (the first that works wins):
1. tiktoken's own files already in the tiktoken cache: `gpt2` (vocab.bpe + encoder.json) or `r50k_base`.
2. tiktoken's own download of `gpt2`, when its host answers a TCP connect within a few seconds (tiktoken
   itself sets no timeout, so an unreachable host must be detected first or the run would hang).
3. The GPT-2 ranks that the openai-whisper sdist (MIT) ships as whisper/assets/gpt2.tiktoken, fetched with
   pip, checked against tiktoken's own expected sha256 for r50k_base.tiktoken, and placed in the tiktoken
   cache under the sha1 of that file's URL (tiktoken's cache key); tiktoken then loads `r50k_base` from it.

`r50k_base` and `gpt2` have the same 50,256 ranks, the same regex and the same <|endoftext|> = 50256, so
they encode identically; `check_encoding` verifies the ranks' sha256 whichever way they were loaded.
The tiktoken cache is $TIKTOKEN_CACHE_DIR when the user set it, else <ngptlab cache>/tiktoken.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
from base64 import b64encode
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import tiktoken

from ngptlab.errors import DataError
from ngptlab.files import write_bytes_atomic
from ngptlab.prepare.cache import PinnedArchive, fetch_archive, read_member
from ngptlab.vocabulary import EOT_TOKEN, VOCAB_SIZE

TIKTOKEN_HOST = "openaipublic.blob.core.windows.net"
GPT2_FILE_URLS = (
    f"https://{TIKTOKEN_HOST}/gpt-2/encodings/main/vocab.bpe",
    f"https://{TIKTOKEN_HOST}/gpt-2/encodings/main/encoder.json",
)
R50K_URL = f"https://{TIKTOKEN_HOST}/encodings/r50k_base.tiktoken"
# tiktoken's expected hash of r50k_base.tiktoken; the whisper asset is byte-identical.
GPT2_RANKS_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
HELLO_WORLD = ("Hello world", [15496, 995])

WHISPER_SDIST = PinnedArchive(
    project="openai-whisper",
    version="20250625",
    filename="openai_whisper-20250625.tar.gz",
    sha256="37a91a3921809d9f44748ffc73c0a55c9f366c85a3ef5c2ae0cc09540432eb96",
    sdist=True,
)
WHISPER_ASSET = "openai_whisper-20250625/whisper/assets/gpt2.tiktoken"
CONNECT_TIMEOUT_S = 3.0


def tiktoken_cache_dir(cache_dir: Path) -> Path:
    return Path(os.environ.get("TIKTOKEN_CACHE_DIR") or cache_dir / "tiktoken")


def cache_key(url: str) -> str:
    """tiktoken's cache file name for a URL (tiktoken.load.read_file_cached)."""
    return hashlib.sha1(url.encode()).hexdigest()


def gpt2_encoding(cache_dir: Path, allow_download: bool = True) -> tiktoken.Encoding:
    """The GPT-2 encoding, verified (see the module docstring for where it comes from)."""
    tk_cache = tiktoken_cache_dir(cache_dir)
    with _tiktoken_cache(tk_cache):
        if all((tk_cache / cache_key(url)).is_file() for url in GPT2_FILE_URLS):
            enc = _try_load("gpt2")
        elif (tk_cache / cache_key(R50K_URL)).is_file():
            enc = _try_load("r50k_base")
        elif allow_download and _host_reachable(TIKTOKEN_HOST):
            enc = _try_load("gpt2")
        else:
            enc = None
        if enc is None:  # no usable cache, no host: the ranks from the whisper sdist
            install_whisper_ranks(cache_dir, tk_cache)
            enc = tiktoken.get_encoding("r50k_base")
    check_encoding(enc)
    return enc


def install_whisper_ranks(cache_dir: Path, tk_cache: Path) -> Path:
    """Put whisper's gpt2.tiktoken into the tiktoken cache as r50k_base.tiktoken, after checking its hash."""
    sdist = fetch_archive(WHISPER_SDIST, cache_dir)
    data = read_member(sdist, WHISPER_ASSET)
    digest = hashlib.sha256(data).hexdigest()
    if digest != GPT2_RANKS_SHA256:
        raise DataError(f"{sdist}: {WHISPER_ASSET} has sha256 {digest}, expected tiktoken's "
                        f"{GPT2_RANKS_SHA256}")
    target = tk_cache / cache_key(R50K_URL)
    write_bytes_atomic(target, data)
    return target


def ranks_sha256(enc: tiktoken.Encoding) -> str:
    """sha256 of the ranks serialised in tiktoken's file format (base64 token, space, rank, newline).

    For GPT-2 this equals the sha256 of r50k_base.tiktoken, however the ranks were loaded."""
    digest = hashlib.sha256()
    for rank in range(enc.eot_token):  # the mergeable ranks are 0..50255; 50256 is <|endoftext|>
        digest.update(b64encode(enc.decode_single_token_bytes(rank)) + b" %d\n" % rank)
    return digest.hexdigest()


def check_encoding(enc: tiktoken.Encoding) -> None:
    """Raise DataError unless `enc` is GPT-2's BPE: vocabulary, <|endoftext|>, ranks and a known encoding."""
    text, expected = HELLO_WORLD
    problems = []
    if enc.n_vocab != VOCAB_SIZE or enc.eot_token != EOT_TOKEN:
        problems.append(f"n_vocab={enc.n_vocab}, eot_token={enc.eot_token}")
    elif (got := enc.encode_ordinary(text)) != expected:
        problems.append(f"{text!r} -> {got}, expected {expected}")
    elif (digest := ranks_sha256(enc)) != GPT2_RANKS_SHA256:
        problems.append(f"ranks sha256 {digest}, expected {GPT2_RANKS_SHA256}")
    if problems:
        raise DataError(f"tiktoken encoding {enc.name!r} is not GPT-2's: {problems[0]}")


def encode_ordinary_array(enc: tiktoken.Encoding, text: str) -> np.ndarray:
    """`enc.encode_ordinary(text)` as a uint32 array, without building a Python list of ints.

    tiktoken's `encode` with no special token allowed and none disallowed treats "<|endoftext|>" in the text
    as ordinary text, exactly as `encode_ordinary` does; text with lone surrogates is repaired the way
    `encode_ordinary` repairs it (tiktoken's core.py), instead of raising."""
    try:
        return enc.encode_to_numpy(text, allowed_special=set(), disallowed_special=())
    except UnicodeEncodeError:
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return enc.encode_to_numpy(text, allowed_special=set(), disallowed_special=())


def tokenizer_info(enc: tiktoken.Encoding) -> dict:
    """What meta.json records about the tokenizer."""
    return {
        "name": "gpt2",
        "loaded_as": enc.name,
        "ranks_sha256": GPT2_RANKS_SHA256,
        "eot_token": enc.eot_token,
        "library": "tiktoken",
    }


@contextlib.contextmanager
def _tiktoken_cache(path: Path) -> Iterator[None]:
    """Point tiktoken at `path` for the duration of the load (it reads the variable at call time)."""
    path.mkdir(parents=True, exist_ok=True)
    old = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(path)
    try:
        yield
    finally:
        if old is None:
            del os.environ["TIKTOKEN_CACHE_DIR"]
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = old


def _try_load(name: str) -> tiktoken.Encoding | None:
    try:
        return tiktoken.get_encoding(name)
    except Exception:  # network errors, a hash mismatch on a download: fall back to the whisper ranks
        return None


def _host_reachable(host: str, port: int = 443, timeout: float = CONNECT_TIMEOUT_S) -> bool:
    if any(os.environ.get(k) for k in ("HTTPS_PROXY", "https_proxy")):
        return True  # a proxy decides; a direct connect test would say nothing
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
