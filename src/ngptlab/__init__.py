"""ngptlab: does the normalized transformer (nGPT) train faster, and is conditioning why?

The stages, one package each, in the order the data flows (the Snakemake rule, dvc stage, params section and
`ngptlab <verb>` of the same name):
  prepare/    text -> GPT-2 BPE token shards
  train/      one run of the grid (or a WSD trunk segment)
  condition/  the conditioning of a run's weights
  speedup/    the token speed-up of every arm in a cell, and its reading
  evaluate/   zero-shot accuracy of a cell's selected runs
  report/     everything, rendered
Beside them: plan/ (`ngptlab plan`: costs, lineage keys, growing grids), design/ (planted worlds), bench/
(speed benchmarks), doctor/ (what a machine runs ngptlab with), workflow/ (the grid as Snakemake's rules see
it), cli.py (the `ngptlab` command), options.py (the options verbs share, each defined once),
progress_lines.py (a long verb's progress on stderr), docs_reference.py (the guide's reference pages,
generated from the schema and the parsers; no stage's code).

What they share, from the bottom floor up:
  errors.py files.py layout.py jobclock.py device.py   errors; atomic files; every path; a job's clock; the
                                                        compute device
  vocabulary.py   the GPT-2 encoding's sizes (prepare checks them, plan sizes by them)
  settings/   the params file as typed, frozen settings      config/   loading, validating, the keys' classes
  batch.py schedule.py checkpoint_cost.py weight_dtype.py    batch arithmetic; the learning-rate schedule;
                                                             what a resume checkpoint costs; weight storage
  models/ grid/ observe/    the arms; the grid's runs and cells; what training and condition both measure
  sample_size.py stats.py paper/    seeds needed; intervals; the nGPT paper's numbers, each cited
  results.py checkpoint.py revision.py runlock.py tensorboard_view.py    reading train outputs; loading a
      checkpoint; the code revision; one process per run; a run's curves as TensorBoard events
"""
__version__ = "0.1.0"
