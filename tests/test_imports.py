"""The stage packages import each other in one direction only: shared pieces (ngptlab.results, files,
params, models) sit below every stage, and a stage never imports a stage that imports it back."""

from __future__ import annotations

import ast
from pathlib import Path

import ngptlab
from ngptlab.models import arms

STAGES = ("prepare", "train", "condition", "evaluate", "speedup", "report", "plan", "bench", "design",
          "observe")  # observe: no stage, but what train and condition share, below both
SRC = Path(ngptlab.__file__).parent


def stage_imports() -> dict[str, set[str]]:
    """For each stage package present, the other stage packages its modules import."""
    graph: dict[str, set[str]] = {}
    for stage in STAGES:
        if not (SRC / stage).is_dir():
            continue
        deps = graph.setdefault(stage, set())
        for path in (SRC / stage).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                for name in names:
                    parts = name.split(".")
                    if len(parts) > 1 and parts[0] == "ngptlab" and parts[1] in STAGES and parts[1] != stage:
                        deps.add(parts[1])
    return graph


def test_no_import_circle_among_stage_packages():
    graph = stage_imports()
    assert {"condition", "speedup", "report"} <= set(graph)
    seen: set[str] = set()

    def visit(stage: str, path: tuple[str, ...]) -> None:
        assert stage not in path, f"import circle: {' -> '.join((*path, stage))}"
        if stage in seen:
            return
        for dep in sorted(graph.get(stage, ())):
            visit(dep, (*path, stage))
        seen.add(stage)

    for stage in sorted(graph):
        visit(stage, ())


def test_condition_and_speedup_do_not_import_each_other():
    graph = stage_imports()
    assert "speedup" not in graph["condition"]
    assert "condition" not in graph["speedup"]


def test_train_stands_below_condition_and_both_on_observe():
    graph = stage_imports()
    assert "condition" not in graph["train"]
    assert "observe" in graph["train"] and "observe" in graph["condition"]
    assert graph["observe"] == set()  # no stage below it


def test_the_speedup_documents_readers_import_speedup_and_it_none_of_them():
    """The report, the design and evaluate read results/speedup/<cell>.json through speedup's own reader (and
    the Holm adjustment across cells from it); none reaches into the report for it."""
    graph = stage_imports()
    assert not {"report", "design", "evaluate"} & graph["speedup"]
    assert "report" not in graph["design"] and "report" not in graph["evaluate"]
    assert {"speedup"} <= graph["report"] & graph["design"] & graph["evaluate"]


def module_imports() -> dict[str, set[str]]:
    """For every module of the package (dotted name), the modules of the package it imports, anywhere in
    its body: `from ngptlab.a import b` imports ngptlab.a.b where that is a module, else ngptlab.a."""
    modules = {".".join(("ngptlab", *path.relative_to(SRC).with_suffix("").parts)).removesuffix(".__init__"):
               path for path in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                           for a in node.names]
            else:
                continue
            deps.update(t for t in targets if t in modules and t != name)
    return graph


def test_no_import_circle_among_modules():
    graph = module_imports()
    assert {"ngptlab.schedule", "ngptlab.grid.runs", "ngptlab.train.loop"} <= set(graph)
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import circle: {' -> '.join((*path[path.index(module):], module))}"
        if module in done:
            return
        for dep in sorted(graph[module]):
            visit(dep, (*path, module))
        done.add(module)

    for module in sorted(graph):
        visit(module, ())


def test_settle_it_is_its_evidence_and_its_reading_in_two_modules():
    """The evidence (speed-ups beside κ and the angular rate) knows no verdict; the reading places it."""
    graph = module_imports()
    evidence, reading = "ngptlab.report.sections.settle_evidence", "ngptlab.report.sections.settle"
    verdicts = {f"ngptlab.speedup.{name}" for name in ("across_cells", "equivalence", "reading", "factorial",
                                                         "effect_records", "inference")}
    assert not graph[evidence] & (verdicts | {reading})
    assert evidence in graph[reading]


def test_every_folders_init_maps_its_modules():
    """Each package's __init__ docstring names every module and subpackage in it (`name.py`, `name/`): the
    map a reader opens first stays the folder's. An arm's module is named by its row of models/arms.yaml,
    the one place an arm is declared."""
    arm_modules = {module for arm in arms.table().values() for module in arm.train.modules}
    arm_modules -= {"ngptlab.models.gpt", "ngptlab.models.ngpt"}  # the two architectures, in every map
    for init in sorted(SRC.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        here = init.parent
        package = ".".join(here.relative_to(SRC.parent).parts)
        names = [f"{p.name}" for p in here.glob("*.py")
                 if p.name != "__init__.py" and f"{package}.{p.stem}" not in arm_modules]
        names += [f"{d.name}/" for d in here.iterdir() if (d / "__init__.py").is_file()]
        missing = sorted(name for name in names if name not in doc)
        assert not missing, f"{init.relative_to(SRC.parent)} names no {', '.join(missing)}"
