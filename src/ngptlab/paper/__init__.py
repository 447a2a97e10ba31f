"""The nGPT paper's numbers, read from paper_numbers.yaml: the one place they live, each with its source."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml

from ngptlab.errors import NgptlabError

WSD_CITATION = "Hägele et al. 2024, arXiv 2405.18392"  # the WSD schedule (train.schedule: wsd)
PAPER_NUMBERS_PATH = Path(__file__).parent / "paper_numbers.yaml"


@cache
def paper_numbers(path: Path = PAPER_NUMBERS_PATH) -> dict:
    """The whole file, checked for the keys the report reads."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise NgptlabError(f"{path}: cannot read the paper's numbers: {err}") from None
    for key in ("paper", "speedup", "condition", "figures"):
        if key not in (data or {}):
            raise NgptlabError(f"{path}: missing key {key!r}")
    # YAML reads 1.6e6 (no sign in the exponent) as a string: insist on numbers.
    for entry in data["speedup"]:
        _number(path, entry, "factor")
    for entry in data["condition"]:
        _number(path, entry, "q")
        _number(path, entry, "k")
    return data


def _number(path: Path, entry: dict, key: str) -> None:
    if isinstance(entry.get(key), bool) or not isinstance(entry.get(key), int | float):
        raise NgptlabError(f"{path}: {key} = {entry.get(key)!r} is not a number (write 1.6e+6, not 1.6e6)")


def where(entry: dict) -> str:
    """'Sec. 3.1, Fig. 2, p. 6' from an entry's `where` mapping (each part only when known)."""
    loc = entry.get("where", {})
    parts = []
    if loc.get("section"):
        parts.append(f"Sec. {loc['section']}")
    if loc.get("figure"):
        parts.append(f"Fig. {loc['figure']}")
    if loc.get("table"):
        parts.append(f"Table {loc['table']}")
    if loc.get("page"):
        parts.append(f"p. {loc['page']}")
    return ", ".join(parts)


def paper_speedup(context: int) -> dict | None:
    """The paper's speed-up entry at this context length, or None when the paper reports none there."""
    for entry in paper_numbers()["speedup"]:
        if entry["context"] == context:
            return entry
    return None


def paper_condition(arm: str, layer: int, scale: str = "0.5B") -> dict | None:
    """The paper's Q/K condition numbers for this arm and scale at this (1-based) layer, or None."""
    for entry in paper_numbers()["condition"]:
        if (entry["arm"], entry["layer"], entry["scale"]) == (arm, layer, scale):
            return entry
    return None


def paper_figure(key: str) -> dict:
    return paper_numbers()["figures"][key]
