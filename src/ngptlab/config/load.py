"""Read a params file and validate it once, before anything runs, in two layers:
1. the JSON schema (schema.yaml beside this module: types, unknown keys, arm and scale names, signs);
2. the cross-field checks the schema cannot express (checks.py).
Either layer raises one ParamsError whose message names the file and the key, and where there is a fixed set,
the allowed values. The mapping returned is the file's as given: optional keys are read through
ngptlab.settings, never filled in, since runs' fingerprints and the lineage keys hash the sections as given.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from ngptlab.config.checks import cross_field_problem
from ngptlab.config.messages import describe, most_specific
from ngptlab.errors import ParamsError
from ngptlab.settings import load_schema


def load_params(path: str | Path) -> dict:
    """Read and validate a params file; raise ParamsError naming the file and the key at fault."""
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"{path}: params file not found")
    try:
        with open(path) as f:
            params = yaml.safe_load(f)
    except yaml.YAMLError as err:
        raise ParamsError(f"{path}: not valid YAML: {err}") from None
    if params is None:
        raise ParamsError(f"{path} is empty; copy params.yaml from a clean checkout or a preset from "
                          "workflow/presets/")
    if not isinstance(params, dict):
        raise ParamsError(f"{path}: expected a mapping of sections (prepare, train, ...), "
                          f"got {type(params).__name__}")
    validate_params(params, source=str(path))
    return params


def non_finite(value: Any, key: str = "") -> tuple[str, float] | None:
    """The first NaN or infinity in a params mapping, as (dotted key, value): JSON Schema's bounds let them
    through (NaN compares false with every bound, and `exclusiveMinimum: 0` holds for infinity)."""
    if isinstance(value, float) and not math.isfinite(value):
        return key or "<top level>", value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for name, item in items:
        found = non_finite(item, f"{key}[{name}]" if isinstance(name, int) else f"{key}.{name}".lstrip("."))
        if found:
            return found
    return None


def validate_params(params: dict, source: str = "params") -> None:
    """Finite numbers, the schema, then cross-field checks. Raises ParamsError with one clear message."""
    where = non_finite(params)
    if where:
        raise ParamsError(f"{source}: {where[0]}: {where[1]} is not a finite number; every number of a "
                          "params file must be (NaN and infinity are refused)")
    validator = jsonschema.Draft202012Validator(load_schema())
    errors = list(validator.iter_errors(params))
    if errors:
        raise ParamsError(f"{source}: {describe(most_specific(errors))}")
    problem = cross_field_problem(params)
    if problem:
        raise ParamsError(f"{source}: {problem}")
