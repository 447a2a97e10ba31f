"""The records between arms in results/speedup/<cell>.json, as the typed reader gives them
(speedup/document.py): the paired contrasts, the factorial's effects, the cell's reading of its primary
effect, and the rival account beside it (the effective learning rate).

  Contrast    a paired contrast of two arms: S_a / S_b with its interval, verdict and seeds needed
  Effect      a factorial effect as a ratio of speed-ups, its interval, verdict and claim p-values
  Factorial   the 2x2's effects, over the seeds with all four arms
  Reading     the primary effect and the words the report prints for it, with the effective-lr clause
  Rivals      each arm's angular rate and whether the effective learning rate confounds the primary effect
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ngptlab.speedup.arm_records import Interval, SeedsNeeded, interval_of, number, seeds_needed_of


@dataclass(frozen=True)
class Contrast:
    """a against b, paired by seed: ratio = exp(mean D) = S_a / S_b, D = ln S_a - ln S_b over `seeds`, with
    its interval (on the log scale log_interval), method, level and verdict by the symmetric rule."""

    a: str
    b: str
    label: str
    n_seeds: int
    n_censored: int | None
    seeds: tuple[int, ...]
    log_mean: float | None
    log_sd: float | None
    log_interval: Interval | None
    ratio: float | None
    interval: Interval | None
    level: float | None
    method: str | None
    verdict: str | None
    seeds_needed: Mapping[str, SeedsNeeded] = field(default_factory=dict)
    note: str | None = None

    @classmethod
    def from_dict(cls, d: Mapping) -> Contrast:
        log = d.get("difference_log") or {}
        return cls(d["a"], d["b"], d["label"], d["n_seeds"], d.get("n_censored"), tuple(d.get("seeds") or ()),
                   log.get("mean"), log.get("sd"), interval_of(log.get("interval")), number(d.get("ratio")),
                   interval_of(d.get("interval")), d.get("level"), d.get("method"), d.get("verdict"),
                   seeds_needed_of(d), d.get("note"))


@dataclass(frozen=True)
class Effect:
    """A factorial effect, paired by seed: ratio = exp(its mean on ln S) (None without an estimate), its
    interval (log_interval on the log scale), method, level, verdict and one-sided claim p-values (None
    without an interval)."""

    ratio: float | None
    log_estimate: float | None
    log_interval: Interval | None
    interval: Interval | None
    method: str | None
    level: float
    n_seeds: int
    verdict: str | None
    p_values: Mapping[str, float] | None

    @classmethod
    def from_dict(cls, d: Mapping) -> Effect:
        estimate = d.get("estimate") or {}
        return cls(number(estimate.get("ratio")), estimate.get("ln"), interval_of(d.get("log_interval")),
                   interval_of(d.get("interval")), d.get("method"), d["level"], d.get("n_seeds", 0),
                   d.get("verdict"), d.get("p_values"))


@dataclass(frozen=True)
class Factorial:
    """The 2x2's effects (conditioning, norm, interaction) over `seeds`; note: seeds left out, else None."""

    arms: tuple[str, ...]
    seeds: tuple[int, ...]
    effects: Mapping[str, Effect]
    note: str | None

    @classmethod
    def from_dict(cls, d: Mapping) -> Factorial:
        return cls(tuple(d["arms"]), tuple(d["seeds"]),
                   {name: Effect.from_dict(e) for name, e in d["effects"].items()}, d.get("note"))


@dataclass(frozen=True)
class Reading:
    """The cell's primary effect (speedup.primary_contrast), what the account predicts of it, and `words`:
    consistent with / inconsistent with the account, or not resolved, then "; " and effective_lr_clause
    where an angular rate was logged. confounded_by_effective_lr: true, false, or None (not resolved or not
    measured)."""

    primary: str
    predicted: str
    margin: float
    effect: Effect
    words: str
    confounded_by_effective_lr: bool | None
    effective_lr_clause: str | None
    note: str | None
    pattern_words: str | None = None  # the pattern's reading without the clause (None: an older file)
    pattern: tuple[Mapping, ...] = ()  # speedup/reading.py pattern_tests
    # account name -> {claim, pattern [pattern_tests], reading} (speedup/reading.py; an older file: none)
    accounts: Mapping[str, Mapping] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping) -> Reading:
        return cls(d["primary"], d["predicted"], d["margin"], Effect.from_dict(d), d["reading"],
                   d.get("confounded_by_effective_lr"), d.get("effective_lr_clause"), d.get("note"),
                   d.get("pattern_reading"), tuple(d.get("pattern") or ()),
                   dict(d.get("accounts") or {}))


@dataclass(frozen=True)
class Confound:
    """Whether the effective learning rate confounds an effect: the ratio of angular rates it carries, its
    interval and verdict (None, with the note, where no rate was logged; None without a note: a file from
    before verdicts)."""

    ratio: float | None
    interval: Interval | None
    n_seeds: int
    verdict: str | None
    confounded: bool | None
    note: str | None

    @classmethod
    def from_dict(cls, d: Mapping) -> Confound:
        return cls(number(d.get("ratio")), interval_of(d.get("interval")), d.get("n_seeds", 0),
                   d.get("verdict"), d.get("confounded"), d.get("note"))


@dataclass(frozen=True)
class Rivals:
    """Each arm's angular rate (rad / step; None: not logged) and the primary effect's Confound."""

    angular_rates: Mapping[str, float | None]
    primary: Confound
    rule: str

    @classmethod
    def from_dict(cls, d: Mapping) -> Rivals:
        return cls({arm: number(entry.get("angular_rate")) for arm, entry in d["arms"].items()},
                   Confound.from_dict(d["primary"]), d["rule"])
