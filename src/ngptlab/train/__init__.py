"""The train stage: one run per (scale, context, arm, budget, learning rate, seed), resumable, DDP-ready.

Modules: data (shards, batches, eval windows), schedule (warmup + cosine), state (resumable checkpoints),
dist (torchrun topology), throughput (MFU), outputs (paths, run identity, final files), loop (the run).
"""
