"""`ngptlab prepare --export DIR` (ngptlab/prepare/export.py): a source's documents as sharded parquet files
and the prepare.source block (kind: local) that reads them, whose shards are the source's own; written whole
or not at all, the same bytes each time; and on the embedded corpus, offline, through the command line."""

# ruff: noqa: F811  (pytest fixtures imported from support.prepare are redefined as parameters)
from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
import yaml
from support import TEST_PARAMS, fixture_params
from support.prepare import REPO, SMALL_DOCS, prepare_cache, prepare_section, write_jsonl  # noqa: F401
from support.workflow import tree

from ngptlab.errors import DataError
from ngptlab.prepare.export import BLOCK_NAME, RECORD_NAME, ROWS_PER_FILE, export_source
from ngptlab.prepare.shards import verify_shards
from ngptlab.settings import of_section

OFFLINE_ENV = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}


def section(source: dict) -> dict:
    return {"source": source, "val_fraction": 0.25, "split_seed": 7, "batch_documents": 4, "workers": 2}


def source_of(source: dict):
    return of_section("prepare", section(source)).source


def test_the_export_reads_back_as_the_same_shards(tmp_path, prepare_cache):
    write_jsonl(tmp_path / "c.jsonl", [*SMALL_DOCS[:4], "", *SMALL_DOCS[4:]])  # the empty one is skipped
    src = {"kind": "local", "name": "corpus", "files": [str(tmp_path / "c.jsonl")], "format": "json"}
    out = tmp_path / "export"
    done = export_source(source_of(src), out, prepare_cache, rows_per_file=5, progress=False)
    names = [f"part-0000{i}-of-00003.parquet" for i in range(3)]
    assert sorted(p.name for p in out.iterdir()) == sorted([*names, BLOCK_NAME, RECORD_NAME])
    assert [pq.read_metadata(out / n).num_rows for n in names] == [5, 5, 2]
    assert [t for n in names for t in pq.read_table(out / n).column("text").to_pylist()] == SMALL_DOCS
    assert pq.read_schema(out / names[0]).names == ["text"]
    block = yaml.safe_load((out / BLOCK_NAME).read_text())["source"]
    assert block == done.block == {"kind": "local", "name": "corpus", "files": [str(out / n) for n in names],
                                   "format": "parquet", "text_field": "text", "min_documents": 12}
    record = json.loads((out / RECORD_NAME).read_text())
    assert record["documents"] == 12 and record["from"]["kind"] == "local"
    assert [f["rows"] for f in record["files"]] == [5, 5, 2]

    # preparing from the block: the shards of the source itself, byte for byte
    direct = prepare_section(section(src), tmp_path / "direct", prepare_cache, progress=False)
    exported = prepare_section(section(block), tmp_path / "exported", prepare_cache, progress=False)
    for shard in ("train.bin", "val.bin"):
        assert (direct.out_dir / shard).read_bytes() == (exported.out_dir / shard).read_bytes()
    assert verify_shards(exported.out_dir)["source"]["documents_yielded"] == 12

    # the same documents, the same bytes (but the paths the block names)
    again = export_source(source_of(src), tmp_path / "again", prepare_cache, rows_per_file=5, progress=False)
    assert {n: b for n, b in tree(again.out_dir).items() if n != BLOCK_NAME} == \
        {n: b for n, b in tree(out).items() if n != BLOCK_NAME}

    # never merged into a directory that holds anything
    before = tree(out)
    with pytest.raises(DataError, match=rf"^--export {out}: exists and is not an empty directory"):
        export_source(source_of(src), out, prepare_cache, progress=False)
    assert tree(out) == before


def test_an_export_short_of_the_floor_writes_nothing(tmp_path, prepare_cache):
    write_jsonl(tmp_path / "c.jsonl", SMALL_DOCS)
    src = {"kind": "local", "name": "few", "files": [str(tmp_path / "c.jsonl")], "format": "json",
           "min_documents": 13}
    out = tmp_path / "out" / "export"
    with pytest.raises(DataError, match=r"^prepare\.source\.min_documents: the source yielded 12 documents"):
        export_source(source_of(src), out, prepare_cache, progress=False)
    assert list((tmp_path / "out").iterdir()) == []  # no directory, no temporary left beside it


def test_export_the_embedded_corpus_offline_and_prepare_from_it(tmp_path, prepare_cache):
    """The cluster rehearsal's step 0: `ngptlab prepare --export DIR` on the tests' (embedded) params, then
    prepare from the block it printed, offline: a whole shard set of every exported document."""
    env = {**os.environ, **OFFLINE_ENV, "PYTHONPATH": str(REPO / "src")}
    ngptlab = [sys.executable, "-m", "ngptlab.cli", "prepare", "--cache-dir", str(prepare_cache),
               "--no-progress"]
    proc = subprocess.run([*ngptlab, "--params", str(TEST_PARAMS), "--export", "corpus"], cwd=tmp_path,
                          env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    block = yaml.safe_load((tmp_path / "corpus" / BLOCK_NAME).read_text())["source"]
    assert yaml.safe_load(proc.stdout.split("\n\n", 1)[1]) == {"source": block}  # printed as written
    assert block["files"] == ["corpus/part-00000-of-00001.parquet"]  # as given: relative to where it ran
    assert block["name"] == fixture_params()["prepare"]["source"]["name"]
    assert 4000 < block["min_documents"] < 5000  # ~800 scenes and poems + ~3,790 articles

    params = fixture_params()
    params["prepare"]["source"] = block
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    proc = subprocess.run([*ngptlab, "--params", "params.yaml"], cwd=tmp_path, env=env, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    meta = verify_shards(tmp_path / "data" / "tokens" / block["name"])
    assert sum(meta["splits"][s]["documents"] for s in ("train", "val")) == block["min_documents"]
    assert meta["source"]["kind"] == "local" and meta["splits"]["train"]["tokens"] > 4_000_000


def test_the_data_page_states_the_export_as_the_code_writes_it():
    page = (REPO / "docs" / "pipeline" / "prepare.md").read_text()
    assert f"{ROWS_PER_FILE:,} documents each" in page
    assert "ngptlab prepare --export DIR --params FILE" in page
    assert f"`DIR/{BLOCK_NAME}`" in page and f"`DIR/{RECORD_NAME}`" in page
