"""A replacement seed for each held-out seed that diverged: part of `ngptlab plan --add-seeds N`.

The speed-up leaves a held-out seed out of an arm's estimate when one of its runs diverged, or the
baseline's did (speedup/divergence.py). So that the estimate still reads N seeds, the plan gives the arm one
new seed per lost one, at the same learning rate and budgets as its other held-out seeds (its
train.added_seeds entries): the next unused seed number of the cell. The k-th replacement of every arm is
the same seed number, so replacements stay paired across arms, and the baselines (speedup.baseline) train it
too: a seed's speed-up needs their target. A baseline's lost seed is lost to every arm, so every arm gets it.

How many: an arm needs N seeds it has not lost (trained or still training); a second call with the same N
changes nothing, and a replacement that diverges in turn gets its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ngptlab import schedule as schedules
from ngptlab.grid.runs import RunSpec
from ngptlab.plan.sweeps import ResultOf
from ngptlab.settings import AddedSeeds, Params


def lost_by(results: ResultOf, entries: Sequence[AddedSeeds], schedule: str) -> dict[int, list[str]]:
    """{seed: names of its runs that did not complete} over one arm's added-seed entries of a cell."""
    lost: dict[int, list[str]] = {}
    for entry in entries:
        for seed in entry.seeds:
            spec = RunSpec(entry.scale, entry.context, entry.arm, entry.budget, float(entry.lr), seed,
                           schedule)
            found = results(spec)
            if found is not None and not found.usable:
                lost.setdefault(seed, []).append(spec.name)
    return lost


def replacements(params: Params, results: ResultOf, scale: str, context: int, n: int,
                 proposed: Iterable[dict]) -> tuple[list[dict], list[str]]:
    """(train.added_seeds entries of the cell with replacement seeds added, one note per lost seed), from
    train.added_seeds and the entries `proposed` already (both counted as the arm's seeds)."""
    train = params.train
    schedule = schedules.of(train)
    baselines = [b for b in params.speedup.baselines if b in train.arms]
    existing = [e for e in train.added_seeds if (e.scale, e.context) == (scale, context)]
    by_arm = {arm: [e for e in existing if e.arm == arm] for arm in train.arms}
    seeds = {arm: {s for e in by_arm[arm] for s in e.seeds} for arm in train.arms}
    for entry in proposed:
        if (entry["scale"], entry["context"]) == (scale, context):
            seeds[entry["arm"]] |= set(entry["seeds"])
    lost = {arm: lost_by(results, by_arm[arm], schedule) for arm in train.arms}
    base_lost = {s: runs for b in baselines[:1] for s, runs in lost[b].items()}
    notes, needed = [], {}
    for arm in train.arms:
        gone = {s: runs for s, runs in {**base_lost, **lost[arm]}.items() if s in seeds[arm]}
        needed[arm] = max(0, n - (len(seeds[arm]) - len(gone))) if gone else 0
        for seed, runs in sorted(gone.items()):
            whose = "" if seed in lost[arm] else "the baseline's "
            notes.append(f"{scale} ctx{context} {arm}: held-out seed {seed} lost ({whose}run diverged: "
                         f"{', '.join(runs)})")
    if not any(needed.values()):
        return [], notes
    every = set(train.seeds) | {s for arm_seeds in seeds.values() for s in arm_seeds}
    first = max(every) + 1
    new = {arm: list(range(first, first + k)) for arm, k in needed.items() if k}
    for baseline in baselines:  # every replacement seed needs the baselines' targets
        new[baseline] = sorted({s for arm_seeds in new.values() for s in arm_seeds})
    entries = []
    for arm, added in sorted(new.items()):
        if not by_arm[arm]:
            notes.append(f"{scale} ctx{context} {arm}: no added-seed entries to replace seeds at")
            continue
        notes.append(f"{scale} ctx{context} {arm}: replacement seed(s) {', '.join(map(str, added))} at the "
                     "same learning rate")
        entries += [{"scale": scale, "context": context, "arm": arm, "budget": e.budget, "lr": e.lr,
                     "seeds": sorted(set(e.seeds) | set(added))} for e in by_arm[arm]]
    return entries, notes
