"""`ngptlab condition RUN`: the conditioning of one trained model (condition/run.py)."""

from __future__ import annotations

import argparse
import time

from ngptlab import options
from ngptlab.condition.run import condition_run, output_paths
from ngptlab.grid.enumeration import find_run
from ngptlab.settings import Params


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = options.examples(f"ngptlab condition {options.EXAMPLE_RUN}")
    options.add_subject(parser, "run")
    options.add_root(parser)
    options.add_no_progress(parser)


def _kappa(value: float | str) -> str:
    """A condition number to the four digits it is read to ("inf" where singular)."""
    return value if isinstance(value, str) else f"{value:.4g}"


def run(args: argparse.Namespace, params: Params) -> int:
    spec = find_run(params, options.subject(args, "run", "condition"))
    started = time.perf_counter()
    doc = condition_run(spec, args.root, params.condition, progress=not args.no_progress)
    head = doc["headline"]["effective"]
    seconds = time.perf_counter() - started
    print(f"{spec.name} ({doc['status']}): attention kappa median {_kappa(head['attn_condition_median'])}, "
          f"embed_in cov kappa {_kappa(head['embed_in_cov_condition'])}; {seconds:.1f} s "
          f"-> {output_paths(args.root, spec.name)[0]}")
    return 0
