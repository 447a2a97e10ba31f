"""`ngptlab bench <name>`: speed benchmarks that print ratios measured side by side in one run.

Each benchmark is a module `ngptlab/bench/<name>.py` with `configure(parser)` and `run(args, params) -> int`.
"""

from __future__ import annotations

import argparse
import importlib

from ngptlab import options
from ngptlab.settings import Params

BENCHMARKS = {
    "tokenize": "tokens/s and peak memory of `prepare` against a nanoGPT-style datasets.map baseline",
    "step": "median training step time of every arm against gpt at the same shape",
    "gpu": "the GPU path in one call: every arm's step (eager, compiled, bf16), a bf16-vs-fp32 training run, "
           "condition's time, DDP; tiny shapes on a CPU",
    "schedule": "wall time of training a small sweep with WSD trunks against the same sweep in cosine",
    "evaluation": "a run's final evaluation with the LM head in row chunks against the whole logits, per arm",
    "workflow": "seconds `snakemake -n` and `dvc status` take to plan a preset's grid, against their targets",
}


def configure(parser: argparse.ArgumentParser) -> None:
    benches = parser.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    for name, help_text in BENCHMARKS.items():
        sub = benches.add_parser(name, help=help_text, description=help_text)
        options.add_params(sub, inherited=True)  # also accepted after the benchmark's name
        importlib.import_module(f"ngptlab.bench.{name}").configure(sub)


def run(args: argparse.Namespace, params: Params) -> int:
    return importlib.import_module(f"ngptlab.bench.{args.benchmark}").run(args, params)
