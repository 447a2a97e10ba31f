"""The stage packages import each other in one direction only: shared pieces (ngptlab.results, files,
params, models) sit below every stage, and a stage never imports a stage that imports it back."""

from __future__ import annotations

import ast
from pathlib import Path

import ngptlab

STAGES = ("prepare", "train", "condition", "evaluate", "speedup", "report", "plan", "bench")
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
