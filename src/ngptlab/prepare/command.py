"""`ngptlab prepare`: tokenize params["prepare"]["source"] into data/tokens/<name>/; with `--export DIR`,
instead write its documents as local parquet files and the prepare.source block that reads them (export.py).

Readers of the shards (training, tests) use `load_meta(source_dir)` and `verify_shards(source_dir)`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ngptlab import options
from ngptlab.prepare.cache import default_cache_dir
from ngptlab.prepare.export import BLOCK_NAME, export_source
from ngptlab.prepare.pipeline import prepare_tokens
from ngptlab.prepare.shards import load_meta, verify_shards
from ngptlab.settings import Params

__all__ = ["configure", "run", "load_meta", "verify_shards"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", default="data", metavar="DIR",
                        help="shards go to DIR/tokens/<source name>/ (default: data)")
    options.add_cache_dir(parser)
    parser.add_argument("--force", action="store_true",
                        help="rewrite the shards even when meta.json says they are up to date")
    parser.add_argument("--export", metavar="DIR",
                        help="tokenize nothing: write the source's documents as parquet files in DIR (new or "
                             "empty), and the prepare.source block (kind: local) that reads them to "
                             f"DIR/{BLOCK_NAME}; run where the source can be read (a login node with "
                             "internet), then prepare from the block where the compute runs")
    options.add_no_progress(parser)


def run(args: argparse.Namespace, params: Params) -> int:
    cache_dir = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
    if args.export:
        return export(params, Path(args.export), cache_dir, progress=not args.no_progress)
    outcome = prepare_tokens(params.prepare, Path(args.data_dir), cache_dir, force=args.force,
                             progress=not args.no_progress)
    if outcome.skipped:
        print(f"prepare: {outcome.out_dir} is up to date ({outcome.reason}); nothing to do")
        return 0
    print(f"prepare: wrote {outcome.out_dir} (ran because: {outcome.reason})")
    for name, record in outcome.meta["splits"].items():
        print(f"  {name + '.bin':9} {record['tokens']:>12,} tokens  {record['documents']:>9,} documents  "
              f"sha256 {record['sha256'][:16]}")
    return 0


def export(params: Params, out_dir: Path, cache_dir: Path, progress: bool) -> int:
    done = export_source(params.prepare.source, out_dir, cache_dir, progress=progress)
    files = done.block["files"]
    print(f"prepare: wrote {done.documents:,} documents to {len(files)} parquet files in {done.out_dir}; the "
          f"prepare.source block that reads them ({done.out_dir / BLOCK_NAME}):\n")
    print((done.out_dir / BLOCK_NAME).read_text(), end="")
    return 0
