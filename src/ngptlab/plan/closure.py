"""A stage's code is what its entry module imports: the import closure inside the package, found from the
source (ast), never from a hand list.

Each stage runs `ngptlab <verb>`, whose code is `ngptlab.<verb>.command` (trunk segments run the train
verb's); its closure is every module of the package that the entry imports, directly or through another
module, anywhere in the module (a lazy import inside a function counts), plus every package `__init__`
on the way. Two kinds of import cannot be read from the source, so the rule for them is conservative:
- a module that calls `importlib.import_module` (models/__init__.py, which loads the arms lazily) brings
  in its whole package;
- a data file beside a module of the closure (paper/paper_numbers.yaml) is part of it, by its parsed
  content, so a comment or a reflowed line in it changes nothing.

The fingerprint hashes code, not text: each module's syntax tree without its docstrings, unparsed
(`ast.unparse`), so a reworded docstring, a comment or a reformatted line reruns nothing, and any change a
number can follow does. OUTSIDE_FINGERPRINT names the files that are left out, each with why; each module
there only observes a run, and a test shows a run's result bytes equal with and without it.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from ngptlab.errors import ParamsError
from ngptlab.files import write_text_atomic
from ngptlab.layout import REPO_ROOT
from ngptlab.settings.roles import STAGES

PACKAGE = "ngptlab"
PACKAGE_DIR = "src/ngptlab"  # under the project root
DATA_SUFFIXES = (".yaml", ".yml", ".json")
MAX_CACHED = 20_000  # files' versions in the facts cache (~200 bytes each)

# The stages of the lineage by the verb whose command module runs them: trunk segments run the train verb.
VERB_OF_STAGE = {stage: "train" if stage == "trunk" else stage for stage in STAGES}

# Files of a closure that are no part of its fingerprint, and why. A module here must only watch: the
# result bytes of a run are the same with and without it (tests/test_train.py trains a run with
# train.tensorboard on and off: test_the_settings_of_how_a_run_runs_change_none_of_its_bytes...).
OUTSIDE_FINGERPRINT = {
    "ngptlab/tensorboard_view.py": "writes the metrics rows again as TensorBoard events: a view, never read "
                                   "back by any stage (train.tensorboard)",
    "ngptlab/config/schema.yaml": "its defaults reach every key as values: the lineage hashes each stage's "
                                  "settings with the schema's defaults filled in (ngptlab.settings), so "
                                  "its descriptions rerun nothing",
}


@dataclass(frozen=True)
class StageCode:
    """The files a stage's code fingerprint covers (relative to the package's parent), and the fingerprint."""
    stage: str
    entry: str
    files: tuple[str, ...]
    left_out: tuple[str, ...]
    fingerprint: str


def _module_file(source_root: Path, module: str) -> Path | None:
    """The file of a dotted module name under source_root (src/), or None if it is not one of ours."""
    base = source_root.joinpath(*module.split("."))
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def _package_of(module: str, file: Path) -> str:
    return module if file.name == "__init__.py" else module.rpartition(".")[0]


def _import_statements(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements among these statements and every block nested in them (a function's body, an
    if, a try): statements only, since an import is never an expression."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            nested = getattr(node, field, None)
            if isinstance(nested, list):
                yield from _import_statements(nested)


def _without_docstrings(tree: ast.Module) -> ast.Module:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


@dataclass(frozen=True)
class ModuleFacts:
    """What the closure needs of one file, a function of its bytes alone: its imports as written
    ((level, module, names), resolved against the file's place by _imported), whether it imports
    dynamically, and the sha256 of its code (code_text)."""
    imports: tuple[tuple[int, str, tuple[str, ...]], ...]
    dynamic: bool
    code: str


def code_text(data: bytes, suffix: str) -> str:
    """What of a file counts as code: a module's syntax tree without docstrings, unparsed; a data file's
    parsed content as canonical JSON."""
    if suffix == ".py":
        return ast.unparse(_without_docstrings(ast.parse(data)))
    return json.dumps(yaml.safe_load(data), sort_keys=True, default=str)


def _facts_of(data: bytes, suffix: str) -> ModuleFacts:
    code = hashlib.sha256(code_text(data, suffix).encode()).hexdigest()
    if suffix != ".py":
        return ModuleFacts((), False, code)
    imports = []
    for node in _import_statements(ast.parse(data).body):
        if isinstance(node, ast.Import):
            imports += [(0, alias.name, ()) for alias in node.names]
        else:
            imports.append((node.level, node.module or "", tuple(alias.name for alias in node.names)))
    return ModuleFacts(tuple(imports), b"import_module(" in data, code)


class FactsCache:
    """ModuleFacts by the sha256 of a file's bytes, kept across processes in one JSON file (the user's cache
    directory, per Python version: ast.unparse may write another Python's trees differently). Keyed by
    content, an entry is never stale; parsing every module again costs ~0.5 s a process, and every DVC
    stage's `ngptlab plan --check` and every Snakemake start computes the fingerprints."""

    def __init__(self, path: Path | None = None):
        cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        python = f"py{sys.version_info[0]}{sys.version_info[1]}"
        self.path = path or cache_home / "ngptlab" / f"code-facts-{python}.json"
        try:
            self.entries = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.entries = {}
        self.added = 0
        self.used: set[str] = set()
        self.read: dict[Path, ModuleFacts] = {}  # this computation's files: each read and hashed once

    def facts(self, path: Path) -> ModuleFacts:
        if path in self.read:
            return self.read[path]
        data = path.read_bytes()
        key = f"{path.suffix}:{hashlib.sha256(data).hexdigest()}"
        entry = self.entries.get(key)
        self.used.add(key)
        if entry is None:
            facts = _facts_of(data, path.suffix)
            self.entries[key] = entry = [[list(i) for i in facts.imports], facts.dynamic, facts.code]
            self.added += 1
        imports, dynamic, code = entry
        facts = ModuleFacts(tuple((level, module, tuple(names)) for level, module, names in imports), dynamic,
                            code)
        self.read[path] = facts
        return facts

    def save(self) -> None:
        """Write the cache if it gained entries; a cache that cannot be written is only slower next time."""
        if self.added:
            if len(self.entries) > MAX_CACHED:  # old versions of files: keep this process's only
                self.entries = {key: self.entries[key] for key in self.used}
            with contextlib.suppress(OSError):
                write_text_atomic(self.path, json.dumps(self.entries))
            self.added = 0


def _imported(facts: ModuleFacts, module: str, file: Path) -> set[str]:
    """The modules of the package a file's imports may name (a `from x import y` names module x, and module
    x.y where y is one)."""
    package = _package_of(module, file)
    names: set[str] = set()
    for level, origin, aliases in facts.imports:
        if level:  # relative: from the package, up level - 1 parents
            parts = package.split(".")
            base = ".".join(parts[:len(parts) - level + 1])
            origin = f"{base}.{origin}" if origin else base
        names.add(origin)
        names.update(f"{origin}.{alias}" for alias in aliases)
    return {name for name in names if name == PACKAGE or name.startswith(PACKAGE + ".")}


def closure_files(entry: str, source_root: Path, cache: FactsCache) -> list[Path]:
    """Every file the entry module's code consists of: the modules it imports inside the package, their
    packages' `__init__`s, whole packages that import dynamically and the data files beside them."""
    seen: dict[str, Path] = {}
    todo = [entry]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        file = _module_file(source_root, module)
        if file is None:
            continue
        seen[module] = file
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # the packages it runs on import
        facts = cache.facts(file)
        todo += sorted(_imported(facts, module, file))
        if facts.dynamic:  # the whole package: what it loads is decided at run time
            todo += [f"{_package_of(module, file)}.{p.stem}" for p in sorted(file.parent.glob("*.py"))
                     if p.name != "__init__.py"]
    files = set(seen.values())
    data = {p for f in files for suffix in DATA_SUFFIXES for p in f.parent.glob(f"*{suffix}")}
    return sorted(files | data)


def stage_code(stage: str, root: str | Path = REPO_ROOT, cache: FactsCache | None = None) -> StageCode:
    """The files of a stage's code under the project root and their fingerprint: 16 hex digits of a sha256
    over each file's name and the sha256 of its code (code_text), in name order."""
    source_root = Path(root) / PACKAGE_DIR
    if not source_root.is_dir():
        raise ParamsError(f"{source_root}: not found; a stage's code is read from the project's working "
                          "directory")
    entry = f"{PACKAGE}.{VERB_OF_STAGE[stage]}.command"
    if _module_file(source_root.parent, entry) is None:
        raise ParamsError(f"{entry}: the entry module of stage {stage} is missing under {source_root}")
    cache = cache or FactsCache()
    files, left_out, digest = [], [], hashlib.sha256()
    for path in closure_files(entry, source_root.parent, cache):
        name = path.relative_to(source_root.parent).as_posix()
        if name in OUTSIDE_FINGERPRINT:
            left_out.append(name)
            continue
        files.append(name)
        digest.update(name.encode() + b"\0" + cache.facts(path).code.encode())
    cache.save()
    return StageCode(stage, entry, tuple(files), tuple(left_out), digest.hexdigest()[:16])


def stage_fingerprints(root: str | Path = REPO_ROOT) -> dict[str, str]:
    """Every stage's code fingerprint (the `code` of results/plan.json and of each lineage key)."""
    cache = FactsCache()
    return {stage: stage_code(stage, root, cache).fingerprint for stage in VERB_OF_STAGE}


def explain(stage: str, root: str | Path = REPO_ROOT) -> str:
    """What `ngptlab plan --explain STAGE` prints: the files a stage's key covers, and those left out."""
    code = stage_code(stage, root)
    lines = [f"stage {stage}: code {code.fingerprint}, the import closure of {code.entry} "
             f"({len(code.files)} files; docstrings and comments are not code)"]
    lines += [f"  {name}" for name in code.files]
    lines += [f"  left out: {name}: {OUTSIDE_FINGERPRINT[name]}" for name in code.left_out]
    return "\n".join(lines)
