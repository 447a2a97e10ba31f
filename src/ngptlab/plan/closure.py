"""A job's code is what its entry module imports: the import closure inside the package, found from the
source (ast), never from a hand list, and as narrow as the imports allow.

Each stage runs `ngptlab <verb>`, whose code is `ngptlab.<verb>.command` (trunk segments run the train
verb's); its closure is every module of the package that the entry imports, directly or through another
module, anywhere in the module (a lazy import inside a function counts), plus every package `__init__`
on the way. What cannot be read from an import statement:
- the arms. The registry (ARM_LOADER) loads an arm's classes from its row of models/arms.yaml; a job's
  closure holds the modules of its own arms' rows (a run's: its arm; a cell's or the report's: the grid's)
  and what they import, never another arm's. Of the table itself (ARM_TABLE) a job's key holds only those
  rows, and a run's (trunk, train, condition) only their `train` block: what training reads. So a new arm
  reruns no existing job, and an edit of models/gpt_angle.py reruns gpt-angle's runs alone.
- any other `importlib.import_module` call brings in its whole package (the conservative rule);
- a data file beside a module of the closure (paper/paper_numbers.yaml) is part of it, by its parsed
  content, so a comment or a reflowed line in it changes nothing.

The fingerprint hashes code, not text: each module's syntax tree without its docstrings, unparsed
(`ast.unparse`), so a reworded docstring, a comment or a reformatted line reruns nothing, and any change a
number can follow does. OUTSIDE_FINGERPRINT names the files and OUTSIDE_PACKAGES the packages that are left
out, each with why: a module that only observes a run (a test shows a run's result bytes equal with and
without it), and the settings' code, whose values every key already holds.
An edit meant to change no number can be accepted as such (`ngptlab plan --accept-code`, plan/accept.py):
the fingerprints it proved equivalent on golden traces map to the ones they replace (ACCEPTED).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import json
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from ngptlab.errors import ParamsError
from ngptlab.files import write_text_atomic
from ngptlab.layout import ACCEPTED_CODE, REPO_ROOT
from ngptlab.settings.roles import PER_RUN, STAGES

PACKAGE = "ngptlab"
PACKAGE_DIR = "src/ngptlab"  # under the project root
DATA_SUFFIXES = (".yaml", ".yml", ".json")
MAX_CACHED = 20_000  # files' versions in the facts cache (~200 bytes each)
FACTS_VERSION = "v2"  # a new way of reading a file's facts: a cache of its own
ACCEPTED = ACCEPTED_CODE  # the record of accepted refactors (plan/accept.py)
ACCEPTED_KEYS = frozenset({"stage", "fingerprint", "accepted_as"})  # what each of its entries must hold

# The stages of the lineage by the verb whose command module runs them: trunk segments run the train verb.
VERB_OF_STAGE = {stage: "train" if stage == "trunk" else stage for stage in STAGES}

# The registry, whose dynamic import loads the arms its job names, and the table it reads them from.
ARM_LOADER = f"{PACKAGE}.models.registry"
ARM_TABLE = "ngptlab/models/arms.yaml"  # under the source root

# Packages of a closure that are no part of its fingerprint, and why.
OUTSIDE_PACKAGES = {
    "ngptlab/settings/": "read params.yaml into typed values and classify its keys: every key's value, "
                         "defaults filled in, is in the keys of the stages it shapes (plan/lineage.py), so "
                         "a new train key reruns no prepare job",
    "ngptlab/config/": "reads and validates the params file: an error, or the values the keys hold",
}

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
    return ModuleFacts(tuple(imports), _calls_import_module(ast.parse(data)), code)


def _calls_import_module(tree: ast.Module) -> bool:
    """Whether the module calls `import_module` (bare or as importlib's attribute): a call, not a mention."""
    return any(isinstance(node, ast.Call) and (getattr(node.func, "id", None) == "import_module"
                                               or getattr(node.func, "attr", None) == "import_module")
               for node in ast.walk(tree))


class FactsCache:
    """ModuleFacts by the sha256 of a file's bytes, kept across processes in one JSON file (the user's cache
    directory, per Python version: ast.unparse may write another Python's trees differently). Keyed by
    content, an entry is never stale; parsing every module again costs ~0.5 s a process, and every DVC
    stage's `ngptlab plan --check` and every Snakemake start computes the fingerprints."""

    def __init__(self, path: Path | None = None):
        cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        python = f"py{sys.version_info[0]}{sys.version_info[1]}"
        self.path = path or cache_home / "ngptlab" / f"code-facts-{FACTS_VERSION}-{python}.json"
        try:
            self.entries = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.entries = {}
        self.added = 0
        self.used: set[str] = set()
        self.read: dict[Path, ModuleFacts] = {}  # this computation's files: each read and hashed once
        self.walks: dict[tuple[Path, str], tuple[frozenset[Path], bool]] = {}  # closure._walk's, per entry
        self.folders: dict[Path, tuple[Path, ...]] = {}
        self.names: dict[Path, str] = {}
        self.modules: dict[tuple[Path, str], Path | None] = {}

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

    def name(self, path: Path, source_root: Path) -> str:
        """A file's name under the source root ("ngptlab/models/gpt.py"), worked out once a computation."""
        if path not in self.names:
            self.names[path] = path.relative_to(source_root).as_posix()
        return self.names[path]

    def module_file(self, source_root: Path, module: str) -> Path | None:
        """_module_file, looked up once a computation (every arm's closure asks for the same modules)."""
        key = (source_root, module)
        if key not in self.modules:
            self.modules[key] = _module_file(source_root, module)
        return self.modules[key]

    def data_files(self, folder: Path) -> tuple[Path, ...]:
        """The data files of a folder of the package, listed once a computation."""
        if folder not in self.folders:
            self.folders[folder] = tuple(p for suffix in DATA_SUFFIXES for p in folder.glob(f"*{suffix}"))
        return self.folders[folder]

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


def arm_rows(source_root: Path) -> dict:
    """The rows of the table of arms under this source root (src/), as written."""
    path = source_root / ARM_TABLE
    rows = _parsed(path.read_bytes()) if path.is_file() else None
    if not isinstance(rows, dict):
        raise ParamsError(f"{path}: not a table of arms (a mapping of arm names to rows)")
    return rows


@functools.lru_cache(maxsize=4)
def _parsed(data: bytes) -> object:
    return yaml.load(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # C: ~20x faster


def _arm_modules(rows: dict, arms: tuple[str, ...]) -> list[str]:
    """The modules the registry loads for these arms: their rows' train.model and train.recipe."""
    return sorted({ref.split(":")[0] for arm in arms for ref in (rows[arm]["train"]["model"],
                                                                   rows[arm]["train"]["recipe"])})


def _walk(entry: str, source_root: Path, cache: FactsCache) -> tuple[frozenset[Path], bool]:
    """The modules `entry` imports inside the package, with their packages' `__init__`s and whole packages
    that import dynamically, and whether it reaches the registry (whose arms the caller adds). Kept per
    computation: the run stages' closures share everything but their arms."""
    key = (source_root, entry)
    if key in cache.walks:
        return cache.walks[key]
    seen: dict[str, Path] = {}
    todo = [entry]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        file = cache.module_file(source_root, module)
        if file is None:
            continue
        seen[module] = file
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # the packages it runs on import
        if why_left_out(cache.name(file, source_root)):
            continue  # what a left-out module imports serves what it does: read settings, watch a run
        facts = cache.facts(file)
        todo += sorted(_imported(facts, module, file))
        if facts.dynamic and module != ARM_LOADER:  # the whole package: what it loads is decided at run time
            todo += [f"{_package_of(module, file)}.{p.stem}" for p in sorted(file.parent.glob("*.py"))
                     if p.name != "__init__.py"]
    cache.walks[key] = frozenset(seen.values()), ARM_LOADER in seen
    return cache.walks[key]


def closure_files(entry: str, source_root: Path, cache: FactsCache,
                  arms: tuple[str, ...] | None = None) -> list[Path]:
    """Every file the entry module's code consists of: the modules it imports inside the package, their
    packages' `__init__`s, whole packages that import dynamically, the modules of these arms (all where None)
    and what they import where it reaches the registry, and the data files beside them (the table of arms
    not among them: a key holds its rows, arm_rows)."""
    files, reaches_registry = _walk(entry, source_root, cache)
    files = set(files)
    if reaches_registry:  # what the registry loads is what the job's arms' rows name
        rows = arm_rows(source_root)
        for module in _arm_modules(rows, tuple(rows) if arms is None else arms):
            files |= _walk(module, source_root, cache)[0]
    data = {p for folder in {f.parent for f in files} for p in cache.data_files(folder)}
    return sorted((files | data) - {source_root / ARM_TABLE})


def why_left_out(name: str) -> str | None:
    """Why a file of a closure is no part of its fingerprint; None where it is."""
    if name in OUTSIDE_FINGERPRINT:
        return OUTSIDE_FINGERPRINT[name]
    return next((why for package, why in OUTSIDE_PACKAGES.items() if name.startswith(package)), None)


def stage_code(stage: str, root: str | Path = REPO_ROOT, cache: FactsCache | None = None,
               arms: tuple[str, ...] | None = None) -> StageCode:
    """The files of a job's code under the project root and their fingerprint: 16 hex digits of a sha256
    over each file's name and the sha256 of its code (code_text), in name order, then the rows of the table
    of arms the job holds (a run's stage: the `train` blocks of `arms`; another stage: the rows of `arms`;
    all arms where None) as canonical JSON."""
    source_root = Path(root) / PACKAGE_DIR
    if not source_root.is_dir():
        raise ParamsError(f"{source_root}: not found; a stage's code is read from the project's working "
                          "directory")
    entry = f"{PACKAGE}.{VERB_OF_STAGE[stage]}.command"
    if _module_file(source_root.parent, entry) is None:
        raise ParamsError(f"{entry}: the entry module of stage {stage} is missing under {source_root}")
    cache = cache or FactsCache()
    rows = arm_rows(source_root.parent)
    unknown = sorted(set(arms or ()) - set(rows))
    if unknown:
        raise ParamsError(f"{source_root.parent / ARM_TABLE}: no arm {unknown[0]!r}")
    files, left_out, digest = [], [], hashlib.sha256()
    for path in closure_files(entry, source_root.parent, cache, arms):
        name = cache.name(path, source_root.parent)
        if why_left_out(name):
            left_out.append(name)
            continue
        files.append(name)
        digest.update(name.encode() + b"\0" + cache.facts(path).code.encode())
    if f"{PACKAGE}/models/arms.py" in files:  # the job reads the table: the rows it holds
        part = ".train" if stage in PER_RUN else ""
        held = {arm: rows[arm]["train"] if part else rows[arm] for arm in (arms or tuple(rows))}
        files.append(f"{ARM_TABLE}: " + ", ".join(f"{arm}{part}" for arm in held))
        digest.update(ARM_TABLE.encode() + b"\0" + json.dumps(held, sort_keys=True, default=str).encode())
    cache.save()
    return StageCode(stage, entry, tuple(files), tuple(left_out), digest.hexdigest()[:16])


def stage_fingerprints(root: str | Path = REPO_ROOT, arms: Iterable[str] | None = None) -> dict:
    """Every job's code fingerprint (the `code` of results/plan.json and of each lineage key): per arm of the
    grid (every arm of the table where None) for the run stages ({stage: {arm: fingerprint}}), one for each
    other stage, its closure holding the grid's arms. A fingerprint accepted as equivalent to an earlier one
    (plan/accept.py) is that one."""
    cache = FactsCache()
    arms = tuple(sorted(set(arm_rows(Path(root) / "src").keys() if arms is None else arms)))
    accepted = accepted_fingerprints(root)
    code: dict = {}
    for stage in VERB_OF_STAGE:
        if stage in PER_RUN:
            own = {arm: stage_code(stage, root, cache, (arm,)).fingerprint for arm in arms}
            code[stage] = {arm: _canonical(accepted, stage, fingerprint) for arm, fingerprint in own.items()}
        else:
            code[stage] = _canonical(accepted, stage, stage_code(stage, root, cache, arms).fingerprint)
    return code


def _canonical(accepted: dict, stage: str, fingerprint: str) -> str:
    seen = set()
    while (stage, fingerprint) in accepted and fingerprint not in seen:  # a chain of accepted refactors
        seen.add(fingerprint)
        fingerprint = accepted[stage, fingerprint]
    return fingerprint


def accepted_entries(root: str | Path = REPO_ROOT) -> list[dict]:
    """The entries of the record of accepted refactors (ACCEPTED under the project root; none where it is
    missing); a record that cannot be read is one error naming it."""
    path = Path(root) / ACCEPTED
    if not path.is_file():
        return []
    try:
        entries = json.loads(path.read_text())["accepted"]
        if any(not ACCEPTED_KEYS <= entry.keys() for entry in entries):
            raise KeyError(f"each entry holds {', '.join(sorted(ACCEPTED_KEYS))}")
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ParamsError(f"{path}: not a record of accepted code ({error}); restore it from git") from None
    return entries


def accepted_fingerprints(root: str | Path = REPO_ROOT) -> dict[tuple[str, str], str]:
    """{(stage, fingerprint): the fingerprint it was accepted as}, from the record of accepted refactors."""
    return {(entry["stage"], entry["fingerprint"]): entry["accepted_as"] for entry in accepted_entries(root)}


def accepted_digest(root: str | Path = REPO_ROOT) -> str:
    """16 hex digits of the record of accepted refactors' entries ("" where it has none): the report lists
    them, so its key holds them (plan/lineage.py)."""
    entries = accepted_entries(root)
    return hashlib.sha256(json.dumps(entries, sort_keys=True).encode()).hexdigest()[:16] if entries else ""


def explain(stage: str, root: str | Path = REPO_ROOT, arm: str | None = None) -> str:
    """What `ngptlab plan --explain STAGE [--arm ARM]` prints: the files a job's key covers, and those left
    out."""
    code = stage_code(stage, root, arms=(arm,) if arm else None)
    reads_arms = any(name.startswith(ARM_TABLE) for name in code.files)
    scope = (f" for arm {arm}" if arm else " for every arm") if reads_arms else ""
    lines = [f"stage {stage}{scope}: code {code.fingerprint}, the import closure of {code.entry} "
             f"({len(code.files)} files; docstrings and comments are not code)"]
    lines += [f"  {name}" for name in code.files]
    lines += [f"  left out: {name}: {why_left_out(name)}" for name in code.left_out]
    return "\n".join(lines)
