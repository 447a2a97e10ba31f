"""The params file's schema (config/schema.yaml) as the code reads it: its nodes (a `$ref` followed), the arm
names (from models/arms.yaml), and a key's schema `default:`, the one place a default is written
(settings/typed.py fills them in).
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from ngptlab.models import arms

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "config" / "schema.yaml"


@cache
def load_schema() -> dict:
    """The schema, its arm names filled in from the table of arms (models/arms.yaml), where alone they are
    written."""
    with open(SCHEMA_PATH) as f:
        schema = yaml.safe_load(f)
    schema["$defs"]["arm"]["enum"] = arms.names()
    schema["$defs"]["angle_arm"]["enum"] = list(arms.turns_like())
    return schema


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
