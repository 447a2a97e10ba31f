"""`ngptlab plan`: the grid a params file describes, its size, cost and lineage, and the edits that grow it.

  command.py    the command                     printout.py   the plan printed
  estimate.py   each job's size and cost        memory.py     peak memory of a training process
  checkpointing.py  which runs checkpoint activations (train.activation_checkpointing), for plan and train
  runtime.py    every job's Slurm time limit    storage.py    what a grid keeps on disk
  sharing.py    what WSD trunks save            protocol.py   the projected cost of train.protocol
  closure.py    a stage's code: the import closure of its command, fingerprinted
  lineage.py    every job's lineage key: its settings (by the schema's classes), code and upstream keys
  grid.py       results/plan.json, the resolved grid and keys dvc.yaml reads
  gridfile.py   writing it (--write)
  dvcyaml.py    the report stage's per-run inputs, written into dvc.yaml between its markers
  dvclock.py    the plan stage recorded in dvc.lock where `plan` rewrote its output
  growth.py     edits that change the grid: --set, --extend-sweeps, --prune-sweeps, --add-seeds,
                --match-angles; and --check-tuning
  tuned.py      is each sweep's best learning rate interior: --check-tuning, the refusal to grow from an edge
  edit.py       the params file edited in place, never left invalid
  linemerge.py  its lines merged, so that a line no edit changes stays as the file had it
  accept.py     --accept-code: a refactor accepted on bit-identical golden traces, recorded
  golden.py     golden traces: tiny deterministic runs through every path a grid trains, one process per tree
  extend.py prune.py seeds.py angles.py sweeps.py    the edits themselves and the finished runs they read
  replacements.py  --add-seeds' replacement seed for each held-out seed that diverged
"""
