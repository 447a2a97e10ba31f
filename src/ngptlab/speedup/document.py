"""One typed reader of results/speedup/<cell>.json (speedup/cell.py documents the file), for every reader of
it: the report, the design and evaluate, which get frozen records instead of picking keys out of dicts.

read_document(path)             the file as a SpeedupDocument; a ResultsError naming the file when it is
                                missing, not JSON, lacks a required key or is not shaped like a speed-up
                                document
SpeedupDocument.from_dict(doc)  the same from a document in memory (analyse_cell's, as the design reads it)
Its records: each arm's speed-up, the targets, runs and sweeps' edges (speedup/arm_records.py); the paired
contrasts, the factorial, its reading and the rival account beside it (speedup/effect_records.py).
Numbers are floats ("inf" read back as inf; ngptlab.results), intervals (lo, hi) tuples. A part an older
speed-up stage did not write is None or empty, so that the report can say what is missing; a file written
by the stage always has cell, baseline, arms, targets and runs (the report checks them: report/kit/load.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ngptlab.errors import ResultsError
from ngptlab.results import read_json
from ngptlab.speedup.arm_records import ArmEntry, RunEntry, Target, TuningEdge
from ngptlab.speedup.effect_records import Contrast, Factorial, Reading, Rivals


@dataclass(frozen=True)
class SpeedupDocument:
    """results/speedup/<cell>.json; `against` reads it against a further baseline of speedup.baseline."""

    cell: str | None
    scale: str | None
    context: int | None
    baseline: str | None
    method: str | None
    seeds: tuple[int, ...]
    arms_order: tuple[str, ...]
    verdict_rule: str | None
    equivalence_margin: float | None
    resolve_ratio: float | None
    min_seeds: int | None  # bootstrap.min_seeds: the fewest seeds given a bootstrap interval
    bootstrap_level: float | None  # bootstrap.level: the bootstrap intervals', as the file states it
    arms: Mapping[str, ArmEntry]
    targets: tuple[Target, ...]
    contrasts: tuple[Contrast, ...]
    factorial: Factorial | None
    angle_factorial: Factorial | None
    reading: Reading | None
    rivals: Rivals | None
    separation: Mapping | None  # speedup/separation.py: whether the angle square separates the accounts
    dose_response: Mapping | None  # speedup/dose_response.py: each account's line over measured mechanisms
    runs: tuple[RunEntry, ...]
    tuning: tuple[TuningEdge, ...] | None
    by_baseline: Mapping[str, SpeedupDocument] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping) -> SpeedupDocument:
        def optional(key: str, read: Callable[[Any], Any]) -> Any:
            return None if d.get(key) is None else read(d[key])

        primary = cls(
            cell=d.get("cell"), scale=d.get("scale"), context=d.get("context"), baseline=d.get("baseline"),
            method=d.get("method"), seeds=tuple(d.get("seeds") or ()),
            arms_order=tuple(d.get("arms_order") or d.get("arms") or ()), verdict_rule=d.get("verdict_rule"),
            equivalence_margin=d.get("equivalence_margin"), resolve_ratio=d.get("resolve_ratio"),
            min_seeds=(d.get("bootstrap") or {}).get("min_seeds"),
            bootstrap_level=(d.get("bootstrap") or {}).get("level"), **_against_one_baseline(d),
            factorial=optional("factorial", Factorial.from_dict),
            angle_factorial=optional("angle_factorial", Factorial.from_dict),
            reading=optional("reading", Reading.from_dict), rivals=optional("rivals", Rivals.from_dict),
            separation=d.get("separation"), dose_response=d.get("dose_response"),
            runs=tuple(RunEntry.from_dict(r) for r in d.get("runs") or ()),
            tuning=optional("tuning", lambda t: tuple(TuningEdge.from_dict(e) for e in t["edges"])))
        further = {baseline: dataclasses.replace(primary, baseline=baseline, **_against_one_baseline(view))
                   for baseline, view in (d.get("by_baseline") or {}).items()}
        return dataclasses.replace(primary, by_baseline=further)

    def against(self, baseline: str) -> SpeedupDocument:
        """The document read against one of its baselines: the primary's is itself, a further one's has that
        baseline's targets, arms and contrasts (arms without a within-run or interpolated estimate)."""
        return self if baseline == self.baseline else self.by_baseline[baseline]


def _against_one_baseline(d: Mapping) -> dict:
    """The fields that differ between baselines: arms, targets and contrasts (the primary's in the document
    itself, a further baseline's in its by_baseline entry)."""
    return {"arms": {arm: ArmEntry.from_dict(entry) for arm, entry in (d.get("arms") or {}).items()},
            "targets": tuple(Target.from_dict(t) for t in d.get("targets") or ()),
            "contrasts": tuple(Contrast.from_dict(c) for c in d.get("contrasts") or ())}


def read_document(path: str | Path, what: str = "speed-up", required: Sequence[str] = ()) -> SpeedupDocument:
    """results/speedup/<cell>.json as a SpeedupDocument; a ResultsError naming the file when it is missing,
    not JSON, lacks a `required` key, or is not a speed-up document."""
    doc = read_json(path, what)
    for key in required:
        if key not in doc:
            raise ResultsError(f"{path}: missing key {key!r}")
    try:
        return SpeedupDocument.from_dict(doc)
    except (KeyError, TypeError, AttributeError, ValueError) as err:
        raise ResultsError(f"{path}: not a speed-up document ({type(err).__name__}: {err})") from None
