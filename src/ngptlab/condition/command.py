"""`ngptlab condition --run RUN`: the conditioning of one trained model (condition/run.py)."""

from __future__ import annotations

import argparse
import time

from ngptlab.condition.run import condition_run, output_paths
from ngptlab.grid.enumeration import find_run
from ngptlab.settings import Params


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", required=True, help="run name, e.g. cpu-4l-ctx128-gpt-t8192-lr0.01-s0")
    parser.add_argument("--root", default=".", help="directory holding runs/ and results/ (default: .)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _kappa(value: float | str) -> str:
    """A condition number to the four digits it is read to ("inf" where singular)."""
    return value if isinstance(value, str) else f"{value:.4g}"


def run(args: argparse.Namespace, params: Params) -> int:
    spec = find_run(params, args.run)
    started = time.perf_counter()
    doc = condition_run(spec, args.root, params.condition, progress=not args.no_progress)
    head = doc["headline"]["effective"]
    seconds = time.perf_counter() - started
    print(f"{spec.name} ({doc['status']}): attention kappa median {_kappa(head['attn_condition_median'])}, "
          f"embed_in cov kappa {_kappa(head['embed_in_cov_condition'])}; {seconds:.1f} s "
          f"-> {output_paths(args.root, spec.name)[0]}")
    return 0
