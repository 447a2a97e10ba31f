"""The typed settings (ngptlab/settings/typed.py) are the schema's: every dataclass holds exactly the
properties of its schema node, every default comes from the schema, and a valid params file of every preset
builds them."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest

from ngptlab.config.load import load_params, read_mapping
from ngptlab.layout import REPO_ROOT
from ngptlab.settings import Params, default, load_schema, resolved_node
from ngptlab.settings.typed import SECTIONS

PRESETS = sorted((REPO_ROOT / "workflow" / "presets").glob("*.yaml"))


def dataclass_nodes() -> list[tuple[str, type, dict]]:
    """Every settings dataclass with the schema node it stands for, found by walking Params's fields."""
    found = [("", Params, load_schema())]
    for key, cls, node in found:
        hints = typing.get_type_hints(cls)
        for field in dataclasses.fields(cls):
            child = resolved_node(node["properties"][field.name])
            for hint in (hints[field.name], *typing.get_args(hints[field.name])):
                for inner in (hint, *typing.get_args(hint)):
                    if dataclasses.is_dataclass(inner):
                        target = child
                        if "items" in target:
                            target = resolved_node(target["items"])
                        while "properties" not in target:  # a free-form mapping, maybe of mappings
                            target = resolved_node(target["additionalProperties"])
                        found.append((f"{key}.{field.name}".lstrip("."), inner, target))
    return found


@pytest.mark.parametrize("key, cls, node", dataclass_nodes(), ids=lambda v: v if isinstance(v, str) else "")
def test_each_dataclass_has_exactly_its_schema_nodes_properties(key, cls, node):
    assert sorted(f.name for f in dataclasses.fields(cls)) == sorted(node["properties"]), key or "params"


def test_the_sections_are_the_schemas():
    assert sorted(SECTIONS) == sorted(load_schema()["properties"])


def test_no_dataclass_writes_a_default_of_its_own():
    for _, cls, _ in dataclass_nodes():
        assert all(f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                   for f in dataclasses.fields(cls)), cls.__name__


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.stem)
def test_every_preset_builds_and_an_absent_key_reads_the_schemas_default(preset: Path):
    params = load_params(preset)
    for key in ("cooldown_fraction", "cooldown_shape", "log_every_tokens", "tensorboard", "precision"):
        if key not in read_mapping(preset)["train"]:
            assert getattr(params.train, key) == default(f"train.{key}"), key
