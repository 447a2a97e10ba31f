"""The params file's schema (config/schema.yaml) as the code reads it: the arm names, and the value of an
optional key that a params file leaves out, its schema `default:`.

A params mapping stays as the file gives it: runs' fingerprints and the lineage keys hash sections as given,
so filling defaults into them would make every finished run look stale. Code reads an optional key through
`setting` instead, which falls back on the schema's default: one place for every default.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import yaml

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "config" / "schema.yaml"


@cache
def load_schema() -> dict:
    with open(SCHEMA_PATH) as f:
        return yaml.safe_load(f)


def allowed_arms() -> list[str]:
    return list(load_schema()["$defs"]["arm"]["enum"])


def resolved_node(node: dict) -> dict:
    """A schema node with a local `$ref` followed (keywords beside the `$ref` win)."""
    ref = node.get("$ref")
    if not ref:
        return node
    target = load_schema()
    for part in ref.removeprefix("#/").split("/"):
        target = target[part]
    return {**resolved_node(target), **{k: v for k, v in node.items() if k != "$ref"}}


def default(key: str) -> Any:
    """The schema's default of a dotted key, e.g. "train.cooldown_fraction"; `*` stands for any name of a
    mapping (e.g. "train.resources.*.nodes"). A key without a default is a KeyError: it is required."""
    node = load_schema()
    for part in key.split("."):
        node = resolved_node(node)
        node = node["additionalProperties"] if part == "*" else node["properties"][part]
    node = resolved_node(node)
    if "default" not in node:
        raise KeyError(f"{key}: the params schema gives no default")
    return copy.deepcopy(node["default"])  # a fresh [] or {} for whoever changes it


def setting(section: Mapping, key: str) -> Any:
    """The value of `key` (dotted, from the top of the params file) in `section`, the mapping that holds its
    last part: the file's value where it gives one, else the schema's default."""
    name = key.rpartition(".")[2]
    return section[name] if name in section else default(key)


def baselines(speedup: Mapping) -> list[str]:
    """speedup.baseline as a list: one arm, or several whose first is the primary baseline."""
    named = speedup["baseline"]
    return [named] if isinstance(named, str) else list(named)
