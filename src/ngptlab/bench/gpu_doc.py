"""`bench gpu`'s JSON across calls: a later call adds its parts to the file an earlier one wrote, on the same
device and torch; nothing measured is lost (a part measured again keeps its earlier measurement under
`replaced`), and a file made elsewhere is refused in one line rather than mixed.
"""

from __future__ import annotations

import json
from pathlib import Path

from ngptlab.errors import ParamsError

FORMAT = "ngptlab.bench-gpu/3"
IDENTITY = ("device", "device_name", "torch")  # what a merged file's measurements must share
DERIVED = ("checks", "exit_code", "failures", "complete", "wall_s")  # recomputed by every call


def earlier(path: Path, identity: dict) -> dict:
    """The measurements an earlier call wrote to `path` ({} where there is none), checked to come from
    this device and torch."""
    if not path.is_file():
        return {}
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ParamsError(f"{path}: not JSON ({err}); remove it or pass --write another file") from None
    if doc.get("format") != FORMAT:
        raise ParamsError(f"{path}: format {doc.get('format')!r}, not {FORMAT!r}: its parts cannot be "
                          "merged; remove it or pass --write another file")
    made, now = ({k: d.get(k) for k in IDENTITY} for d in (doc, identity))
    if made != now:
        shown = lambda d: f"{d['device']} ({d['device_name']}), torch {d['torch']}"  # noqa: E731
        raise ParamsError(f"{path}: made on {shown(made)}, this call runs on {shown(now)}: its parts cannot "
                          "be merged; remove it or pass --write another file")
    return {k: v for k, v in doc.items() if k not in DERIVED}


def record(doc: dict, part: str, measured: dict) -> None:
    """Put a part's measurement in the document, keeping one it replaces."""
    if part in doc:
        doc.setdefault("replaced", []).append({"part": part, "measured": doc[part],
                                               "status": doc.get("parts", {}).get(part)})
    doc[part] = measured
