"""MkDocs hook (mkdocs.yml `hooks:`): the reference pages, generated from the code at build time.

`on_files` adds docs/reference/params.md (from src/ngptlab/config/schema.yaml) and docs/reference/cli.md
(from the argparse parsers) as generated files (MkDocs' File.generated), so they are never written into the
source tree, and a page that links to them builds with --strict; `on_page_markdown` puts the table of arms
(from src/ngptlab/models/arms.yaml) where a page marks it. The generator is
src/ngptlab/docs_reference.py, which tests/test_docs.py checks.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.structure.files import File

SRC = Path(__file__).resolve().parents[1] / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))  # this tree's package, whichever ngptlab the environment has installed

from ngptlab.docs_reference import PAGES, with_arm_table  # noqa: E402


def on_files(files, config):
    for uri, page in PAGES.items():
        files.append(File.generated(config, uri, content=page()))
    return files


def on_page_markdown(markdown, page, config, files):
    """The table of arms where a page marks it (docs/pipeline/arms.md), from models/arms.yaml."""
    return with_arm_table(markdown)
