"""prepare.source.min_documents (a source that yields too few documents publishes nothing; one whose metadata
already shows too few is refused before reading) and what meta.json records about the data read: the
document count and, for kind hf, the revision it resolved to."""

# ruff: noqa: F811  (pytest fixtures imported from support.prepare are redefined as parameters)
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from support import fixture_params
from support.prepare import REPO, SMALL_DOCS, prepare_cache, prepare_section, write_jsonl  # noqa: F401

from ngptlab.errors import DataError
from ngptlab.prepare.counts import check_min_documents
from ngptlab.prepare.hf import resolved_revision
from ngptlab.prepare.shards import verify_shards

OFFLINE_ENV = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
REFUSED = (r"^prepare\.source\.min_documents: the source yielded {:,} documents, {:,} required; nothing was "
           r"written")
REFUSED_BEFORE = ("prepare.source.min_documents: the source holds at most {:,} documents ({}), {:,} "
                  "required; refused before reading any, nothing was written.")


def section(source: dict) -> dict:
    return {"source": source, "val_fraction": 0.25, "split_seed": 7, "batch_documents": 4, "workers": 2}


def prepare(tmp_path: Path, cache: Path, source: dict):
    """The stage in-process, into tmp_path/data."""
    return prepare_section(section(source), tmp_path / "data", cache, progress=False)


def text_files(folder: Path, docs: list[str]) -> str:
    """One document per file (kind local, format text); returns the glob that reads them in order."""
    folder.mkdir(exist_ok=True)
    for old in folder.glob("*.txt"):
        old.unlink()
    for i, doc in enumerate(docs):
        (folder / f"doc{i:02d}.txt").write_text(doc)
    return str(folder / "*.txt")


def prepare_cli(tmp_path: Path, prepare: dict, cache: Path) -> subprocess.CompletedProcess:
    """`ngptlab prepare` offline in tmp_path, over the tests' params (TEST_PARAMS) with this prepare section
    (this checkout's code, whatever the environment's PYTHONPATH)."""
    params = fixture_params()
    params["prepare"] = prepare
    params["train"]["source"] = prepare["source"]["name"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return subprocess.run([sys.executable, "-m", "ngptlab.cli", "prepare", "--params", "params.yaml",
                           "--data-dir", "data", "--cache-dir", str(cache), "--no-progress"],
                          cwd=tmp_path, env={**os.environ, **OFFLINE_ENV, "PYTHONPATH": str(REPO / "src")},
                          capture_output=True, text=True)


def parquet_files(folder: Path, parts: list[list[str]]) -> list[str]:
    """One parquet file (a `text` column) per part, written by pyarrow; returns their paths in order."""
    folder.mkdir(exist_ok=True)
    paths = []
    for i, docs in enumerate(parts):
        path = folder / f"part-{i}.parquet"
        pq.write_table(pa.table({"text": docs}), path)
        paths.append(str(path))
    return paths


def scramble_data_pages(path: str) -> None:
    """Overwrite every byte between the leading magic and the footer: the footer (row counts, schema) stays
    readable, any data page read fails."""
    data = bytearray(Path(path).read_bytes())
    footer = int.from_bytes(data[-8:-4], "little")
    data[4:len(data) - 8 - footer] = b"\xff" * (len(data) - 12 - footer)
    Path(path).write_bytes(bytes(data))


def snapshot(out_dir: Path) -> dict:
    """Every file's bytes, inode and mtime: what "left untouched" means."""
    return {p.name: (p.read_bytes(), p.stat().st_ino, p.stat().st_mtime_ns)
            for p in sorted(out_dir.iterdir())}


def test_too_few_documents_is_refused_in_one_line_and_writes_nothing(tmp_path, prepare_cache):
    files = text_files(tmp_path / "texts", SMALL_DOCS)
    proc = prepare_cli(tmp_path, section({"kind": "local", "name": "few", "files": [files], "format": "text",
                                          "min_documents": 13}), prepare_cache)
    assert proc.returncode == 2
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("ngptlab prepare: error: prepare.source.min_documents: the source yielded 12 "
                           "documents, 13 required; nothing was written")
    assert "prepare.source.files" in line
    # text files carry no count: prepare says so, and counts what it reads
    assert ("prepare.source.min_documents (13): no document count before reading (text files record no row "
            "count); the documents read are counted instead") in proc.stderr
    # no token directory, no temporaries; only the lock file beside where the directory would be
    assert [p.name for p in (tmp_path / "data" / "tokens").iterdir()] == [".few.prepare.lock"]


def test_local_parquet_below_the_floor_is_refused_from_its_footers_before_reading(tmp_path, prepare_cache):
    files = parquet_files(tmp_path / "pq", [SMALL_DOCS[:7], SMALL_DOCS[7:]])
    for path in files:  # reading any document would now fail: the refusal reads none
        scramble_data_pages(path)
    src = {"kind": "local", "name": "owt", "files": files, "format": "parquet", "min_documents": 13}
    proc = prepare_cli(tmp_path, section(src), prepare_cache)
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("ngptlab prepare: error: " + REFUSED_BEFORE.format(
        12, "the footers of 2 parquet files in prepare.source.files", 13)), line
    assert "prepare.source.files lists the whole corpus" in line
    assert not (tmp_path / "data").exists()  # refused before the lock, the tokenizer or any shard
    # at the floor the footers let it through, to read the documents: here it fails on the scrambled pages
    proc = prepare_cli(tmp_path, section({**src, "min_documents": 12}), prepare_cache)
    assert proc.returncode == 2 and "prepare.source.files (parquet): cannot be read" in proc.stderr
    # and with the pages whole it proceeds, the footers' count noted, the count read checked too
    parquet_files(tmp_path / "pq", [SMALL_DOCS[:7], SMALL_DOCS[7:]])
    proc = prepare_cli(tmp_path, section({**src, "min_documents": 12}), prepare_cache)
    assert proc.returncode == 0, proc.stderr
    assert ("prepare.source.min_documents (12): the source holds at most 12 documents (the footers of 2 "
            "parquet files in prepare.source.files); the documents read are counted too") in proc.stderr
    meta = verify_shards(tmp_path / "data" / "tokens" / "owt")
    assert meta["source"]["documents_yielded"] == 12


def test_a_row_count_is_only_an_upper_bound(tmp_path, prepare_cache):
    """Empty rows count in a footer but are skipped when read: enough rows, too few documents, is refused
    after reading, as before."""
    files = parquet_files(tmp_path / "pq", [[*SMALL_DOCS, ""]])
    src = {"kind": "local", "name": "rows", "files": files, "format": "parquet", "min_documents": 13}
    with pytest.raises(DataError, match=REFUSED.format(12, 13)):
        prepare(tmp_path, prepare_cache, src)


def test_an_hf_source_without_metadata_here_says_so_and_counts_what_it_reads(tmp_path, prepare_cache):
    # no Hub here: neither its metadata nor its documents can be read; the floor waits, and the read fails
    src = {"kind": "hf", "name": "owt", "dataset": "Skylion007/openwebtext",
           "revision": "refs/convert/parquet", "min_documents": 8013769}
    proc = prepare_cli(tmp_path, section(src), prepare_cache)
    assert proc.returncode == 2
    assert ("prepare.source.min_documents (8,013,769): no document count before reading (no metadata of "
            "split 'train' of HF dataset Skylion007/openwebtext: ConnectionError") in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "ngptlab prepare: error: HF dataset Skylion007/openwebtext, split 'train': cannot be read")


def test_a_refused_rerun_leaves_the_earlier_shards_byte_identical(tmp_path, prepare_cache):
    files = text_files(tmp_path / "texts", SMALL_DOCS)
    src = {"kind": "local", "name": "keep", "files": [files], "format": "text", "min_documents": 12}
    first = prepare(tmp_path, prepare_cache, src)
    before = snapshot(first.out_dir)
    # the same inputs with a higher floor: the shards on disk are not "up to date" for it, and a rerun
    # refuses
    with pytest.raises(DataError, match=REFUSED.format(12, 13)):
        prepare(tmp_path, prepare_cache, {**src, "min_documents": 13})
    assert snapshot(first.out_dir) == before
    # fewer documents than before, under the old floor
    text_files(tmp_path / "texts", SMALL_DOCS[:7])
    with pytest.raises(DataError, match=REFUSED.format(7, 12)):
        prepare(tmp_path, prepare_cache, src)
    assert snapshot(first.out_dir) == before
    assert verify_shards(first.out_dir) == first.meta


def test_a_source_that_meets_the_floor_records_it_and_the_count(tmp_path, prepare_cache):
    # an empty document is skipped before counting: 12 documents, not 13
    files = text_files(tmp_path / "texts", [*SMALL_DOCS[:5], "", *SMALL_DOCS[5:]])
    src = {"kind": "local", "name": "enough", "files": [files], "format": "text", "min_documents": 12}
    outcome = prepare(tmp_path, prepare_cache, src)
    assert not outcome.skipped
    meta = verify_shards(outcome.out_dir)
    assert meta["source"]["min_documents"] == 12 and meta["source"]["documents_yielded"] == 12
    assert sum(meta["splits"][s]["documents"] for s in ("train", "val")) == 12
    assert prepare(tmp_path, prepare_cache, src).skipped
    # without a floor the count is still recorded
    meta = prepare(tmp_path, prepare_cache, {**src, "name": "nofloor", "min_documents": None}).meta
    assert meta["source"]["min_documents"] is None and meta["source"]["documents_yielded"] == 12


def test_a_cap_below_the_floor_is_refused_before_reading(tmp_path, prepare_cache):
    src = {"kind": "hf", "name": "capped", "dataset": str(tmp_path / "absent"), "max_documents": 5,
           "min_documents": 10}
    # the params file is refused as it is loaded: the stage never starts, nothing is written
    proc = prepare_cli(tmp_path, section(src), prepare_cache)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].startswith(
        "ngptlab prepare: error: params.yaml: prepare.source.max_documents (5) is below "
        "prepare.source.min_documents (10)")
    proc = prepare_cli(tmp_path, section({**src, "min_documents": 0}), prepare_cache)
    assert proc.returncode == 2 and "prepare.source.min_documents: 0 must be >= 1" in proc.stderr
    assert not (tmp_path / "data").exists()


def test_the_refusal_names_the_way_out_for_each_kind():
    def message(description: dict) -> str:
        with pytest.raises(DataError) as err:
            check_min_documents(1_003_000, 8_013_769, description)
        return str(err.value)

    parquet = message({"kind": "hf", "revision": "refs/convert/parquet"})
    assert parquet.startswith("prepare.source.min_documents: the source yielded 1,003,000 documents, "
                              "8,013,769 required")
    assert "parquet export" in parquet and "kind: local" in parquet and "format: parquet" in parquet
    assert "the default branch holds fewer" in message({"kind": "hf", "revision": None})
    assert "lower or remove min_documents" in message({"kind": "embedded"})
    assert all("\n" not in message({"kind": k}) for k in ("hf", "local", "embedded"))
    check_min_documents(12, 12, {"kind": "local"})  # exactly enough passes
    check_min_documents(0, None, {"kind": "local"})


# ----------------------------------------------------------------------------------------------------------
# The revision an hf source resolved to


def test_hf_over_a_local_dataset_directory_records_why_there_is_no_commit(tmp_path, prepare_cache):
    dataset = tmp_path / "my-dataset"
    dataset.mkdir()
    pd.DataFrame({"text": SMALL_DOCS}).to_parquet(dataset / "train-00000.parquet")
    src = {"kind": "hf", "name": "hfdir", "dataset": str(dataset), "split": "train", "min_documents": 12}
    proc = prepare_cli(tmp_path, section(src), prepare_cache)  # offline, as a real run would be
    assert proc.returncode == 0, proc.stderr
    recorded = verify_shards(tmp_path / "data" / "tokens" / "hfdir")["source"]
    assert recorded["revision"] is None  # the requested revision, as given
    assert recorded["resolved_revision"] is None
    assert "local dataset directory" in recorded["resolved_revision_reason"]
    assert isinstance(recorded["datasets_hash"], str) and recorded["datasets_hash"]
    assert recorded["documents_yielded"] == 12 and recorded["min_documents"] == 12
    # the no-op check does not need the resolved revision: a rerun reads nothing
    assert prepare(tmp_path, prepare_cache, src).skipped
    # a higher floor: the footers of the dataset's parquet files refuse it before reading
    for path in dataset.glob("*.parquet"):
        scramble_data_pages(str(path))
    with pytest.raises(DataError) as refused:
        prepare(tmp_path, prepare_cache, {**src, "min_documents": 13})
    assert str(refused.value).startswith(REFUSED_BEFORE.format(
        12, f"the footer of 1 parquet file of split 'train' of HF dataset {dataset}", 13))
    assert "prepare.source.revision" in str(refused.value) and "kind: local" in str(refused.value)


def test_a_hub_builder_hash_is_the_commit():
    sha = "0123456789abcdef0123456789abcdef01234567"
    assert resolved_revision(sha, "Skylion007/openwebtext") == {"resolved_revision": sha}
    cached = resolved_revision("auto", "Skylion007/openwebtext")  # datasets' offline fallback to its cache
    assert cached["resolved_revision"] is None and "'auto'" in cached["resolved_revision_reason"]


def test_presets_reading_openwebtext_pin_a_revision_and_its_full_count():
    """The Hub's parquet export holds about an eighth of OpenWebText: a preset that reads it from the Hub pins
    its revision and asks for all it caps, and one that reads the whole corpus from disk (step 0 of
    docs/cluster.md) asks for all 8,013,769 documents, so that prepare refuses a partial source."""
    sources = {p.stem: yaml.safe_load(p.read_text())["prepare"]["source"]
               for p in sorted((REPO / "workflow" / "presets").glob("*.yaml"))}
    hub = {name: s for name, s in sources.items() if s.get("dataset") == "Skylion007/openwebtext"}
    disk = {name: s for name, s in sources.items() if s["kind"] == "local" and s["name"] == "openwebtext"}
    assert set(hub) == {"small"} and set(disk) == {"paper", "pilot", "settle"}
    for name, source in hub.items():
        assert source.get("revision"), name
        assert source.get("min_documents") == source.get("max_documents", 8_013_769), name
    for name, source in disk.items():
        assert source["min_documents"] == 8_013_769 and source["format"] == "parquet", name
