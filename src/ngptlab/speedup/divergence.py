"""Diverged held-out seeds: left out of the estimate, replaced, and counted as an outcome of each arm.

A held-out seed trains one learning rate per (arm, budget), the one chosen on the swept seeds
(speedup/lr_policy.py). When one of those runs diverges, the seed's speed-up would rest on its other budgets
(a bound, or a law fitted through fewer points): a biased value, and a seed silently fewer. So an (arm, seed)
with a diverged run among the runs its estimate reads is lost to that arm: its entry leaves the arm's
per_seed (and with it the interval, the contrasts and the factorial) for `replaced`, saying which runs
diverged. A baseline's diverged seed is lost to every arm: the seed's target is no longer the baseline's loss
at the reference budget. `ngptlab plan --add-seeds` plans one replacement seed per lost seed, at the same
learning rate (plan/seeds.py: replacements); until it has trained, the estimate reads fewer seeds and its
note says so.

Divergence is an outcome of the arm too: diverged held-out seeds / held-out seeds, with the exact
(Clopper-Pearson) interval of a binomial proportion (scipy.stats.binomtest), so an arm that diverges often
shows it instead of hiding it behind replacements.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scipy import stats

from ngptlab.results import RunResult
from ngptlab.stats import LEVEL

CLOPPER_PEARSON = "exact binomial (Clopper-Pearson) interval, scipy.stats.binomtest"


ArmSeed = tuple[str, int]


def diverged_runs(results: Iterable[RunResult], chosen: Mapping[ArmSeed, float],
                  selection_seeds: Iterable[int]) -> tuple[dict[ArmSeed, list[str]], set[ArmSeed]]:
    """({(arm, held-out seed): names of its runs at the chosen learning rate that did not complete}, every
    (arm, held-out seed) with a run at the chosen learning rate): the held-out seeds each arm trained and
    those it lost."""
    chose = set(selection_seeds)
    lost: dict[ArmSeed, list[str]] = {}
    trained: set[ArmSeed] = set()
    for r in results:
        key = (r.spec.arm, r.spec.seed)
        if r.spec.seed in chose or chosen.get((r.spec.arm, r.spec.budget)) != r.spec.lr:
            continue
        trained.add(key)
        if not r.usable:
            lost.setdefault(key, []).append(r.spec.name)
    return lost, trained


def lost_seeds(arm: str, baseline: str, lost: Mapping[ArmSeed, list[str]]) -> dict[int, str]:
    """{seed: why it is left out of the arm's estimate}: the arm's own diverged runs, or the baseline's."""
    why: dict[int, str] = {}
    for (a, seed), runs in sorted(lost.items()):
        if a == arm:
            why[seed] = f"diverged: {', '.join(runs)}"
        elif a == baseline:
            why.setdefault(seed, f"the baseline's run diverged ({', '.join(runs)}): the seed has no target "
                                 "at the reference budget")
    return why


def divergence_rate(diverged: int, seeds: int, level: float = LEVEL) -> dict:
    """{diverged, seeds, rate, interval [lo, hi], level, method} of diverged / held-out seeds; rate and
    interval null without held-out seeds."""
    out = {"diverged": diverged, "seeds": seeds, "rate": None, "interval": None, "level": level,
           "method": CLOPPER_PEARSON}
    if seeds:
        ci = stats.binomtest(diverged, seeds).proportion_ci(level, method="exact")
        out.update(rate=diverged / seeds, interval=[float(ci.low), float(ci.high)])
    return out


def arm_divergence(arm: str, lost: Mapping[ArmSeed, list[str]], trained: set[ArmSeed]
                   ) -> dict:
    """The arm's divergence outcome: its own diverged held-out seeds over its held-out seeds (a baseline's
    divergence is the baseline's outcome, not this arm's), and which ones."""
    seeds = sorted(s for a, s in trained if a == arm)
    diverged = [s for s in seeds if (arm, s) in lost]
    return {**divergence_rate(len(diverged), len(seeds)), "diverged_seeds": diverged}


def replaced_note(arm: str, replaced: list[dict], reads: int, fullest: int) -> str:
    """What the arm's estimate reads in place of its lost seeds, for its summary's note: flagged when it
    reads fewer held-out seeds than the arm reading the most (its replacement has not trained yet)."""
    seeds = ", ".join(str(r["seed"]) for r in replaced)
    note = f"held-out seed(s) {seeds} of {arm} left out of the estimate (see replaced)"
    if reads < fullest:
        return (f"{note}; it reads {reads} held-out seed(s), fewer than the {fullest} of the arm reading the "
                "most, until the replacement seed trains (`ngptlab plan --add-seeds` plans one per lost "
                "seed)")
    return f"{note}; replaced by later seeds at the same learning rate"
