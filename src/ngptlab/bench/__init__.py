"""Benchmarks: scripts that print speed ratios measured side by side, never timed tests (the machines are
shared and noisy). `ngptlab bench <name>`, one module each:

  command.py     the dispatch           step.py       a training step of each arm against gpt
  tokenize.py    prepare against a nanoGPT-style baseline
  evaluation.py  the final evaluation in row chunks against whole logits
  schedule.py    a WSD sweep against the same sweep in cosine
  workflow.py    `snakemake -n` and `dvc status` on a preset's grid
  gpu.py         the GPU path in one call: gpu_steps.py (step times, memory), gpu_runs.py (train and condition
                 runs), gpu_path.py (the presets' path), checks.py (verdicts), gpu_report.py (the report)
  before.py      nGPT as computed before the speed work, for `bench step --before`
"""
