"""What a WSD grid's shared trunks save and what they hold on disk, for `ngptlab plan`.

Tokens: every run trained alone would train its whole budget; with shared trunks a trunk's segments are
trained once and each WSD run trains only its cooldown branch, so budgets B_1 < ... < B_k of a trunk cost
B_k + f x (B_1 + ... + B_(k-1)) tokens (ngptlab.grid.trunks). Cosine runs (the default schedule, or a WSD
grid's calibration runs) share nothing and cost their budget.

Disk: each segment keeps the trunk's full training state at its end (train/trunk.py) until the branches
that start there are done; the latest state of a trunk is never deleted, so that a larger budget added
later continues the trunk instead of training it again from step 0. A state is fp32 weights (4 bytes per
parameter) and AdamW's two fp32 moments (8 bytes): 12 bytes per parameter, the rest (RNG, metrics rows)
is negligible.
"""

from __future__ import annotations

from ngptlab.checkpoint_cost import STATE_BYTES_PER_PARAMETER
from ngptlab.schedule import cooldown_fraction, cooldown_shape, is_wsd, shares_trunks
from ngptlab.schedule import of as schedule_of
from ngptlab.settings import Train


def sharing_summary(train: Train, runs: list[dict], segments: list[dict]) -> dict:
    """Tokens trained with and without sharing, and the kept states' disk, from the rows of
    plan/estimate.py (runs with `trained_tokens` and `budget`, segments with `trained_tokens`, `trunk`
    and `state_gb`).

    kept_states_peak_gb is the worst case, every segment's state existing at once (no branch done yet);
    kept_states_steady_gb the least that stays, one latest state per trunk."""
    latest: dict[str, float] = {}
    for segment in segments:
        latest[segment["trunk"]] = segment["state_gb"]  # every state of a trunk has the same size
    wsd = is_wsd(train)
    return {"schedule": schedule_of(train),
            "cooldown_fraction": cooldown_fraction(train) if wsd else None,
            "cooldown_shape": cooldown_shape(train) if wsd else None,
            "n_trunks": len(latest),
            "tokens_trained": sum(r["trained_tokens"] for r in [*runs, *segments]),
            "tokens_without_sharing": sum(r["budget"] for r in runs),
            "kept_states_peak_gb": sum(s["state_gb"] for s in segments),
            "kept_states_steady_gb": sum(latest.values())}


def sharing_lines(summary: dict) -> list[str]:
    """The plan's text lines on the schedule, the tokens sharing saves and the kept states' disk."""
    if shares_trunks(summary["schedule"]):
        lines = [f"schedule: wsd, cooldown_fraction {summary['cooldown_fraction']:g} "
                 f"({summary['cooldown_shape']}): {summary['n_trunks']} trunks; each WSD run trains its "
                 f"cooldown branch only, its trunk's segments (below the runs) train the steps before"]
    else:
        lines = ["schedule: cosine: every run trains its whole budget from step 0, no trunk is shared"]
    trained, alone = summary["tokens_trained"], summary["tokens_without_sharing"]
    ratio = trained / alone if alone else 1.0
    lines.append(f"tokens trained: {trained:.4g}; without shared trunks (every run its whole budget from "
                 f"step 0): {alone:.4g}; ratio {ratio:.3f}")
    if summary["n_trunks"]:
        lines += [f"kept trunk states ({STATE_BYTES_PER_PARAMETER} bytes per parameter: fp32 weights and "
                  f"AdamW's two moments): peak {_disk(summary['kept_states_peak_gb'])} of disk if every "
                  f"segment's state exists at once, at least {_disk(summary['kept_states_steady_gb'])} "
                  f"(one per trunk)",
                  "  a trunk's latest state is always kept, so that a larger budget continues the trunk "
                  "instead of training it again from step 0; the others go once their branches are done",
                  "  they live under runs/trunks/ (in .dvcignore): never cached nor pushed to a DVC remote"]
    else:
        lines.append("kept trunk states: none (no WSD trunk)")
    return lines


def _disk(gb: float) -> str:
    return f"{gb / 1000:.3g} TB" if gb >= 1000 else f"{gb:.3g} GB"
