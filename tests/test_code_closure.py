"""A job's code is the import closure of its command (ngptlab/plan/closure.py): an edit to code that can
move a number reruns exactly the jobs that import it, a run's job holds its own arm's module and row alone,
and rewording a docstring or a comment reruns nothing."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest
from support import new_arm

from ngptlab.cli import main
from ngptlab.layout import REPO_ROOT
from ngptlab.models import arms
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


def jobs_changed(before: dict, after: dict) -> set[str]:
    """The jobs whose code fingerprint differs: a stage, or a run stage's arm ("train:gpt-angle")."""
    changed = set()
    for stage, code in before.items():
        if isinstance(code, dict):
            changed |= {f"{stage}:{arm}" for arm in code if code[arm] != after[stage].get(arm)}
        elif code != after[stage]:
            changed.add(stage)
    return changed


def stages_of(jobs: set[str]) -> set[str]:
    return {job.split(":")[0] for job in jobs}


def jobs_changed_by(root: Path, relative: str, edit, arms=None) -> set[str]:
    before = stage_fingerprints(root, arms)
    path = root / "src" / "ngptlab" / relative
    original = path.read_text()
    path.write_text(edit(original))
    try:
        after = stage_fingerprints(root, arms)
    finally:
        path.write_text(original)
    assert stage_fingerprints(root, arms) == before  # undone, nothing changed
    return jobs_changed(before, after)


def stages_changed_by(root: Path, relative: str, edit) -> set[str]:
    return stages_of(jobs_changed_by(root, relative, edit))


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


def test_a_runs_code_holds_its_own_arms_module_and_never_another_arms():
    cache, source = FactsCache(), REPO_ROOT / "src"
    arm_files = {f"{ref.split(':')[0].replace('.', '/')}.py" for arm in arms.table().values()
                 for ref in (arm.train.model, arm.train.recipe)}
    for stage in ("trunk", "train", "condition"):
        for arm in arms.table().values():
            files = {p.relative_to(source).as_posix() for p in closure_files(
                f"ngptlab.{closure.VERB_OF_STAGE[stage]}.command", source, cache, (arm.name,))}
            own = {f"{ref.split(':')[0].replace('.', '/')}.py" for ref in (arm.train.model, arm.train.recipe)}
            assert own <= files, (stage, arm.name)
            # another arm's module is in only where this arm's imports it (gpt-angle is gpt-scalar's model)
            for other in sorted((arm_files - own) & files):
                module = other.removesuffix(".py").replace("/", ".")
                assert any(module in _imports_of(source / f) for f in files if f.endswith(".py")), \
                    f"{stage} of {arm.name} holds {other}, which nothing of it imports"


def _imports_of(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
    return names


def test_an_arm_module_edit_reruns_that_arms_runs_alone(tree):
    changed = jobs_changed_by(tree, "models/gpt_angle.py", lambda text: text + CODE_LINE)
    assert changed == {"trunk:gpt-angle", "train:gpt-angle", "condition:gpt-angle", "evaluate", "report"}
    shared = jobs_changed_by(tree, "models/layers.py", lambda text: text + CODE_LINE)
    assert {f"train:{arm}" for arm in arms.names()} <= shared  # every arm's model is built of layers


def test_a_new_arm_reruns_no_job_of_a_grid_without_it(tree):
    grid_arms = ["gpt", "ngpt", "gpt-angle"]
    before = stage_fingerprints(tree, grid_arms)
    package = tree / "src" / "ngptlab"
    table = package / "models" / "arms.yaml"
    original = table.read_text()
    new_arm.add_to(package)  # its module and its row
    try:
        assert stage_fingerprints(tree, grid_arms) == before
        with_it = stage_fingerprints(tree, [*grid_arms, new_arm.ARM])
        assert {arm: with_it["train"][arm] for arm in grid_arms} == before["train"]
        assert with_it["train"][new_arm.ARM] not in before["train"].values()
    finally:
        table.write_text(original)
        (package / "models" / new_arm.MODULE).unlink()


def replacing(old: str, new: str):
    def edit(text: str) -> str:
        assert old in text
        return text.replace(old, new)
    return edit


def test_a_rows_train_block_reruns_its_arm_and_its_other_fields_no_run(tree):
    style = replacing('{color: "tab10:6", marker: D}', '{color: "tab10:7", marker: D}')  # gpt-orth's
    assert jobs_changed_by(tree, "models/arms.yaml", style) == {"speedup", "evaluate", "report"}
    warmup = replacing('gpt_orth:OrthRecipe", warmup: true', 'gpt_orth:OrthRecipe", warmup: false')
    changed = jobs_changed_by(tree, "models/arms.yaml", warmup)
    assert {job for job in changed if ":" in job} == {f"{stage}:gpt-orth" for stage in closure.PER_RUN}


def test_a_new_conditioning_metric_reruns_condition_jobs_and_no_train_job(tree):
    metric = ("\n\ndef spectral_entropy(sv):\n    p = sv / sv.sum()\n"
              "    return float(-(p * np.log(p)).sum())\n")
    changed = jobs_changed_by(tree, "condition/metrics.py", lambda text: text + metric)
    assert stages_of(changed) == {"condition"}  # the report reads its results, not its code
    assert {f"condition:{arm}" for arm in arms.names()} <= changed
    headline = jobs_changed_by(tree, "observe/headline.py", lambda text: text + CODE_LINE)
    assert "train" not in stages_of(headline) and "condition" in stages_of(headline)


def test_a_new_train_key_in_the_settings_reruns_no_job_by_its_code(tree):
    """The settings' code is in no key (their values are): a new train key changes the keys of the stages it
    shapes through its value alone (tests/test_lineage.py), never prepare's through code."""
    edit = replacing("class Train:\n", "class Train:\n    adam_beta2: float = 0.95\n")
    assert jobs_changed_by(tree, "settings/typed.py", edit) == set()


def test_what_is_left_out_is_declared_with_why_and_exists():
    for name, why in closure.OUTSIDE_FINGERPRINT.items():
        assert (REPO_ROOT / "src" / name).is_file() and len(why) > 20, name
    for package, why in closure.OUTSIDE_PACKAGES.items():
        assert (REPO_ROOT / "src" / package).is_dir() and len(why) > 20, package


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
    assert out.startswith("stage speedup for every arm: code ") and "ngptlab/speedup/lr_policy.py" in out
    assert "ngptlab/report/" not in out
    assert main(["plan", "--explain", "train", "--arm", "gpt-angle", "--root", str(REPO_ROOT)]) == 0
    out = capsys.readouterr().out
    assert "ngptlab/models/gpt_angle.py" in out and "ngptlab/models/gpt_orth.py" not in out
    assert "ngptlab/models/arms.yaml: gpt-angle.train" in out
