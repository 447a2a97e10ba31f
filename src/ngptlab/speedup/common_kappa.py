"""Kappa read at one token count across a cell's arms, so that arms trained to different budgets compare.

kappa is logged at evaluation points (observe/observer.py: a metrics row's `kappa`) and grows or falls with
tokens, while each arm's estimate run ends at the arm's own largest budget read (at a x10 speed-up gpt's at
20B tokens, ngpt's at 5B): each run's last kappa would compare arms at different points of training. So
every arm is read at one count per cell:
  T_common = min over the estimate runs of every arm (rivals.estimate_runs: each seed's chosen-lr run at the
             arm's largest budget) of the tokens of the run's last kappa of the heads
the largest count at or above which every such run has a measurement of its own. At T_common, per run and
per key (the input embedding's kappa, EMBED_KEY; the median of the layer 3-4 Q and K head medians, HEADS):
  ln kappa(T) = ln kappa(t0) + (ln T - ln t0) / (ln t1 - ln t0) (ln kappa(t1) - ln kappa(t0))
between the nearest measurement at or below, t0, and the nearest above, t1 (exact where t0 = T). Linear in
ln-ln since kappa moves roughly as a power of tokens, and interpolated rather than the nearest at or below,
which would read a run up to one kappa interval early and, where kappa grows, bias it low. kappa is measured
at every train.condition_every_evals-th evaluation point and the last, so T_common, one run's last, falls
between two of another run's measurements unless it lies on that run's schedule. A run with no
measurement at or below T_common is read at its first (the nearest); one without any above, at its last; a
singular (infinite) kappa beside T stays infinite. The tokens actually read are recorded per run and key
(document: `kappa_common`).
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Iterable, Mapping

from ngptlab.results import RunResult

EMBED_KEY = "embed_in_cov_condition"
HEAD_KEYS = tuple(f"layer{layer}_{kind}_head_condition_median" for layer in (3, 4) for kind in ("q", "k"))
HEADS = "layer34_qk_head_condition_median"  # the median over HEAD_KEYS
KAPPA_LABELS = {EMBED_KEY: "κ input embedding covariance", HEADS: "κ heads, layers 3-4 (median of Q, K)"}


def rule() -> str:
    return ("every arm's kappa is read at T_common, the fewest tokens among the last kappa measurements of "
            "the heads in the runs entering the cell's estimate (each arm's chosen-learning-rate run at its "
            "largest budget), ln kappa interpolated linearly in ln tokens between the nearest measurements "
            "at or below and above it; a run without one at or below is read at its first")


def series(result: RunResult, key: str) -> list[tuple[float, float]]:
    """[(tokens, kappa)] of one key (EMBED_KEY or HEADS) at the run's evaluation points, in token order."""
    out = []
    for tokens, values in result.observed.get("kappa", []):
        if key == HEADS:
            heads = [values[k] for k in HEAD_KEYS if k in values]
            value = statistics.median(heads) if heads else None
        else:
            value = values.get(key)
        if value is not None:
            out.append((tokens, value))
    return out


def at_tokens(points: list[tuple[float, float]], tokens: float) -> dict | None:
    """{kappa, tokens} read from one key's series at `tokens` (module docstring); None for no series."""
    if not points:
        return None
    counts = [t for t, _ in points]
    i = bisect.bisect_right(counts, tokens)  # points[:i] at or below
    if i == 0:
        t, v = points[0]
        return {"kappa": v, "tokens": t}
    t0, v0 = points[i - 1]
    if t0 == tokens or i == len(points):
        return {"kappa": v0, "tokens": t0}
    t1, v1 = points[i]
    if math.inf in (v0, v1):
        return {"kappa": math.inf, "tokens": tokens}
    if v0 <= 0 or v1 <= 0:  # no logarithm: the nearest at or below
        return {"kappa": v0, "tokens": t0}
    share = math.log(tokens / t0) / math.log(t1 / t0)
    return {"kappa": math.exp(math.log(v0) + share * math.log(v1 / v0)), "tokens": tokens}


def kappa(result: RunResult, tokens: float = math.inf) -> dict[str, float | None]:
    """{EMBED_KEY, HEADS}: the run's kappa at `tokens` (module docstring); by default its last."""
    return {key: None if (read := at_tokens(series(result, key), tokens)) is None else read["kappa"]
            for key in KAPPA_LABELS}


def common_tokens(runs: Iterable[RunResult]) -> float | None:
    """T_common: the fewest tokens among the runs' last kappa of the heads; None where no run has one."""
    last = [points[-1][0] for r in runs if (points := series(r, HEADS))]
    return min(last) if last else None


def common_kappa(runs_of: Mapping[str, Mapping[int, RunResult]]) -> dict:
    """{tokens (T_common), rule, arms {arm: [{seed, run, EMBED_KEY {kappa, tokens} | null, HEADS ...}]}}
    from arm -> {seed: the run entering that seed's estimate} (rivals.estimate_runs)."""
    tokens = common_tokens(r for runs in runs_of.values() for r in runs.values())
    arms = {}
    for arm, runs in runs_of.items():
        arms[arm] = [{"seed": s, "run": r.spec.name,
                      **{key: None if tokens is None else at_tokens(series(r, key), tokens)
                         for key in KAPPA_LABELS}}
                     for s, r in sorted(runs.items())]
    return {"tokens": tokens, "rule": rule(), "arms": arms}


def by_seed(common: Mapping, arm: str, key: str = HEADS) -> dict[int, float]:
    """{seed: kappa of `key` at T_common} of one arm in common_kappa's document (seeds lacking it left
    out)."""
    return {e["seed"]: e[key]["kappa"] for e in common["arms"].get(arm, []) if e[key] is not None}
