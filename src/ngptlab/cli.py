"""`ngptlab <verb>`: one subcommand per pipeline stage (prepare, train, condition, evaluate, speedup,
report) plus `plan` (validate params, list the runs), `design` (check a design on planted worlds), `bench`
(speed benchmarks) and `doctor` (what this machine runs ngptlab with).

Each verb lives in `ngptlab/<verb>/command.py`, which provides `configure(parser)` for its own options and
`run(args, params) -> int`. This module only loads and validates the params file and dispatches, so every
subcommand takes `--params FILE` and fails the same way on bad input: one line naming what is wrong. But
`doctor` gets None for params and reads its file itself: it must run where the validation's own dependency
(jsonschema) does not import.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import sys
from typing import TYPE_CHECKING

# PyTorch's CPU allocator returns every large tensor to the OS when it is freed, so each training step
# faults in its logits (tokens x 50k vocabulary, hundreds of MB) page by page again. With transparent huge
# pages for allocations over 2 MB the kernel faults in 2 MB at a time: measured here, a third less system
# time and ~20% faster CPU steps at d 64. Read by torch at its first allocation, so set before torch loads;
# an explicit setting in the environment wins.
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

from ngptlab import options  # noqa: E402
from ngptlab.errors import NgptlabError  # noqa: E402
from ngptlab.jobclock import mark_resumable  # noqa: E402

if TYPE_CHECKING:
    from ngptlab.settings import Params

VERBS = {
    "prepare": "tokenize a text source into uint16 GPT-2 BPE shards under data/tokens/<source>/",
    "train": "train one run of the grid into runs/<cell>/<run>/ and results/train/<cell>/<run>/",
    "condition": "analyse the conditioning of one run's weights into results/conditioning/",
    "evaluate": "zero-shot accuracy of a cell's selected runs through lm-evaluation-harness",
    "speedup": "estimate the token speed-up of every arm for one (scale, context) cell",
    "report": "render reports/report.md and report.html from results/",
    "plan": "validate the params file and list the runs it describes",
    "design": "check a design on planted worlds: how often its reading is right, before paying for it",
    "bench": "speed benchmarks, printed as ratios measured side by side",
    "doctor": "what this machine runs ngptlab with: torch, Python, GPUs, missing packages, MFU's peak, SDPA",
}
UNVALIDATED = {"doctor"}  # verbs whose run() gets params None: they read the file themselves, if at all


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    """The parser; only the chosen verb's module is imported (the others may pull in torch, datasets...)."""
    parser = argparse.ArgumentParser(prog="ngptlab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}",
                        help="print the installed package's version and exit")
    subparsers = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    chosen = next((arg for arg in argv if arg in VERBS), None)
    for verb, help_text in VERBS.items():
        # raw: the examples of a verb's epilog stay one command a line (options.examples)
        sub = subparsers.add_parser(verb, help=help_text, description=help_text,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
        options.add_params(sub)
        if verb == chosen:
            _command_module(verb).configure(sub)
    return parser


def version() -> str:
    """The installed distribution's version (pyproject.toml's, through the package metadata)."""
    try:
        return importlib.metadata.version("ngptlab")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _command_module(verb: str):
    return importlib.import_module(f"ngptlab.{verb}.command")


def load_params(path: str) -> Params:
    """The validated params file. Imported here, not at the top: the validation needs jsonschema, which
    `ngptlab doctor` reports on where it is missing rather than failing to start."""
    from ngptlab.config.load import load_params as load

    return load(path)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    try:
        params = None if args.verb in UNVALIDATED else load_params(args.params)
        code = int(_command_module(args.verb).run(args, params) or 0)
        mark_resumable(code)
        return code
    except NgptlabError as err:
        print(f"ngptlab {args.verb}: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader stopped early (`ngptlab plan --json | head`): not an error of ours. Point stdout at
        # devnull so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
