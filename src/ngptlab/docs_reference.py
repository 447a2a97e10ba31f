"""The documentation's reference pages, generated so that nothing in them is written twice: the params keys
from config/schema.yaml (each key's description, default and role, as settings/roles.py classifies it), the
command line from the argparse parsers of every verb (cli.build_parser, each verb's `configure`), and the
table of arms from models/arms.yaml, in README.md and docs/pipeline/arms.md.

docs/hooks.py hands the pages to MkDocs at build time (`make docs`, `mkdocs build`) and puts the arm table
where a page has ARM_TABLE_MARK; README.md, which GitHub shows as written, holds the table between
README_BEGIN and README_END, which `python -m ngptlab.docs_reference` rewrites (tests/test_docs.py checks
it). Nothing here is part of any stage's code (no stage imports it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from collections.abc import Iterator

from ngptlab.models import arms
from ngptlab.settings import load_schema, resolved_node
from ngptlab.settings.roles import EXECUTION, GRID, Role, roles

HELP_COLUMNS = "100"  # argparse wraps its help to $COLUMNS: a fixed width, so the page is the same everywhere

EXECUTION_WORDS = {
    "speed": "how fast it runs",
    "roundoff": "the numbers differ at float round-off only; recorded in each run's summary",
    "placement": "where it runs and with what resources",
    "cadence": "when a job checkpoints and stops",
    "view": "what is shown beside the results",
    "planning": "read by `ngptlab plan` or `ngptlab design` only",
}


# ----------------------------------------------------------------------------------------------------------
# The params keys


def _node(key: str) -> tuple[dict, bool]:
    """The schema node of a dotted key (a `$ref` followed) and whether its parent requires it."""
    node, required = load_schema(), True
    for part in key.split("."):
        node = resolved_node(node)
        required = part in node.get("required", ())
        node = node["properties"][part]
    return resolved_node(node), required


def _kind(node: dict) -> str:
    if "enum" in node:
        return " \\| ".join(f"`{v}`" for v in node["enum"])
    kind = node.get("type")
    if kind is None and "oneOf" in node:
        return " or ".join(_kind(resolved_node(n)) for n in node["oneOf"])
    if isinstance(kind, list):
        return " or ".join(kind)
    return kind or "see the schema"


def _role_words(role: Role) -> str:
    if role.execution:
        return f"execution: {role.execution} ({EXECUTION_WORDS[role.execution]}); in no lineage key"
    stages = [s for s in role.shapes if s != GRID]
    words = []
    if GRID in role.shapes:
        words.append("names points of the grid (a change adds or retires runs)")
    if stages:
        words.append("shapes " + ", ".join(f"`{s}`" for s in stages))
    if role.only_schedule:
        words.append(f"only for `train.schedule: {role.only_schedule}` runs")
    if role.per_arm:
        words.append("per arm: only the jobs of " + ", ".join(f"`{a}`" for a in role.per_arm)
                     + ", each its own part, under lineage keys of their own")
    return "; ".join(words)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def params_reference() -> str:
    """Markdown: every classified key of config/schema.yaml, by section, with its description, default (or
    required) and role."""
    schema = load_schema()
    out = ["# Params keys", "",
           "Generated at build time from `src/ngptlab/config/schema.yaml` (through "
           "`src/ngptlab/docs_reference.py`): edit the schema, not this page.", "",
           _cell(schema.get("description", "")), "",
           "**Role.** *shapes* lists the stages whose results a key shapes: each of their lineage keys holds "
           "its value, so a change reruns them and what comes after ([Provenance](../provenance.md)). "
           "*execution* keys change only how a stage runs: " + "; ".join(
               f"*{e}*: {EXECUTION_WORDS[e]}" for e in EXECUTION) + ".", ""]
    section = None
    for role in roles():
        top = role.key.split(".")[0]
        if top != section:
            section = top
            out += ["", f"## `{top}`", "", "| key | type | default | role | description |",
                    "|---|---|---|---|---|"]
        node, required = _node(role.key)
        if "default" in node:
            default = f"`{json.dumps(node['default'])}`"
        else:
            default = "required" if required else "optional, no default"
        out.append(f"| `{role.key}` | {_kind(node)} | {default} | {_role_words(role)} | "
                   f"{_cell(node.get('description', ''))} |")
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------------------------------------
# The command line


@contextlib.contextmanager
def _columns(width: str) -> Iterator[None]:
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = width
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps no public list of a parser's subcommands
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def cli_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every parser of the command line by its command: "ngptlab", "ngptlab plan", "ngptlab bench gpu"...
    Each verb's own options come from its command module (cli.build_parser configures the chosen verb)."""
    from ngptlab.cli import VERBS, build_parser

    parsers = {"ngptlab": build_parser([])}
    for verb in VERBS:
        sub = _subparsers(build_parser([verb]))[verb]
        parsers[f"ngptlab {verb}"] = sub
        for name, nested in _subparsers(sub).items():
            parsers[f"ngptlab {verb} {name}"] = nested
    return parsers


def cli_reference() -> str:
    """Markdown: the `--help` of `ngptlab` and of each verb (and each benchmark), as argparse prints it."""
    out = ["# Command line", "",
           "Generated at build time from the argparse parsers (`src/ngptlab/cli.py` and each verb's "
           "`src/ngptlab/<verb>/command.py`, through `src/ngptlab/docs_reference.py`): this is exactly what "
           "`--help` prints. Every verb takes `--params FILE` (default `params.yaml`).", ""]
    with _columns(HELP_COLUMNS):
        for command, parser in cli_parsers().items():
            level = "##" if command.count(" ") <= 1 else "###"
            out += [f"{level} `{command}`", "", "```text", parser.format_help().rstrip(), "```", ""]
    return "\n".join(out)


PAGES = {"reference/params.md": params_reference, "reference/cli.md": cli_reference}


# ----------------------------------------------------------------------------------------------------------
# The table of arms

ARM_TABLE_MARK = "<!-- the table of arms: src/ngptlab/models/arms.yaml -->"
README_BEGIN = ("<!-- the table of arms, from src/ngptlab/models/arms.yaml: "
                "python -m ngptlab.docs_reference -->")
README_END = "<!-- end of the table of arms -->"


def arm_table() -> str:
    """Markdown: every arm of models/arms.yaml, in its order, with what it is, its norms and conditioning."""
    lines = ["| arm | what it is | norms | conditioning |", "|---|---|---|---|"]
    lines += [f"| {arm.name} | {_cell(arm.summary)} | {arm.norms} | {arm.conditioning} |"
              for arm in arms.table().values()]
    return "\n".join(lines)


def with_arm_table(markdown: str) -> str:
    """A page with its ARM_TABLE_MARK replaced by the table (MkDocs' on_page_markdown, docs/hooks.py)."""
    return markdown.replace(ARM_TABLE_MARK, arm_table())


def readme_with_arm_table(readme: str) -> str:
    """README.md's text with the table between its markers made anew."""
    head, begin, rest = readme.partition(README_BEGIN)
    _, end, tail = rest.partition(README_END)
    if not begin or not end:
        raise ValueError(f"README.md: the markers of the table of arms are missing ({README_BEGIN} ... "
                         f"{README_END})")
    return f"{head}{README_BEGIN}\n{arm_table()}\n{README_END}{tail}"


if __name__ == "__main__":  # rewrite README.md's table of arms (from the project root)
    from pathlib import Path

    readme = Path("README.md")
    readme.write_text(readme_with_arm_table(readme.read_text()))
