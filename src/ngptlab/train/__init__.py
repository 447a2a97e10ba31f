"""The train stage: one run per (scale, context, arm, budget, learning rate, seed), resumable, DDP-ready.

Modules, from the bottom up: data (shards, eval windows), schedule (warmup + cosine, WSD), dist (torchrun
topology), threads (compute threads), progress (the record a checkpoint stores), state (resumable
checkpoints), batches (batch arithmetic, staged micro-batches), evaluation (loss on val windows), final_eval
(a run's final evaluation), outcome (how a job ended), outputs (paths, run identity, final files), trunk
(WSD trunks), restore (where a job starts), trainer (model, optimizer, one step), jobs (a run or a trunk
segment), context (what a job runs with), loop (the job, start to finish), command (`ngptlab train`).
"""
