"""Which seeds estimate the speed-up, and how optimistic the seeds that chose the learning rate are.

The learning rate every seed is estimated at is chosen on the swept seeds (ngptlab.speedup.lr_policy): their
runs at it are the ones that won the sweep, so their ln S is biased upward (the winner's curse), while the
held-out seeds (those beyond train.seeds) ran that learning rate without choosing it. So the speed-up is
estimated on the held-out seeds when there are at least MIN_HELD_OUT of them, else on every seed, with a
note that the selection's bias is not removed.

selection_bias measures the curse: mean ln S of the selection seeds minus mean ln S of the held-out seeds,
point estimates only. With at least two seeds on each side the interval is Welch's (scipy.stats.ttest_ind,
unequal variances); with one selection seed it is the interval for one observation against a sample
(Crawford and Howell 1998): (x - mean) +- t_{n-1} s sqrt(1 + 1/n), s the held-out seeds' sd, assuming the
selection seed's ln S varies as theirs does.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence

from scipy import stats

from ngptlab.stats import LEVEL

MIN_HELD_OUT = 2
WELCH = "Welch t-interval (unequal variances) on the difference of mean ln S"
ONE_SELECTION_SEED = ("t-interval for one observation against a sample (Crawford and Howell 1998): "
                      "x - mean +- t(n-1) s sqrt(1 + 1/n), s the held-out seeds' sd of ln S")


def estimate_seeds(seeds: Iterable[int], selection_seeds: Iterable[int]) -> tuple[list[int], str]:
    """(the seeds the speed-up is estimated on, what that means)."""
    seeds, chose = sorted(seeds), set(selection_seeds)
    held_out = [s for s in seeds if s not in chose]
    if len(held_out) >= MIN_HELD_OUT:
        return held_out, (f"estimated on the {len(held_out)} held-out seeds (beyond the selection seeds "
                          f"{sorted(chose)}): the learning rate's selection does not bias it")
    return seeds, (f"estimated on every seed: fewer than {MIN_HELD_OUT} held-out seeds, so the bias of the "
                   f"learning rate's selection on seeds {sorted(chose)} (toward larger speed-ups) is not "
                   "removed")


def selection_bias(per_seed: Sequence[dict], selection_seeds: Iterable[int],
                   level: float = LEVEL) -> dict:
    """{estimate, interval [lo, hi], method, level, df, n_selection, n_held_out, note} from the per-seed
    entries ({seed, speedup{value, bound}}); estimate and interval null, with the note saying why, where
    the seeds do not allow them."""
    chose = set(selection_seeds)
    logs = {p["seed"]: math.log(p["speedup"]["value"]) for p in per_seed
            if p["speedup"]["value"] is not None and p["speedup"]["bound"] is None}
    selected = [v for s, v in sorted(logs.items()) if s in chose]
    held = [v for s, v in sorted(logs.items()) if s not in chose]
    out = {"estimate": None, "interval": None, "method": None, "level": level, "df": None,
           "n_selection": len(selected), "n_held_out": len(held),
           "note": "mean ln S of the selection seeds minus that of the held-out seeds (point estimates)"}
    if not selected or len(held) < 2:
        out["note"] = (f"not measured: {len(selected)} selection and {len(held)} held-out seeds with a point "
                       "estimate (at least 1 and 2 needed)")
        return out
    difference = statistics.fmean(selected) - statistics.fmean(held)
    out["estimate"] = difference
    if len(selected) >= 2:
        test = stats.ttest_ind(selected, held, equal_var=False)
        ci = test.confidence_interval(level)
        out.update(interval=[float(ci.low), float(ci.high)], method=WELCH, df=float(test.df))
    else:
        n, df = len(held), len(held) - 1
        half = float(stats.t.ppf((1 + level) / 2, df)) * statistics.stdev(held) * math.sqrt(1 + 1 / n)
        out.update(interval=[difference - half, difference + half], method=ONE_SELECTION_SEED, df=df)
    return out
