"""What every params key does to the results, as its schema entry says (config/schema.yaml, its top
description): the stages whose results it shapes (`shapes`, with `grid` for the keys that name the grid's
points, and `only_schedule` for a WSD-only key), or how it changes only the running (`execution`).

The lineage keys (plan/lineage.py) are made of these classes, so no list of settings is written anywhere
else; a key the schema leaves unclassified is an error here, before any key is computed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from ngptlab.settings.schema import load_schema, resolved_node

STAGES = ("prepare", "trunk", "train", "condition", "speedup", "evaluate", "report")
PER_RUN = ("trunk", "train", "condition")  # the stages with a job per run (or trunk), keyed per arm
GRID = "grid"
EXECUTION = ("speed", "roundoff", "placement", "cadence", "view", "planning")


@dataclass(frozen=True)
class Role:
    """One key's class: the stages it shapes (empty for an execution setting) or why it shapes none."""
    key: str  # dotted, from the top of the params file: "train.grad_clip"
    shapes: tuple[str, ...]
    only_schedule: str | None
    execution: str | None
    per_arm: tuple[str, ...] = ()  # the arms a per-arm key names; each arm's runs see only their own part


def _arms_named(node: dict, key: str) -> tuple[str, ...]:
    """The arms a per-arm key ({cell: {arm: value}}) can name: its schema's enum of arm names."""
    try:
        return tuple(resolved_node(resolved_node(node["additionalProperties"])["propertyNames"])["enum"])
    except (KeyError, TypeError) as error:
        raise ValueError(f"params schema: {key} is `per_arm` but names no arms ({{cell: {{arm: ...}}}} with "
                         "propertyNames.enum)") from error


def _walk(node: dict, key: str) -> Iterator[Role]:
    node = resolved_node(node)
    shapes, execution = node.get("shapes"), node.get("execution")
    if shapes is not None or execution is not None:
        if (shapes is None) == (execution is None):
            raise ValueError(f"params schema: {key} has both `shapes` and `execution`; give one")
        unknown = set(shapes or ()) - {*STAGES, GRID} or ({execution} - {None, *EXECUTION})
        if unknown:
            raise ValueError(f"params schema: {key}: unknown class {sorted(unknown)[0]!r}")
        per_arm = _arms_named(node, key) if node.get("per_arm") else ()
        yield Role(key, tuple(shapes or ()), node.get("only_schedule"), execution, per_arm)
    elif "properties" in node:
        for name, child in node["properties"].items():
            yield from _walk(child, f"{key}.{name}" if key else name)
    else:
        raise ValueError(f"params schema: {key} says neither which stages it shapes (`shapes`) nor that it "
                         "only changes how they run (`execution`)")


@cache
def roles() -> tuple[Role, ...]:
    """Every classified key of the schema, in its order."""
    return tuple(_walk(load_schema(), ""))


def value_at(params: Mapping, key: str) -> Any:
    """The value of a dotted key in a (filled) params mapping."""
    value: Any = params
    for part in key.split("."):
        value = value[part]
    return value


def _arm_part(value: Mapping, arm: str) -> dict:
    return {cell: by_arm[arm] for cell, by_arm in sorted(value.items()) if arm in by_arm}


def shaping(params: Mapping, stage: str, schedule: str | None = None,
            arm: str | None = None) -> dict[str, Any]:
    """The settings that shape `stage` (or, with GRID, the grid's), by dotted key, from a params mapping
    with its defaults filled in (dataclasses.asdict of ngptlab.settings.Params); a key limited to one
    schedule only for that schedule's jobs; a per-arm key only for that arm's jobs, and only its part."""
    def value(role: Role) -> Any:
        return _arm_part(value_at(params, role.key), arm) if role.per_arm else value_at(params, role.key)

    return {role.key: value(role) for role in roles()
            if stage in role.shapes and role.only_schedule in (None, schedule)
            and (not role.per_arm or arm in role.per_arm)}
