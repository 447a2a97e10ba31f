"""The dose-response worlds: each arm planted a ln kappa and a ln angle per step as well as its speed-up, so
the dose-response reading (speedup/dose_response.py) is checked on arms read by what they measure, not by
their labels.

Where an arm sits (ln kappa of the layer 3-4 Q and K heads, ln angle per step) is design/placements.py's,
every planted world's: gpt-angle there f of the way to ngpt's kappa (`conditioned`), gpt-muon at
`muon_kappa`, any arm without a place of its own at its architecture's, at the speed the line gives it.
The speed-up follows the world's account as a line through gpt (ngpt on it at DIAL_NGPT):
  conditioning   ln S = beta (ln kappa - ln K),   beta  = ln DIAL_NGPT / (ln k - ln K) < 0
  angle          ln S = gamma (ln angle - ln R),  gamma = ln DIAL_NGPT / ln 2 > 0
and each world moves some arms off it (WORLDS). A world is planted only where the grid has the arms that
make it (`needs`): the dial (gpt-pc<L>) and gpt-muon are new arms, and the worlds that need them wait for
them. The reading each world should give is the dose-response rule applied to the planted values themselves
(expected_fits): the real fit on two identical points per arm, whose intervals are the points.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from ngptlab.design.placements import LN_K, LN_R, MUON, NGPT_TURN, LN_k, pc_level, placement
from ngptlab.design.truths import Truth
from ngptlab.speedup.dose_response import (
    CAPACITY,
    CONSISTENT,
    DEPARTS,
    INCONSISTENT,
    PREDICTORS,
    read_points,
)

DIAL_NGPT = 4.0  # ngpt's planted speed-up in every dose-response world (replications' figure at 4k context)
PARTIAL = (0.2, 0.6)  # how far toward ngpt's kappa setting the angle takes gpt-angle, part of the way
CONDITIONING_LINE, ANGLE_LINE = (p.account for p in PREDICTORS)
BETA = math.log(DIAL_NGPT) / (LN_k - LN_K)
GAMMA = math.log(DIAL_NGPT) / math.log(NGPT_TURN)


@dataclass(frozen=True)
class DoseWorld(Truth):
    """A planted world of the dose-response reading: the account the speed-up follows (`account`: the
    conditioning line or the angle line), and what moves arms off it."""

    world: str = "dose-response"
    conditioned: float = 0.0  # f: gpt-angle's share of the way from gpt's ln kappa to ngpt's
    off_line: tuple[tuple[str, float], ...] = ()  # (arm, its planted S), wherever the line does not set it
    muon_kappa: float = LN_K / 3  # gpt-muon's ln kappa
    flat_dial: bool = False  # every gpt-pc<L> at gpt's speed
    needs: tuple[str, ...] = ()  # arms (or "gpt-pc", any level) the world needs in the grid

    @property
    def label(self) -> str:
        return self.world

    def mechanism(self, arm: str) -> tuple[float, float]:
        """(ln kappa, ln angle per step) planted for the arm (design/placements.py)."""
        return placement(arm, self.conditioned, self.muon_kappa)

    def speedup(self, arm: str) -> float:
        off = dict(self.off_line)
        if arm in off:
            return off[arm]
        if self.flat_dial and pc_level(arm) is not None:
            return 1.0
        ln_kappa, ln_angle = self.mechanism(arm)
        if self.account == CONDITIONING_LINE:
            return math.exp(BETA * (ln_kappa - LN_K))
        return math.exp(GAMMA * (ln_angle - LN_R))

    def plantable(self, arms: Collection[str]) -> bool:
        """Whether the grid's arms hold what this world needs."""
        return all(any(pc_level(a) is not None for a in arms) if need == "gpt-pc" else need in arms
                   for need in self.needs)


def dose_worlds(arms: Collection[str]) -> list[DoseWorld]:
    """Every dose-response world the grid's arms can hold, in the table's order."""

    def world(name: str, account: str = CONDITIONING_LINE, **kw) -> DoseWorld:
        return DoseWorld(account, DIAL_NGPT, world=name, **kw)

    angle_worlds = [world(f"{'angle' if account == ANGLE_LINE else 'conditioning'} line, gpt-angle "
                          f"conditioned {'all the way' if f == 1 else f'{f:g} of the way'} to ngpt's kappa",
                          account, conditioned=f, needs=("gpt-angle",))
                    for account in (CONDITIONING_LINE, ANGLE_LINE) for f in (1.0, *PARTIAL)]
    every = [world("dose-response: S follows kappa, ngpt and the dial on the line"),
             world("capacity: the dial works, gpt-orth as slow as gpt", off_line=(("gpt-orth", 1.0),),
                   needs=("gpt-orth",)),
             world("flat dial: the dial moves kappa, S stays", flat_dial=True, needs=("gpt-pc",)),
             *angle_worlds,
             world("gpt-muon fast and well conditioned (on the kappa line)", needs=(MUON,)),
             world("gpt-muon fast and ill conditioned (gpt's kappa)", muon_kappa=LN_K,
                   off_line=((MUON, 2.0),), needs=(MUON,))]
    return [w for w in every if w.plantable(arms)]


def read_fits(fits: Mapping[str, Mapping]) -> dict[str, dict]:
    """{account: {reading, departs, capacity, slope, interval}} of a dose_response document's accounts:
    departs the arms an inconsistent reading names, capacity whether gpt-orth was read below the kappa
    line."""
    return {name: {"reading": fit["reading"],
                   "departs": sorted(a for a, e in fit["arms"].items() if e["status"] == DEPARTS),
                   "capacity": any(e["status"] == CAPACITY for e in fit["arms"].values()),
                   "slope": fit["slope"]["estimate"], "interval": fit["slope"]["interval"]}
            for name, fit in fits.items()}


def label(read: Mapping) -> str:
    """The design's name of an account's reading: "kappa = 1 costs capacity" where the account is consistent
    with gpt-orth read below its line, an inconsistent reading with the arms it names."""
    if read["reading"] == INCONSISTENT:
        return f"{INCONSISTENT} ({', '.join(read['departs']) or 'the slope has the other sign'})"
    if read["reading"] == CONSISTENT and read["capacity"]:
        return CAPACITY
    return read["reading"]


def agrees(read: Mapping, expected: Mapping) -> bool:
    """Whether a world's reading of an account is the expected one: the same label, except that an
    inconsistent reading is right when it names at least one arm the planted values make depart (or, where
    they depart by the slope's sign, names none). Which of several departing arms a world's noise shows is
    no error, nor is an arm named beside a departing one: an arm the planted values put near the band's edge
    (ngpt at x1.5 against the margin x1.25) is shown beyond it in about half the worlds, and the verdict
    stands on the departing arm. Naming only arms on the line is wrong."""
    if read["reading"] != expected["reading"]:
        return False
    if read["reading"] != INCONSISTENT:
        return label(read) == label(expected)
    named, planted = set(read["departs"]), set(expected["departs"])
    return bool(named & planted) if planted else not named


@lru_cache(maxsize=256)
def expected_fits(world: Truth, arms: Sequence[str], baseline: str, margin: float) -> dict[str, dict]:
    """{account: {reading, label, slope, interval}}: the dose-response rule applied to the planted values of
    the cell's arms (any planted world's: every Truth plants its arms' mechanisms), the real fit
    (speedup/dose_response.py) on two identical seeds per arm, so every interval is the point itself and
    the reading is the one the planted law gives."""
    points = []
    for arm in arms:
        ln_kappa, ln_angle = world.mechanism(arm)
        y = 0.0 if arm == baseline else math.log(world.speedup(arm) / world.speedup(baseline))
        points += [{"arm": arm, "seed": s, "y": y, "x_kappa": ln_kappa, "x_angle": ln_angle} for s in (0, 1)]
    fits, _ = read_points(points, baseline, margin, resamples=2)
    return read_fits(fits)
