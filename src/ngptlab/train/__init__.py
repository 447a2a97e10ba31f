"""The train stage: one run per (scale, context, arm, budget, learning rate, seed), resumable, DDP-ready.

Modules, from the bottom up:

data.py        token shards, training batches and validation windows
dist.py        the process topology: one process, or one of several under torchrun
nccl_env.py    the NCCL, torch-NCCL and gloo settings a rank sees, for its log line
torchrun_args.py  the torchrun options launch.sh passes where the installed torch's torchrun has them
threads.py     the CPU threads a training process computes with
progress.py    how far a job has come: the record a checkpoint stores
identity.py    what a job is made from, as the lineage reads it; checked before it resumes or is done
state.py       resumable checkpoints, without pickle
batches.py     a step's batch arithmetic and its staged micro-batches
evaluation.py  a model's loss on val windows, with its standard error
final_eval.py  a run's final evaluation
attention.py   which attention kernel a run uses, and a second try after a non-finite step
nonfinite.py   a step's gradients, computed again on another kernel if the first were not finite
throughput.py  model FLOPs utilisation, and the device's peak it divides by
timing.py      step times that measure training, not compilation
stop.py        when a job stops early: a signal, or divergence
job_limit.py   a job that stops by its own clock before its time limit
execution.py   the settings of how a job runs, never of what it makes (recorded in its timing file)
outcome.py     how a job ended: what its outputs record
outputs.py     a run's paths, whether it is done, its final outputs
trunk.py       WSD trunks: segment jobs, kept states, where a branch starts
restore.py     where a job starts (rank 0 reads, every rank starts there)
angle_targets.py  the angle per step an angle arm turns at: measured (train.angles) or a prior
trainer.py     the seeded model, AdamW with the arm's recipe, one step, the eval windows
jobs.py        a run or a trunk segment: what differs between the two
context.py     what a job runs with, fixed before its first step
log.py         what a job prints: one line per start, evaluation and end
loop.py        the job, start to finish
command.py     `ngptlab train`

What a run observes of its own weights at its evaluation points is ngptlab.observe (shared with condition).
"""
