"""One command-line language across verbs (ngptlab/options.py): every option name has one metavar in every
parser, a shared option reads the same everywhere, what a verb acts on (a run, a cell) is positional, every
verb that shows progress takes --no-progress, and no verb prints more digits than a number carries.
Seconds: nothing trains."""

from __future__ import annotations

import argparse
import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest
from support import TEST_PARAMS

from ngptlab import options
from ngptlab.cli import VERBS, main
from ngptlab.docs_reference import cli_parsers
from ngptlab.errors import ParamsError
from ngptlab.plan.closure import FactsCache, closure_files
from ngptlab.prepare.cache import CACHE_ENV

REPO = Path(__file__).resolve().parents[1]
FIXTURE = str(TEST_PARAMS.relative_to(REPO))  # the tests' params file, relative to the repository
# What shows progress: a bar (tqdm, or lm-eval's, which draws its own) or the verbs' progress lines.
PROGRESS_MODULES = ("tqdm", "lm_eval", "ngptlab.progress_lines")
# More decimals than any number a verb prints carries (a 14-digit float is a repr, not a reading).
LONG_NUMBER = re.compile(r"\d\.\d{7,}")


def options_by_name() -> dict[str, list[tuple[str, argparse.Action]]]:
    """Every option string of every parser: [(command, its action)]."""
    found = defaultdict(list)
    for command, parser in cli_parsers().items():
        for action in parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help", "--version"):
                    found[option].append((command, action))
    return found


def metavar(action: argparse.Action) -> str | None:
    """The word `--help` shows for the option's value (argparse's default: the dest in capitals)."""
    if action.nargs == 0:
        return None
    return action.metavar or action.dest.upper()


def test_every_option_name_has_one_metavar():
    differing = {option: sorted({f"{metavar(a)} ({command})" for command, a in uses})
                 for option, uses in options_by_name().items()
                 if len({metavar(a) for _, a in uses}) > 1}
    assert not differing, f"options with more than one metavar: {differing}"


def test_a_shared_option_reads_the_same_in_every_verb():
    uses = options_by_name()
    for option, shared in options.SHARED.items():
        assert uses[option], f"{option} is shared but no verb takes it"
        for command, action in uses[option]:
            assert (metavar(action), action.help) == (shared.metavar, shared.help), \
                f"`{command}` defines {option} its own way, not through ngptlab/options.py"
    assert len(uses["--params"]) == len(cli_parsers()) - 1  # every verb and benchmark; not the bare ngptlab
    assert f"${CACHE_ENV}" in options.SHARED["--cache-dir"].help


def test_a_run_or_a_cell_is_positional_wherever_a_verb_takes_one():
    subjects = {}
    for command, parser in cli_parsers().items():
        positional = [a for a in parser._actions if not a.option_strings and a.dest in options.SUBJECTS]
        for action in positional:
            subjects[command] = action.dest
            assert (action.metavar, action.help) == options.SUBJECTS[action.dest]
        for action in parser._actions:  # the options that named them before: hidden, beside the positional
            if set(action.option_strings) & {"--run", "--cell"}:
                assert action.help == argparse.SUPPRESS and positional, command
    assert subjects == {"ngptlab train": "run", "ngptlab condition": "run", "ngptlab evaluate": "cell",
                        "ngptlab speedup": "cell"}


def test_the_old_run_and_cell_options_still_name_them_with_a_note(capsys):
    parser = cli_parsers()["ngptlab condition"]
    run = options.EXAMPLE_RUN
    assert options.subject(parser.parse_args([run]), "run", "condition") == run
    assert capsys.readouterr().err == ""
    assert options.subject(parser.parse_args(["--run", run]), "run", "condition") == run
    assert capsys.readouterr().err.strip() == (f"ngptlab condition: --run is deprecated; name the run on its "
                                               f"own: ngptlab condition {run}")
    for argv in ([], [run, "--run", "cpu-4l-ctx128-ngpt-t8192-lr0.01-s0"]):
        with pytest.raises(ParamsError, match="name one run: `ngptlab condition RUN`"):
            options.subject(parser.parse_args(argv), "run", "condition")
    cell = cli_parsers()["ngptlab speedup"].parse_args(["--cell", options.EXAMPLE_CELL])
    assert options.subject(cell, "cell", "speedup") == options.EXAMPLE_CELL


def shows_progress(verb: str) -> list[str]:
    """The modules of a verb's code (its command's import closure) that import a progress bar or line."""
    cache, found = FactsCache(), []
    for path in closure_files(f"ngptlab.{verb}.command", REPO / "src", cache):
        if path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(name == m or name.startswith(f"{m}.") for name in names for m in PROGRESS_MODULES):
                found.append(path.name)
    return found


# bench runs what it times with progress off (progress=False, --no-progress): it has no progress to silence
@pytest.mark.parametrize("verb", [verb for verb in VERBS if verb != "bench"])
def test_a_verb_takes_no_progress_exactly_where_it_shows_progress(verb):
    takes = any("--no-progress" in a.option_strings for a in cli_parsers()[f"ngptlab {verb}"]._actions)
    assert takes == bool(shows_progress(verb)), (verb, shows_progress(verb))


def test_the_progress_verbs_are_the_long_ones():
    assert [verb for verb in VERBS if verb != "bench" and shows_progress(verb)] == [
        "prepare", "train", "condition", "evaluate", "design"]


@pytest.mark.parametrize("argv", [
    ["plan", "--params", FIXTURE], ["plan", "--params", "workflow/presets/settle.yaml"],
    ["design", "--params", FIXTURE, "--worlds", "1", "--jobs", "1", "--no-progress"],
    ["design", "--params", FIXTURE, "--worlds", "1", "--jobs", "1", "--no-progress",
     "--compare-policies"],
], ids=lambda argv: " ".join(argv))
def test_no_verb_prints_a_number_to_more_digits_than_it_carries(argv, capsys, monkeypatch):
    monkeypatch.chdir(REPO)  # the tests' params (.test/params.yaml) and the presets
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out and not LONG_NUMBER.findall(out)
