"""What one planted world's documents say, set beside the truth planted in it: one record per cell.

All on the log scale: an arm's ln S (its speed-up's log mean and its interval, logged), each factorial
effect and each paired contrast (ln S_a - ln S_b), each with the planted value it estimates; the primary
effect's claim (held_claim of its p-values: exceeds, falls_short, equivalent, or None) and the reading.
with_estimand adds, beside each planted value, the estimand's value: what the noise-free world estimates.
Where the truth plants kappa and the angle (every truth does, design/placements.py), also the dose-response
reading of each account (read_fits: the cell's reading of the conditioning and effective-learning-rate
accounts wherever it fits a line, design/table.py) and each account's slope as an estimate ("slope
<account>"), its planted value the slope the planted values themselves give (expected_fits).
"""

from __future__ import annotations

import math

from ngptlab.design.mechanisms import expected_fits, read_fits
from ngptlab.design.truths import Truth
from ngptlab.speedup.arm_records import Interval
from ngptlab.speedup.document import SpeedupDocument
from ngptlab.speedup.equivalence import held_claim


def _logged(interval: Interval | None) -> list[float] | None:
    return None if interval is None else [math.log(x) for x in interval]


def cell_outcome(doc: SpeedupDocument, truth: Truth, holm_reading: str | None = None) -> dict:
    """{reading, accounts {account: its reading}, arms (the cell's), claim, holm_reading, estimates {name:
    {estimate, interval, planted}}, and where the truth plants mechanisms dose_response and dose_expected
    {account: read_fits' entry}: the world's reading and the planted values'} of one cell's document
    (reading: the conditioning account's); estimate names: "primary", "arm <arm>", "effect <name>",
    "contrast <label>", "slope <account>"."""
    reading = doc.reading
    planted = {arm: math.log(truth.speedup(arm)) for arm in doc.arms_order}
    estimates = {"primary": {"estimate": reading.effect.log_estimate, "interval": reading.effect.log_interval,
                             "planted": truth.effect(reading.primary)}}
    for arm, entry in doc.arms.items():
        if arm != doc.baseline:
            estimates[f"arm {arm}"] = {"estimate": entry.speedup.log_mean,
                                       "interval": _logged(entry.speedup.interval), "planted": planted[arm]}
    for name, effect in (doc.factorial.effects if doc.factorial else {}).items():
        estimates[f"effect {name}"] = {"estimate": effect.log_estimate, "interval": effect.log_interval,
                                       "planted": truth.effect(name)}
    for contrast in doc.contrasts:
        estimates[f"contrast {contrast.label}"] = {"estimate": contrast.log_mean,
                                                   "interval": contrast.log_interval,
                                                   "planted": planted[contrast.a] - planted[contrast.b]}
    record = {"reading": reading.pattern_words or reading.words,
              "accounts": {name: account["reading"] for name, account in reading.accounts.items()},
              "arms": list(doc.arms_order),
              "claim": held_claim(reading.effect.p_values, reading.effect.level),
              "holm_reading": holm_reading, "estimates": estimates}
    dose = doc.dose_response
    if dose is not None and truth.mechanism(doc.baseline) is not None:
        record["dose_response"] = read_fits(dose["accounts"])
        expected = expected_fits(truth, tuple(doc.arms_order), doc.baseline, dose["margin"])
        record["dose_expected"] = expected
        for name, read in record["dose_response"].items():
            if read["slope"] is not None and expected[name]["slope"] is not None:
                estimates[f"slope {name}"] = {"estimate": read["slope"], "interval": read["interval"],
                                              "planted": expected[name]["slope"]}
    return record


def world_outcome(analysed: dict, truth: Truth) -> dict[str, dict]:
    """{cell: cell_outcome} of one analysed world (design/protocol.py analysed_world)."""
    holm = {row.cell: row.holm_reading for row in analysed["across"] or []}
    return {cell: cell_outcome(doc, truth, holm.get(cell)) for cell, doc in analysed["documents"].items()}


def with_estimand(outcomes: list[dict[str, dict]], noise_free: dict[str, dict]) -> None:
    """Give every estimate of every world's outcome its `estimand`: the noise-free world's estimate of the
    same name (None where that world has none, e.g. a speed-up beyond the measurable range)."""
    for outcome in outcomes:
        for cell, record in outcome.items():
            reference = noise_free.get(cell, {}).get("estimates", {})
            for name, entry in record["estimates"].items():
                entry["estimand"] = reference.get(name, {}).get("estimate")
