"""The angle per step at the schedule's peak, read off a run's metrics rows (torch-free: the plan reads it).

Each row holds, per matrix kind, the mean angle per optimizer step since the row before (step_angle,
observe/step_angle.py) and the learning rate at the row (lr). Per kind:

    peak = median over the rows near the peak of  step_angle x lr_peak / lr

(rows near the peak: lr >= NEAR_PEAK lr_peak, the stable part of the schedule, where warmup and decay have
not shrunk the step; the ratio takes out what shrinkage is left, as the angle scales with the learning rate,
train/angle_targets.py).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping

NEAR_PEAK = 0.5  # rows whose learning rate is at least this fraction of the peak's


def peak_angles(rows: Iterable[Mapping], lr_peak: float) -> dict[str, float]:
    """The module docstring's peak angle per kind (empty: no row near the peak has step angles)."""
    ratios: dict[str, list[float]] = {}
    for row in rows:
        angles, lr = row.get("step_angle"), row.get("lr")
        if not angles or not lr or lr < NEAR_PEAK * lr_peak:
            continue
        for kind, angle in angles.items():
            ratios.setdefault(kind, []).append(angle * lr_peak / lr)
    return {kind: statistics.median(values) for kind, values in ratios.items()}
