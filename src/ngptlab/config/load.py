"""Read a params file and validate it once, before anything runs, in two layers:
1. the JSON schema (schema.yaml beside this module: types, unknown keys, arm and scale names, signs);
2. the cross-field checks the schema cannot express (checks.py).
Either layer raises one ParamsError whose message names the file and the key, and where there is a fixed set,
the allowed values. What a valid file gives is its typed settings (ngptlab.settings.Params), every
optional key at its schema default.
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
from ngptlab.settings import Params, load_schema


def load_params(path: str | Path) -> Params:
    """Read and validate a params file into its typed settings; raise ParamsError naming the file and the key
    at fault."""
    return validate_params(read_mapping(path), source=str(path))


def read_mapping(path: str | Path) -> dict:
    """A params file's mapping as written, not yet validated: for the tools that edit or compare the file
    itself (plan --set, Snakemake's config)."""
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


def validate_params(params: dict, source: str = "params") -> Params:
    """Finite numbers, the schema, then cross-field checks; the typed settings of a valid mapping. Raises
    ParamsError with one clear message."""
    where = non_finite(params)
    if where:
        raise ParamsError(f"{source}: {where[0]}: {where[1]} is not a finite number; every number of a "
                          "params file must be (NaN and infinity are refused)")
    validator = jsonschema.Draft202012Validator(load_schema())
    errors = list(validator.iter_errors(params))
    if errors:
        raise ParamsError(f"{source}: {describe(most_specific(errors))}")
    settings = Params.of(params)
    problem = cross_field_problem(settings)
    if problem:
        raise ParamsError(f"{source}: {problem}")
    return settings
