"""A schema violation as one line that names the key at fault and, where there is a fixed set, the allowed
values."""

from __future__ import annotations

import jsonschema


def most_specific(errors: list[jsonschema.ValidationError]) -> jsonschema.ValidationError:
    # The deepest error names the exact key; among equals, prefer the one the schema checked first.
    return max(errors, key=lambda e: (len(e.absolute_path), -len(e.absolute_schema_path)))


def _key(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


def describe(err: jsonschema.ValidationError) -> str:
    if err.validator in ("oneOf", "anyOf") and err.context:
        # name what is wrong inside the alternative that got furthest, not just "none matched"
        deepest = most_specific(list(err.context))
        if len(deepest.absolute_path) > len(err.absolute_path):
            return describe(deepest)
        # at the key itself: the alternative whose type fits the value says most (a list's minItems, a
        # string's enum), one of the wrong type least
        return describe(min(err.context, key=lambda e: {"type": 2, "enum": 1}.get(e.validator, 0)))
    key = _key(err.absolute_path)
    schema = err.schema if isinstance(err.schema, dict) else {}
    if err.validator == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        unknown = sorted(set(err.instance) - set(allowed))
        prefix = f"{key}." if err.absolute_path else ""
        return f"unknown key {prefix}{unknown[0]}; allowed keys: {', '.join(allowed)}"
    if err.validator == "enum":
        allowed = ", ".join(map(str, err.validator_value))
        return f"{key}: {err.instance!r} is not allowed; allowed values: {allowed}"
    if err.validator == "required":
        missing = [k for k in err.validator_value if k not in err.instance]
        return f"{key}: missing required key {missing[0]!r}"
    if err.validator == "type":
        expected = err.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        return f"{key}: expected {expected}, got {type(err.instance).__name__} {err.instance!r}"
    if err.validator in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        relation = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}
        return f"{key}: {err.instance!r} must be {relation[err.validator]} {err.validator_value}"
    return f"{key}: {err.message}"
