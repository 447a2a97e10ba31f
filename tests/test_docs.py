"""The documentation against the code: the generated reference pages cover every params key and every verb
and option, the README stays a front page whose arm table is the registry's, every run or cell an example
names (README, docs/, the `--help` texts) is one of the default grid's, and `ngptlab --version` prints the
package's version. The strict MkDocs build itself runs in .ci/run (`make docs`). Seconds: nothing trains."""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import io
import re
import shlex
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest

from ngptlab import weight_dtype as weight_dtypes
from ngptlab.cli import VERBS, build_parser, main
from ngptlab.config.load import load_params
from ngptlab.docs_reference import (
    ARM_TABLE_MARK,
    README_BEGIN,
    arm_table,
    cli_parsers,
    cli_reference,
    params_reference,
    readme_with_arm_table,
)
from ngptlab.errors import ParamsError
from ngptlab.grid.enumeration import enumerate_cells, enumerate_runs, find_run
from ngptlab.grid.runs import parse_run_name
from ngptlab.models import arms
from ngptlab.settings.roles import roles

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").rglob("*.md"))
README_MAX_LINES = 200

# A run or cell name as an example writes it: `<scale>-ctx<context>[-bf16][-<arm>-t...-lr...-s...[-wsd]]`
# (placeholders such as `<scale>-ctx<context>` are not names and do not match).
NAME = re.compile(r"(?<![\w<>/.-])[A-Za-z0-9][\w.-]*-ctx\d+[\w.-]*")
CELL = re.compile(r"^(?P<cell>[A-Za-z0-9][\w.-]*?-ctx\d+(?:-bf16)?)(?:\.\w+)?$")

# A command as an example writes it: in backticks, or on a line of a code block or of a `--help`'s examples
# (options.examples), up to its end or the comment that explains it.
VERB = "|".join(VERBS)
SPAN = re.compile(rf"`(ngptlab (?:{VERB})(?![\w:-])[^`]*)`")
CODE_LINE = re.compile(rf"^(?: {{2}}| {{4}}|\t)?(ngptlab (?:{VERB})(?![\w:-])[^#\n]*)", re.M)
# A word that stands for a value (FILE, N, <preset>, [K]): the command is a template, not one to run.
PLACEHOLDER = re.compile(r"^([A-Z][A-Z_]*|.*[<\[].*)$")


@cache
def default_grid() -> tuple[frozenset[str], frozenset[str]]:
    """The default params.yaml's run and cell names; a bf16 name counts when its fp32 twin is in the grid (the
    weight-dtype axis on the default grid: docs/pipeline/train.md's example)."""
    params = load_params(REPO / "params.yaml")
    runs = enumerate_runs(params)
    names = {run.name for run in runs} | {replace(run, weight_dtype=weight_dtypes.BF16).name for run in runs}
    cells = set(enumerate_cells(params)) | {f"{cell}-bf16" for cell in enumerate_cells(params)}
    return frozenset(names), frozenset(cells)


def names_outside_the_grid(text: str) -> list[str]:
    runs, cells = default_grid()
    outside = []
    for token in NAME.findall(text):
        token = token.rstrip(".")
        try:
            parse_run_name(token)
        except ParamsError:
            cell = CELL.match(token)
            if not (cell and cell["cell"] in cells):
                outside.append(token)
            continue
        if token not in runs:
            outside.append(token)
    return outside


def test_every_params_key_is_in_the_generated_reference():
    page = params_reference()
    missing = [role.key for role in roles() if f"| `{role.key}` |" not in page]
    assert not missing, f"params keys missing from docs/reference/params.md: {missing}"
    assert len(roles()) > 50  # the walk found the schema's keys, not a handful


def test_every_verb_and_option_is_in_the_generated_cli_reference():
    page = cli_reference()
    parsers = cli_parsers()
    assert {f"ngptlab {verb}" for verb in VERBS} <= set(parsers)
    sections = re.split(r"^#{2,3} ", page, flags=re.M)
    for command, parser in parsers.items():
        section = next((s for s in sections if s.startswith(f"`{command}`\n")), None)
        assert section is not None, f"no section for `{command}` in docs/reference/cli.md"
        for action in parser._actions:
            if action.help == argparse.SUPPRESS:  # hidden: an old spelling kept working (ngptlab/options.py)
                continue
            for option in action.option_strings:
                assert option in section, f"`{command}`: {option} missing from docs/reference/cli.md"
    assert "--version" in sections[1]


def test_the_readme_is_a_front_page_with_the_two_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    block = re.search(r"## Two commands\n\n```\n(.*?)```", text, re.S)[1]
    assert [line.split("#")[0].strip() for line in block.splitlines()] == ["make", "make test"]


def test_the_readme_links_to_pages_that_exist():
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", README.read_text())
    assert links, "the README links into docs/"
    assert [link for link in links if not (REPO / link).is_file()] == []


def test_the_readme_arm_table_is_the_table_of_arms():
    text = README.read_text()
    line = text[:text.index(README_BEGIN)].count("\n") + 2
    assert readme_with_arm_table(text) == text, (
        f"README.md, line {line}: the table of arms differs from src/ngptlab/models/arms.yaml; run "
        "`python -m ngptlab.docs_reference` to write it anew")


def test_the_arms_page_takes_its_table_from_the_table_of_arms():
    page = (REPO / "docs" / "pipeline" / "arms.md").read_text()
    assert ARM_TABLE_MARK in page, f"docs/pipeline/arms.md: no {ARM_TABLE_MARK} where the table goes"
    assert "| gpt-orth |" not in page  # no table of its own beside the generated one
    assert arm_table().count("\n") == len(arms.table()) + 1


@pytest.mark.parametrize("path", [README, *DOCS], ids=lambda p: str(p.relative_to(REPO)))
def test_examples_name_runs_of_the_default_grid(path):
    assert not names_outside_the_grid(path.read_text()), f"{path.name}: names outside the default grid"


def test_the_name_check_catches_names_outside_the_grid():
    assert names_outside_the_grid("ngptlab train --run cpu-4l-ctx128-ngpt-t8192-lr0.01-s0") == []
    assert names_outside_the_grid("results/speedup/cpu-4l-ctx128.json, `--cell cpu-4l-ctx128`.") == []
    assert names_outside_the_grid("ngptlab train --run cpu-4l-ctx128-ngpt-t16384-lr0.01-s0.") == [
        "cpu-4l-ctx128-ngpt-t16384-lr0.01-s0"]
    assert names_outside_the_grid("--cell cpu-4l-ctx64 or cpu-4l-ctx64-gpt-t8192-lr0.01-s0") == [
        "cpu-4l-ctx64", "cpu-4l-ctx64-gpt-t8192-lr0.01-s0"]
    assert names_outside_the_grid("`<scale>-ctx<context>-bf16`, runs/<cell>/<run>/") == []


@pytest.mark.parametrize("command", ["ngptlab", *(f"ngptlab {verb}" for verb in VERBS)])
def test_help_examples_name_runs_of_the_default_grid(command):
    helps = [parser.format_help() for name, parser in cli_parsers().items()
             if name == command or name.startswith(f"{command} ") and command != "ngptlab"]
    outside = names_outside_the_grid("\n".join(helps))
    assert not outside, f"`{command} --help` names {outside}, not in the default grid"


def example_commands() -> list[tuple[str, str]]:
    """(where, command) of every example command in the README, docs/ and every `--help` (its epilog,
    description and options' help as written, before argparse wraps them)."""
    found = []
    for path in (README, *DOCS):
        text = path.read_text()
        where = str(path.relative_to(REPO))
        found += [(where, c) for pattern in (SPAN, CODE_LINE) for c in pattern.findall(text)]
    for command, parser in cli_parsers().items():
        texts = [parser.epilog, parser.description, *(a.help for a in parser._actions)]
        for text in filter(None, texts):
            found += [(command, c) for pattern in (SPAN, CODE_LINE) for c in pattern.findall(text)]
    return sorted({(where, " ".join(re.split(r"&&|\|\|", command)[0].split())) for where, command in found})


def parsed(argv: list[str]) -> argparse.Namespace | None:
    """The namespace the command line parses to, or None where it only mentions an option that takes a value
    (`ngptlab plan --set`); any other error of argparse's fails."""
    parser = build_parser(argv)
    verb = cli_parsers()[f"ngptlab {argv[0]}"]
    last = verb._option_string_actions.get(argv[-1])
    if last is not None and last.nargs != 0:
        return None
    error = io.StringIO()
    try:
        with contextlib.redirect_stderr(error):
            return parser.parse_args(argv)
    except SystemExit:
        pytest.fail(f"`ngptlab {' '.join(argv)}` does not parse: {error.getvalue().strip()}")


def test_every_example_command_parses_and_names_what_its_grid_has():
    """Each example that could be copied and run is run through the parser, and the run or cell it names
    through the grid of its params file (the default params.yaml or the preset it names), as the verb finds
    it: find_run, enumerate_cells."""
    commands = example_commands()
    named = 0
    for where, command in commands:
        argv = shlex.split(command)[1:]
        if any(PLACEHOLDER.match(word) for word in argv[1:]):
            continue
        args = parsed(argv)
        if args is None:
            continue
        assert not (getattr(args, "run_option", None) or getattr(args, "cell_option", None)), \
            f"{where}: `{command}` names its run or cell by the old option, not positionally"
        params = load_params(REPO / args.params)
        run, cell = getattr(args, "run", None), getattr(args, "cell", None)
        if run:
            find_run(params, run)  # raises, naming the run, where the grid has no such run
            named += 1
        if cell:
            assert cell in enumerate_cells(params), f"{where}: `{command}` names a cell outside its grid"
            named += 1
    assert len(commands) > 50 and named >= 8  # README, docs and each verb's --help name runs and cells


def test_version_prints_the_package_metadata(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"ngptlab {importlib.metadata.version('ngptlab')}"
