"""The options several verbs share, each defined once: one name, one metavar, one help text, so that
`--root DIR` or `--no-progress` reads the same in every `--help` (tests/test_cli.py walks every parser and
fails on an option name with two metavars, or a shared option with a help of its own).

What a verb acts on is positional and named the same way everywhere: `ngptlab train RUN`,
`ngptlab condition RUN`, `ngptlab evaluate CELL`, `ngptlab speedup CELL`. The options `--run` and `--cell`
that named them before still work, hidden from `--help`, with a note on stderr.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from ngptlab.errors import ParamsError

# A run and a cell of the default grid (params.yaml), for the examples: tests/test_docs.py checks that every
# example names one.
EXAMPLE_RUN = "cpu-4l-ctx128-gpt-t8192-lr0.01-s0"
EXAMPLE_CELL = "cpu-4l-ctx128"


@dataclass(frozen=True)
class Shared:
    """One shared option: its metavar (None: a flag) and its help."""

    metavar: str | None
    help: str


SHARED = {
    "--params": Shared("FILE", "the experiment file (default: params.yaml)"),
    "--root": Shared("DIR", "the project directory, holding data/, runs/, results/ and src/ (default: .)"),
    "--no-progress": Shared(None, "no progress bars or progress lines on stderr (what a log file wants)"),
    "--json": Shared(None, "print the result as JSON on stdout instead of a table"),
    "--cache-dir": Shared("DIR", "downloaded archives and the tiktoken cache (default: $NGPTLAB_CACHE or "
                                 "data/cache)"),
    "--arms": Shared("ARM", "arms to time (default: train.arms)"),
}

# What a verb acts on: the positional argument, and the hidden option that named it before.
SUBJECTS = {
    "run": ("RUN", f"a run of the grid, as `ngptlab plan` lists it, e.g. {EXAMPLE_RUN}"),
    "cell": ("CELL", f"a scale x context cell of the grid, e.g. {EXAMPLE_CELL}"),
}


def examples(*commands: str) -> str:
    """A verb's epilog: its example commands, one a line (a `# ...` after one explains it), for a parser
    that keeps its epilog's lines (cli.py: RawDescriptionHelpFormatter)."""
    return "examples:\n" + "\n".join(f"  {command}" for command in commands)


def add_params(parser: argparse.ArgumentParser, *, inherited: bool = False) -> None:
    """`--params FILE`; `inherited`: a nested parser's (bench's benchmarks), which keeps the value given
    before its name when absent after it."""
    default = argparse.SUPPRESS if inherited else "params.yaml"
    _add(parser, "--params", default=default)


def add_root(parser: argparse.ArgumentParser) -> None:
    _add(parser, "--root", default=".")


def add_no_progress(parser: argparse.ArgumentParser) -> None:
    _add(parser, "--no-progress", action="store_true")


def add_json(parser: argparse.ArgumentParser) -> None:
    _add(parser, "--json", action="store_true")


def add_cache_dir(parser: argparse.ArgumentParser) -> None:
    _add(parser, "--cache-dir", default=None)


def add_arms(parser: argparse.ArgumentParser) -> None:
    _add(parser, "--arms", nargs="+")


def _add(parser: argparse.ArgumentParser, option: str, **kwargs) -> None:
    shared = SHARED[option]
    if shared.metavar is not None:
        kwargs["metavar"] = shared.metavar
    parser.add_argument(option, help=shared.help, **kwargs)


class _Renamed(argparse.Action):
    """An option that was renamed: using it fails, naming the new one."""

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(f"{option_string} is now {self.const}")


def add_renamed(parser: argparse.ArgumentParser, old: str, new: str, metavar: str | None = None) -> None:
    """A hidden `old` option that fails with a pointer to `new` (a sentence: the option and what it does)."""
    parser.add_argument(old, action=_Renamed, const=new, metavar=metavar, help=argparse.SUPPRESS)


def add_subject(parser: argparse.ArgumentParser, kind: str) -> None:
    """The positional RUN or CELL a verb acts on (`kind`: "run" or "cell"), and the hidden `--run`/`--cell`
    that named it before; subject() reads whichever was given."""
    metavar, help_text = SUBJECTS[kind]
    parser.add_argument(kind, nargs="?", metavar=metavar, help=help_text)
    parser.add_argument(f"--{kind}", dest=f"{kind}_option", metavar=metavar, help=argparse.SUPPRESS)


def subject(args: argparse.Namespace, kind: str, verb: str) -> str:
    """The run or cell named on the command line: the positional one, or the deprecated option (noted on
    stderr); exactly one."""
    positional, option = getattr(args, kind), getattr(args, f"{kind}_option")
    metavar = SUBJECTS[kind][0]
    if positional and option and positional != option or not (positional or option):
        raise ParamsError(f"name one {kind}: `ngptlab {verb} {metavar}`")
    if option and not positional:
        print(f"ngptlab {verb}: --{kind} is deprecated; name the {kind} on its own: "
              f"ngptlab {verb} {option}", file=sys.stderr)
    return positional or option
