"""pyproject's dependencies against this environment: which do not import, which fall outside the declared
versions, and the pip commands that carry a missing one as a wheel to a machine without network.

The declared list is the checkout's pyproject.toml where ngptlab runs from one (an editable install: the
file as it is now), else the installed distribution's metadata (what pip installed it with).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import operator
import platform
import re
import sys
import tomllib
from dataclasses import dataclass

from ngptlab.layout import REPO_ROOT

# A distribution whose import name is not its name with '-' as '_'
IMPORT_NAMES = {"pyyaml": "yaml"}
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*([^;]*?)\s*(?:;\s*(.*))?$")


@dataclass(frozen=True)
class Requirement:
    name: str  # the distribution, as declared
    specifier: str  # ">=2.11", "==0.4.13" or ""

    @property
    def module(self) -> str:
        return IMPORT_NAMES.get(self.name.lower(), self.name.replace("-", "_").replace(".", "_"))


@dataclass(frozen=True)
class Declared:
    requirements: list[Requirement]
    requires_python: str
    source: str  # where the list was read


def parse_requirement(text: str) -> Requirement | None:
    """`torch>=2.11` -> Requirement; None for an optional one (an `extra == ...` marker: not required)."""
    match = _REQUIREMENT.match(text)
    if not match or (match[3] and "extra" in match[3]):
        return None
    return Requirement(match[1], match[2].replace(" ", ""))


def declared() -> Declared:
    """ngptlab's dependencies and Python range: the checkout's pyproject.toml, else the metadata."""
    pyproject = REPO_ROOT / "pyproject.toml"
    if pyproject.is_file():
        project = tomllib.loads(pyproject.read_text()).get("project", {})
        if project.get("name") == "ngptlab":
            return Declared([r for r in map(parse_requirement, project.get("dependencies", [])) if r],
                            project.get("requires-python", ""), str(pyproject))
    meta = importlib.metadata.metadata("ngptlab")
    requirements = [r for r in map(parse_requirement, importlib.metadata.requires("ngptlab") or []) if r]
    return Declared(requirements, meta.get("Requires-Python", ""), "the installed ngptlab's metadata")


def release(version: str) -> tuple[int, ...]:
    """The numeric release of a version string: '2.11.0+cu130' -> (2, 11, 0), '2.14.0.dev20260101' ->
    (2, 14, 0)."""
    parts = []
    for part in version.split("+")[0].split("."):
        digits = re.match(r"\d+", part)
        if not digits:
            break
        parts.append(int(digits[0]))
        if digits[0] != part:  # '0rc1': the release ends here
            break
    return tuple(parts)


# Longer operators first: ">=" must not be read as ">"
_COMPARE = {">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt,
            "<": operator.lt}


def satisfies(version: str, specifier: str) -> bool:
    """Whether `version` meets every clause of `specifier`, compared on numeric releases padded with zeros
    (PEP 440's reading for these operators, a local part such as +cu130 ignored); an empty specifier: any.
    The operators pyproject uses only: another one is an error, not a guess."""
    for clause in filter(None, (c.strip() for c in specifier.split(","))):
        op = next((o for o in _COMPARE if clause.startswith(o)), None)
        if op is None:
            raise ValueError(f"version clause {clause!r}: ngptlab doctor reads only {' '.join(_COMPARE)}")
        have, want = release(version), release(clause[len(op):])
        width = max(len(have), len(want))
        if not _COMPARE[op](have + (0,) * (width - len(have)), want + (0,) * (width - len(want))):
            return False
    return True


@dataclass(frozen=True)
class Problem:
    requirement: Requirement
    kind: str  # "missing": does not import; "version": outside the declared one
    why: str  # "does not import (ModuleNotFoundError: No module named 'attrs')", "2.10.0 installed, ..."


def import_dependency(module: str) -> object:
    """Import one dependency for real: a package present but broken (a compiled part built for another
    Python or torch) fails here, not in the middle of a run."""
    return importlib.import_module(module)


def problems(requirements: list[Requirement]) -> list[Problem]:
    """The declared dependencies that do not import here, or whose installed version is outside the
    declared one."""
    found = []
    for requirement in requirements:
        try:
            import_dependency(requirement.module)
        except Exception as err:  # any failure to import is the finding, whatever its kind
            found.append(Problem(requirement, "missing", f"does not import ({type(err).__name__}: {err})"))
            continue
        if requirement.specifier:
            try:
                version = importlib.metadata.version(requirement.name)
            except importlib.metadata.PackageNotFoundError:
                continue  # importable without metadata (on sys.path by hand): nothing to compare
            if not satisfies(version, requirement.specifier):
                found.append(Problem(requirement, "version",
                                     f"{version} installed, declared {requirement.specifier}"))
    return found


# The glibc versions manylinux wheels are commonly tagged for. `pip download --platform` takes exactly the
# tags named, adding older ones only to the legacy manylinux2014 (manylinux2010, manylinux1): pip 23.2 fetches
# no rpds-py for Python 3.12 given manylinux_2_28 alone (its wheel is manylinux_2_17). So the command names
# each one up to this machine's glibc.
COMMON_GLIBC = ((2, 17), (2, 24), (2, 27), (2, 28), (2, 31), (2, 34))


def target_platforms() -> list[str]:
    """This machine's pip platform tags for manylinux wheels, or pip's own name for another system."""
    libc, version = platform.libc_ver()
    arch = platform.machine()
    if sys.platform != "linux" or libc != "glibc" or not version:
        return [f"{sys.platform}_{arch}"]
    glibc = tuple(int(part) for part in version.split(".")[:2])
    if glibc < (2, 17):
        return [f"linux_{arch}"]
    tags = [f"manylinux2014_{arch}"]  # the legacy name: pip adds manylinux2010 and manylinux1 to it
    tags += [f"manylinux_{major}_{minor}_{arch}" for major, minor in COMMON_GLIBC if (major, minor) <= glibc]
    return tags + ([] if glibc in COMMON_GLIBC else [f"manylinux_{glibc[0]}_{glibc[1]}_{arch}"])


def download_command(names: list[str]) -> str:
    """The pip command, run on a machine with network, that fetches wheels of `names` and their dependencies
    for THIS machine's Python and platform into wheels/ (for a package that depends on torch, add --no-deps
    and name its missing dependencies: the resolve would fetch a torch besides the one here)."""
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    platforms = " ".join(f"--platform {tag}" for tag in target_platforms())
    return (f"pip download --only-binary=:all: --python-version {python} {platforms} -d wheels/ "
            f"{' '.join(names)}")


def install_command(names: list[str]) -> str:
    """The pip command that installs them here from the carried folder, without network (what is installed
    already, torch included, stays)."""
    return f"pip install --no-index --find-links wheels/ {' '.join(names)}"
