"""Benchmarks: scripts that print speed ratios measured side by side, never timed tests (the machines are
shared and noisy). `ngptlab bench <name>`, one module each:

  command.py     the dispatch           step.py       a training step of each arm against gpt
  tokenize.py    prepare against a nanoGPT-style baseline
  evaluation.py  the final evaluation in row chunks against whole logits
  schedule.py    a WSD sweep against the same sweep in cosine
  workflow.py    `snakemake -n` and `dvc status` on a preset's grid
  gpu.py         the GPU path in parts (gpu_parts.py: their order and estimate; gpu_sizes.py: their shapes;
                 gpu_doc.py: the JSON across calls): gpu_steps.py (step times), gpu_runs.py (first-light,
                 bf16, ddp and condition runs), gpu_memory.py (every preset arm's peak), gpu_angles.py (the
                 angle arms' angle), gpu_path.py (the presets' path), checks.py (verdicts), gpu_report.py
  before.py      nGPT as computed before the speed work, for `bench step --before`
"""
