"""A stage's code is the import closure of its command (ngptlab/plan/closure.py): an edit to code that can
move a number reruns exactly the stages that import it, and rewording a docstring or a comment reruns
nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ngptlab.cli import main
from ngptlab.layout import REPO_ROOT
from ngptlab.plan import closure
from ngptlab.plan.closure import FactsCache, closure_files, stage_code, stage_fingerprints

CODE_LINE = "\n_EDITED = 1  # a line of code: any statement may move a number\n"


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """A copy of the package to edit: the project's src/ngptlab under a root of its own."""
    root = tmp_path_factory.mktemp("closure")
    shutil.copytree(REPO_ROOT / "src" / "ngptlab", root / "src" / "ngptlab",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root


def stages_changed_by(root: Path, relative: str, edit) -> set[str]:
    before = stage_fingerprints(root)
    path = root / "src" / "ngptlab" / relative
    original = path.read_text()
    path.write_text(edit(original))
    try:
        after = stage_fingerprints(root)
    finally:
        path.write_text(original)
    assert stage_fingerprints(root) == before  # undone, nothing changed
    return {stage for stage in before if before[stage] != after[stage]}


@pytest.mark.parametrize("relative, stages", [
    ("speedup/lr_policy.py", {"speedup", "report"}),  # which learning rate every speed-up reads
    ("sample_size.py", {"speedup", "report"}),
    ("weight_dtype.py", {"trunk", "train", "speedup", "report"}),  # how a bf16 run stores its weights
    ("batch.py", {"trunk", "train", "speedup", "report"}),  # the batch arithmetic
    ("grid/resources.py", {"trunk", "train"}),  # the model's shape and layout
    ("observe/angular.py", {"trunk", "train"}),  # the metrics rows' angular columns
    ("report/sections/settle.py", {"report"}),
])
def test_a_line_of_code_reruns_the_stages_that_import_it(tree, relative, stages):
    changed = stages_changed_by(tree, relative, lambda text: text + CODE_LINE)
    assert stages <= changed, relative
    if relative.startswith("report/"):
        assert changed == {"report"}  # an edit inside report/ reruns no train job


def test_docstrings_comments_and_formatting_rerun_nothing(tree):
    def reword(text: str) -> str:
        head, sep, rest = text.partition('"""')
        return head + sep + "Reworded. " + rest.replace("\n\n\n", "\n\n\n\n") + "\n# a comment\n"

    for relative in ("speedup/lr_policy.py", "train/loop.py", "speedup/cell.py"):
        assert stages_changed_by(tree, relative, reword) == set(), relative


def test_a_data_file_counts_by_its_content_and_the_schema_by_the_values_it_gives(tree):
    assert "ngptlab/paper/paper_numbers.yaml" in stage_code("report").files
    commented = stages_changed_by(tree, "paper/paper_numbers.yaml", lambda text: text + "\n# a comment\n")
    assert commented == set()
    for stage in ("prepare", "train", "condition", "speedup", "evaluate", "report"):
        assert "ngptlab/config/schema.yaml" not in stage_code(stage).files, stage


def test_a_dynamic_import_brings_in_its_whole_package():
    """models/__init__.py loads the arms with importlib: every arm file is in the train stage's code."""
    files = {p.name for p in closure_files("ngptlab.train.command", REPO_ROOT / "src", FactsCache())}
    arms = {p.name for p in (REPO_ROOT / "src" / "ngptlab" / "models").glob("*.py")}
    assert arms <= files


def test_what_is_left_out_is_declared_with_why_and_exists():
    for name, why in closure.OUTSIDE_FINGERPRINT.items():
        assert (REPO_ROOT / "src" / name).is_file() and len(why) > 20, name


def test_the_facts_cache_survives_a_process_and_a_corrupt_one_is_rebuilt(tmp_path):
    cache_file = tmp_path / "facts.json"
    first = FactsCache(cache_file)
    expected = stage_code("speedup", cache=first)
    assert cache_file.is_file() and stage_code("speedup", cache=FactsCache(cache_file)) == expected
    cache_file.write_text("{not json")
    assert stage_code("speedup", cache=FactsCache(cache_file)) == expected


def test_plan_explain_lists_a_stages_files(capsys):
    assert main(["plan", "--explain", "speedup", "--root", str(REPO_ROOT)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("stage speedup: code ") and "ngptlab/speedup/lr_policy.py" in out
    assert "ngptlab/report/" not in out
