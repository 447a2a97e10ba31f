"""`ngptlab evaluate CELL`: zero-shot accuracy of a cell's selected runs, through lm-eval
(evaluate/cell.py); exit 75 when the job's clock stopped it with runs left for the next job."""

from __future__ import annotations

import argparse
import sys
import time

from ngptlab import options
from ngptlab.evaluate import partial
from ngptlab.evaluate.cell import evaluate_cell, output_path
from ngptlab.jobclock import EXIT_RESUMABLE
from ngptlab.settings import Params


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = options.examples(f"ngptlab evaluate {options.EXAMPLE_CELL}")
    options.add_subject(parser, "cell")
    options.add_root(parser)
    options.add_no_progress(parser)


def run(args: argparse.Namespace, params: Params) -> int:
    started = time.perf_counter()
    args.cell = options.subject(args, "cell", "evaluate")
    outcome = evaluate_cell(params, args.cell, args.root, progress=not args.no_progress)
    if outcome.document is None:
        print(f"{args.cell}: stopped by the job's clock (train.max_job_minutes or the Slurm time limit): "
              f"{outcome.done} of {outcome.done + outcome.remaining} runs done, {outcome.remaining} remain, "
              f"the done ones kept under "
              f"{partial.partial_dir(args.root, args.cell)}; rerun to continue (exit {EXIT_RESUMABLE})",
              file=sys.stderr, flush=True)
        return EXIT_RESUMABLE
    doc = outcome.document
    print(f"{args.cell}: {len(doc['runs'])} runs evaluated on {', '.join(doc['tasks'])} "
          f"({outcome.reused} reused from an earlier job), {len(doc['holes'])} holes; "
          f"{time.perf_counter() - started:.1f} s -> {output_path(args.root, args.cell)}")
    return 0
