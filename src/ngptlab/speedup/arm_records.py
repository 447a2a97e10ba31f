"""The records of one arm's speed-up in results/speedup/<cell>.json, as the typed reader gives them
(speedup/document.py), and of what the speed-up rests on: the targets, the runs and the sweeps' edges.

  Speedup        a speed-up over the baseline: a number or a bound, its interval, verdict and seeds needed
  SeedSpeedup    one seed's speed-up, tokens to the target and the runs behind it (BudgetRun)
  ArmEntry       an arm's speed-up, per seed, within-run and between learning rates (Interpolated, Minimum),
                 its diverged held-out seeds (Divergence) and those left out for it (Replaced); an angle
                 arm's at its tuned multiplier (TunedMultiplier)
  Target         the baseline's loss a seed's speed-ups are measured against (from its BudgetRun)
  RunEntry       one run of the cell, and whether it entered the speed-up (its arm's best lr there)
  TuningEdge     whether an arm's best learning rate sat at an edge of its sweep
number, estimate_of, interval_of and seeds_needed_of read the file's numbers, a number or bound (Estimate),
intervals and seed counts for every record;
seed_counts gives a record's seed counts under every one of SIZE_KEYS.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ngptlab.results import read_float
from ngptlab.speedup.estimate import Estimate
from ngptlab.speedup.inference import SIZE_KEYS

Interval = tuple[float, float]


def number(x: float | str | None) -> float | None:
    """A number of the file: None stays None, "inf" is inf (ngptlab.results' encoding)."""
    return None if x is None else float(x)


def estimate_of(d: Mapping) -> Estimate:
    """{value, bound} as an Estimate, its value a number (as `number` reads it)."""
    return Estimate(number(d.get("value")), d.get("bound"))


def interval_of(x: list | None) -> Interval | None:
    """[lo, hi] as (lo, hi) of floats (null ends as nan, as read_float reads them); None for none."""
    return None if not x else (read_float(x[0]), read_float(x[1]))


@dataclass(frozen=True)
class SeedsNeeded:
    """The seeds a speed-up or contrast needs (one of SIZE_KEYS), or None with its note saying why."""

    count: int | None
    note: str | None


def seeds_needed_of(d: Mapping) -> dict[str, SeedsNeeded]:
    """The SIZE_KEYS an entry has (an older file has fewer, or none), each with its note."""
    return {key: SeedsNeeded(d[key], d.get(f"{key}_note")) for key in SIZE_KEYS if key in d}


def seed_counts(sizes: Mapping[str, SeedsNeeded]) -> dict[str, int | None]:
    """{key: count} for every one of SIZE_KEYS, None where the entry has none."""
    return {key: sizes[key].count if key in sizes else None for key in SIZE_KEYS}


@dataclass(frozen=True)
class Speedup:
    """A speed-up over the baseline: an arm's over its seeds, one seed's, or a within-run estimate's. value
    with bound None is a number, with ">" or "<" a bound (the true speed-up is larger, or smaller); the
    interval over seeds, its method and level, the verdict against the baseline (None: the baseline's, or a
    file from before verdicts) and the seeds needed (SIZE_KEYS present in the file)."""

    value: float | None
    bound: str | None = None
    display: str | None = None
    interval: Interval | None = None
    bootstrap_interval: Interval | None = None
    level: float | None = None
    n_seeds: int | None = None
    n_censored: int | None = None
    method: str | None = None
    log_mean: float | None = None
    log_sd: float | None = None
    log_df: int | None = None
    verdict: str | None = None
    seeds_needed: Mapping[str, SeedsNeeded] = field(default_factory=dict)
    note: str | None = None

    @classmethod
    def from_dict(cls, d: Mapping) -> Speedup:
        log = d.get("log") or {}
        return cls(number(d.get("value")), d.get("bound"), d.get("display"), interval_of(d.get("interval")),
                   interval_of(d.get("bootstrap_interval")), d.get("level"), d.get("n_seeds"),
                   d.get("n_censored"), d.get("method"), log.get("mean"), log.get("sd"), log.get("df"),
                   d.get("verdict"), seeds_needed_of(d), d.get("note"))


@dataclass(frozen=True)
class BudgetRun:
    """The run at the chosen learning rate at one budget, as a seed's speed-up or target used it."""

    budget: int
    lr: float
    loss: float | None
    run: str

    @classmethod
    def from_dict(cls, d: Mapping) -> BudgetRun:
        return cls(d["budget"], d["lr"], number(d.get("loss")), d["run"])


@dataclass(frozen=True)
class SeedSpeedup:
    """One seed's speed-up and the tokens it needed to reach the target (value and bound)."""

    seed: int
    speedup: Speedup
    tokens_to_target: Estimate
    best: tuple[BudgetRun, ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping) -> SeedSpeedup:
        return cls(d["seed"], Speedup.from_dict(d["speedup"]),
                   estimate_of(d.get("tokens_to_target") or {}),
                   tuple(BudgetRun.from_dict(b) for b in d.get("best") or ()))


@dataclass(frozen=True)
class Minimum:
    """One (arm, budget)'s best loss between the grid's learning rates: the parabola's vertex in ln lr."""

    budget: int
    seeds: tuple[int, ...]
    lr_grid: tuple[float, ...]
    loss_grid: tuple[float | None, ...]
    lr_best: float | None
    lr_vertex: float | None
    loss_vertex: float | None
    correction: float | None
    status: str

    @classmethod
    def from_dict(cls, d: Mapping) -> Minimum:
        return cls(d["budget"], tuple(d["seeds"]), tuple(d["lr_grid"]),
                   tuple(number(x) for x in d.get("loss_grid") or ()), d["lr_best"], d["lr_vertex"],
                   number(d["loss_vertex"]), number(d["correction"]), d["status"])


@dataclass(frozen=True)
class Interpolated:
    """The speed-up from the parabola's minimum between learning rates, on the swept seeds, beside the grid's:
    log_difference = mean ln S interpolated minus on the grid, differs when beyond seed_noise_log."""

    speedup: Speedup
    per_budget: tuple[Minimum, ...]
    log_difference: float | None
    seed_noise_log: float | None
    differs: bool | None
    note: str | None

    @classmethod
    def from_dict(cls, d: Mapping) -> Interpolated:
        return cls(Speedup.from_dict(d["speedup"]),
                   tuple(Minimum.from_dict(m) for m in d.get("per_budget") or ()),
                   d.get("log_difference"), d.get("seed_noise_log"), d.get("differs"), d.get("note"))


@dataclass(frozen=True)
class Divergence:
    """The arm's diverged held-out seeds over its held-out seeds, and the exact interval of that rate."""

    diverged: int
    seeds: int
    rate: float | None
    interval: Interval | None
    diverged_seeds: tuple[int, ...]
    level: float | None = None  # the interval's, as the file states it

    @classmethod
    def from_dict(cls, d: Mapping) -> Divergence:
        return cls(d["diverged"], d["seeds"], number(d["rate"]), interval_of(d["interval"]),
                   tuple(d["diverged_seeds"]), d.get("level"))


@dataclass(frozen=True)
class Replaced:
    """A held-out seed left out of the arm's estimate, and why."""

    seed: int
    reason: str

    @classmethod
    def from_dict(cls, d: Mapping) -> Replaced:
        return cls(d["seed"], d["reason"])


@dataclass(frozen=True)
class TunedMultiplier:
    """An angle arm's secondary estimate (speedup/tuned_multiplier.py): its speed-up at the learning rate the
    policy tunes over its sweep, multiplier = that lr / multiplier 1's, on the swept seeds (optimistic)."""

    lr: float | None
    multiplier: float | None
    speedup: Speedup | None
    note: str

    @classmethod
    def from_dict(cls, d: Mapping) -> TunedMultiplier:
        s = d.get("speedup")
        speedup = None if s is None else Speedup(
            number(s.get("estimate")), s.get("bound"), s.get("display"), interval_of(s.get("interval")),
            level=s.get("level"), n_seeds=s.get("n_seeds"), method=s.get("method"))
        return cls(d.get("lr"), d.get("multiplier"), speedup, d.get("note") or "")


@dataclass(frozen=True)
class ArmEntry:
    """One arm of the cell: its speed-up over the seeds, per seed, the within-run estimate (cheap) and the
    interpolated one (None: a further baseline's entry, or an older file)."""

    speedup: Speedup
    per_seed: tuple[SeedSpeedup, ...] = ()
    cheap: Speedup | None = None
    interpolated: Interpolated | None = None
    divergence: Divergence | None = None  # None: a further baseline's entry, or an older file
    replaced: tuple[Replaced, ...] = ()
    tuned_multiplier: TunedMultiplier | None = None  # an angle arm's secondary estimate; None for the others

    @classmethod
    def from_dict(cls, d: Mapping) -> ArmEntry:
        cheap, interpolated, divergence = d.get("cheap"), d.get("interpolated"), d.get("divergence")
        tuned = d.get("tuned_multiplier")
        return cls(Speedup.from_dict(d.get("speedup") or {}),
                   tuple(SeedSpeedup.from_dict(p) for p in d.get("per_seed") or ()),
                   None if cheap is None else Speedup.from_dict(cheap["speedup"]),
                   None if interpolated is None else Interpolated.from_dict(interpolated),
                   None if divergence is None else Divergence.from_dict(divergence),
                   tuple(Replaced.from_dict(r) for r in d.get("replaced") or ()),
                   None if tuned is None else TunedMultiplier.from_dict(tuned))


@dataclass(frozen=True)
class Target:
    """A seed's target: the baseline's loss at the reference budget (the setting as written, and in tokens),
    from its runs there (interpolated between two budgets along the law); measurable, the speed-ups the
    budgets can give as numbers; note: why the target fell back to another budget, else None."""

    seed: int
    arm: str
    reference: str
    reference_budget: int
    interpolated: bool
    loss: float
    runs: tuple[BudgetRun, ...]
    measurable: Interval
    note: str | None

    @classmethod
    def from_dict(cls, d: Mapping) -> Target:
        return cls(d["seed"], d["arm"], str(d["reference"]), d["reference_budget"], bool(d["interpolated"]),
                   read_float(d["loss"]), tuple(BudgetRun.from_dict(r) for r in d["runs"]),
                   interval_of(d["measurable"]), d.get("note"))


@dataclass(frozen=True)
class RunEntry:
    """One run of the cell: its spec, status and loss; best_lr_for_budget when it is its (arm, budget)'s
    chosen-lr run and completed; within_run, its own validation curve's speed-up."""

    run: str
    arm: str
    budget: int
    lr: float
    seed: int
    status: str
    final_val_loss: float | None
    best_lr_for_budget: bool
    within_run: Speedup | None = None

    @classmethod
    def from_dict(cls, d: Mapping) -> RunEntry:
        within = d.get("within_run")
        return cls(d["run"], d["arm"], d["budget"], d["lr"], d["seed"], d.get("status", "completed"),
                   number(d.get("final_val_loss")), bool(d.get("best_lr_for_budget")),
                   None if not within else Speedup.from_dict(within["speedup"]))


@dataclass(frozen=True)
class TuningEdge:
    """edge "top" or "bottom": the arm's best lr at that budget and seed sat at that edge of its sweep (of
    its pruned window when pruned); None: inside."""

    arm: str
    budget: int
    seed: int | None
    edge: str | None
    pruned: bool

    @classmethod
    def from_dict(cls, d: Mapping) -> TuningEdge:
        return cls(d["arm"], d["budget"], d.get("seed"), d.get("edge"), bool(d.get("pruned")))
