"""The learning rate every seed is estimated at: chosen on the swept seeds, then the same for every seed.

The seeds of train.seeds sweep the learning rates; the seeds added by `ngptlab plan --add-seeds` run one.
For every seed to estimate the same quantity, the choice is made once, on the swept seeds' mean final
validation losses, and every seed, the swept ones included, enters the speed-up with its runs at the chosen
learning rate. speedup.lr_policy names the rule (RULES):

  crossing  per arm: the learning rate whose swept-seed losses reach the target in the fewest tokens, i.e.
            the arm's best learning rate where it reaches the target. The target is the baseline's loss at
            the reference budget N at the baseline's best learning rate there (its loss at N interpolated
            along the fitted law when N lies between budgets), so for the baseline the rule is "best at N".
            The estimate reads the arm's runs at that learning rate up to its reach: the first budget at
            least REACH x the swept seeds' crossing (N itself for the baseline), and at least the
            MIN_LAW_BUDGETS smallest (the power law between budgets has three parameters). The held-out
            seeds train only that far: an arm that is fast costs little. One learning rate per arm, so its
            crossing never falls between budgets read at different learning rates (the `budget` rule's
            case, where the fitted law runs through the envelope of several learning rates' curves).
  largest   per arm: the learning rate best at the arm's largest budget, at every budget (under wsd one
            trunk per added seed).
  budget    per (arm, budget): the learning rate best at that budget (under wsd an added seed trains a
            trunk per distinct chosen rate).

An angle arm (models.arms.turns_like(): gpt-angle turned at ngpt's angle per step, ngpt-angle at gpt's) is
the one exception: its learning rate sets its angle (train/angle_targets.py), and the effective-learning-rate
account names the arm turned at its matched arm's angle, so its PRIMARY learning rate is multiplier 1, the
one at which its angle is the matched arm's: the measured target's (train.angles[cell][arm].lr), or on the
prior (whose angle at lr' is the matched arm's at lr') the matched arm's own choice in the cell by the same
rule. The rule then reads it as any arm's (under crossing: up to its reach at that learning rate), and the
held-out seeds train it. What the rule would choose over the arm's sweep (x0.5, x1, x2) is kept as the
SECONDARY, tuned choice (ArmChoice.tuned, LrPolicy.angle_arms; speedup/tuned_multiplier.py estimates it on
the swept seeds). Where multiplier 1 is not in the arm's sweep, or the matched arm has no choice yet, the
arm has no primary choice and a note says why.

"Best" is the lowest mean final loss over the swept seeds, fewest diverged runs first, ties to the smaller
learning rate. Why crossing is the default: the optimal learning rate falls as runs get longer (Bjorck et al.
2024, arXiv 2409.19913), so a rate chosen at the largest budget is too low where a fast arm crosses the
target early, and its speed-up reads low (`ngptlab design --compare-policies` measures each rule's gap to a
planted law). The swept seeds chose the rate, so their own estimate at it is optimistic (the winner's curse);
the held-out seeds' is not (ngptlab.speedup.selection). `ngptlab plan --add-seeds`, the speed-up stage, the
report and `ngptlab design` all choose with cell_policy / runs_policy (`--prune-sweeps` ranks with
best_lr), read through a result lookup (ResultOf): the files under a results root or a planted world's runs
in memory.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ngptlab import schedule as schedules
from ngptlab import weight_dtype as weight_dtypes
from ngptlab.grid.runs import RunSpec, cell_name
from ngptlab.grid.sweeps import held_back, lr_sweep
from ngptlab.models.arms import turns_like
from ngptlab.results import RunResult
from ngptlab.settings import Params, Train
from ngptlab.speedup.crossing import loss_at, reference_tokens, tokens_to_target
from ngptlab.speedup.loss_law import fit_loss_law

# The result of a run, or None while it has none.
ResultOf = Callable[[RunSpec], RunResult | None]

CROSSING, LARGEST, BUDGET = "crossing", "largest", "budget"
REACH = 1.2  # a held-out seed's crossing scatters ~2.5% (ln S sd 0.025 at the design's default noise)
MIN_LAW_BUDGETS = 3

RULES = {
    CROSSING: "each arm at its best learning rate where it reaches the target: the one whose mean final "
              "validation loss over the swept seeds reaches the target in the fewest tokens (the baseline: "
              "the lowest loss at the reference budget), read up to the first budget at least "
              f"x{REACH:g} past that crossing and at least its {MIN_LAW_BUDGETS} smallest budgets",
    LARGEST: "each arm at the learning rate of the lowest mean final validation loss over the swept seeds at "
             "its largest budget, at every budget",
    BUDGET: "each (arm, budget) at the learning rate of the lowest mean final validation loss over the "
            "swept seeds at that budget",
}
TIES = " (fewest diverged runs first, ties to the smaller learning rate)"
AT_LR = {CROSSING: "at its best learning rate where it reaches the target",
         LARGEST: "at the learning rate best at its largest budget",
         BUDGET: "at the best learning rate of each budget"}

Losses = dict[float, tuple[int, float]]  # {lr: (diverged runs, mean final loss of the completed ones)}
Sweep = dict[int, Losses]  # {budget: the swept seeds' Losses there}


def mean_losses(results: ResultOf, runs_by_lr: Mapping[float, Sequence[RunSpec]]) -> Losses | None:
    """{lr: (how many of its runs diverged, mean final loss of the others (inf: none))}; None while any run
    has no result yet."""
    losses: Losses = {}
    for lr, specs in runs_by_lr.items():
        found = [results(spec) for spec in specs]
        if any(r is None for r in found):
            return None
        values = [r.final_val_loss for r in found if r.usable]
        losses[lr] = (len(found) - len(values), statistics.fmean(values) if values else math.inf)
    return losses


def best_lr(losses: Losses) -> float | None:
    """The learning rate with the fewest diverged runs, then the lowest mean loss, then the smaller; None
    when every run of every one diverged."""
    ranked = [(diverged, loss, lr) for lr, (diverged, loss) in losses.items() if math.isfinite(loss)]
    return min(ranked)[2] if ranked else None


def sweep_runs(train: Train, scale: str, context: int, arm: str, budget: int,
               dtype: str | None = None) -> dict[float, list[RunSpec]]:
    """{lr: the runs of train.seeds at it} of the sweep at this budget (the pruned window where pruned), of
    weight dtype `dtype`; by default the first of train.weight_dtype, whose runs decide the plan's pruning
    and added seeds for every dtype (the sweeps are the (scale, context)'s)."""
    schedule, dtype = schedules.of(train), dtype or weight_dtypes.of(train)[0]
    return {lr: [RunSpec(scale, context, arm, budget, lr, seed, schedule, dtype) for seed in train.seeds]
            for lr in lr_sweep(train, scale, context, arm, budget)}


def sweep_losses(train: Train, results: ResultOf, scale: str, context: int, arm: str,
                 budget: int, dtype: str | None = None) -> Losses | None:
    """mean_losses over train.seeds of the sweep at this budget; None while a run is missing."""
    return mean_losses(results, sweep_runs(train, scale, context, arm, budget, dtype))


def grid_budgets(train: Train, scale: str, context: int, arm: str) -> list[int]:
    """The budgets of (scale, context, arm) in the grid now: those train.protocol holds back are not."""
    return sorted(b for b in train.budgets if not held_back(train, scale, context, arm, b))


# ----------------------------------------------------------------------------------------------------------
# The rules, on the swept seeds' mean losses of one cell


@dataclass(frozen=True)
class ArmChoice:
    """One arm's choice: {budget: lr} for every budget its estimate reads (the held-out seeds train exactly
    these), or none and why. An angle arm's lrs are multiplier 1's; tuned is what the rule chooses over its
    sweep (the secondary estimate) and unit multiplier 1's learning rate per budget where known."""

    lrs: dict[int, float] = field(default_factory=dict)
    why: str = ""
    tuned: dict[int, float] = field(default_factory=dict)
    unit: dict[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class AngleTarget:
    """What sets an angle arm's multiplier 1 in a cell: the arm it turns like, and the measured target's
    learning rate (train.angles[cell][arm].lr: its angle at lr' is kinds x lr' / lr), None on the prior."""

    matched: str
    measured_lr: float | None = None

    @property
    def source(self) -> str:
        return "measured" if self.measured_lr is not None else "prior"

    def unit_words(self, lr: float) -> str:
        """Where multiplier 1's learning rate comes from, in words."""
        if self.measured_lr is not None:
            return f"lr {lr:g}, the measured target's (train.angles)"
        return f"lr {lr:g}, {self.matched}'s chosen learning rate (the prior angle)"


def angle_targets(train: Train, scale: str, context: int, arms: Sequence[str]) -> dict[str, AngleTarget]:
    """{angle arm among `arms`: its AngleTarget in the cell} (train.angles where measured, else the prior: a
    stand-in target, the plan's projection's or the design's, measured nothing)."""
    cell = train.angles.get(cell_name(scale, context), {})
    return prior_targets(arms, {arm: m.lr for arm, m in cell.items() if not m.stand_in})


def prior_targets(arms: Sequence[str], measured: Mapping[str, float] | None = None
                  ) -> dict[str, AngleTarget]:
    """{angle arm among `arms`: its AngleTarget}, on the prior but where `measured` gives its target's
    learning rate: runs read without their params file pass none."""
    return {arm: AngleTarget(matched, (measured or {}).get(arm)) for arm, matched in turns_like().items()
            if arm in arms}


def _curve(sweep: Sweep, lr: float) -> tuple[dict[int, float], dict[int, int]]:
    """({budget: mean loss} of the budgets where lr ran with a completed run, {budget: diverged runs})."""
    ran = {b: losses[lr] for b, losses in sweep.items() if lr in losses}
    points = {b: loss for b, (_, loss) in ran.items() if math.isfinite(loss)}
    return points, {b: diverged for b, (diverged, _) in ran.items()}


def _waiting(sweep: Mapping[int, Losses | None]) -> str:
    """What the sweep still waits for, or "" when every result is in."""
    missing = [f"{b:,}" for b, losses in sorted(sweep.items()) if losses is None]
    return f"waiting for the results at {', '.join(missing)}" if missing else ""


def choose_largest(sweep: Mapping[int, Losses | None]) -> ArmChoice:
    budgets = sorted(sweep)
    largest = sweep[budgets[-1]]
    if largest is None:
        return ArmChoice(why=f"waiting for the results at its largest budget {budgets[-1]:,}")
    best = best_lr(largest)
    if best is None:
        return ArmChoice(why=f"every run at its largest budget {budgets[-1]:,} diverged")
    return ArmChoice(dict.fromkeys(budgets, best))


def choose_per_budget(sweep: Mapping[int, Losses | None]) -> ArmChoice:
    chosen = {b: best_lr(losses) for b, losses in sorted(sweep.items()) if losses is not None}
    chosen = {b: lr for b, lr in chosen.items() if lr is not None}
    missing = [f"{b:,}" for b in sorted(sweep) if b not in chosen]
    return ArmChoice(chosen, f"no best learning rate yet at {', '.join(missing)}" if missing else "")


def baseline_at_reference(sweep: Sweep, reference: int) -> tuple[float, float] | None:
    """(lr, loss): the baseline's learning rate of the lowest mean loss at the reference budget (along the
    fitted law when it lies between budgets; fewest diverged runs up to there first), and that loss."""
    ranked = []
    for lr in {lr for losses in sweep.values() for lr in losses}:
        points, diverged = _curve(sweep, lr)
        loss = loss_at(points.items(), reference, fit_loss_law(points).floor)
        if loss is not None:
            ranked.append((sum(d for b, d in diverged.items() if b <= reference), loss, lr))
    if not ranked:
        return None
    _, loss, lr = min(ranked)
    return lr, loss


def crossing_rank(sweep: Sweep, lr: float, target: float) -> tuple:
    """How early lr's curve reaches the target: (diverged runs up to there, 0 and its tokens to the target
    (a "<" bound: the smallest budget) | 1 and 0 when it never does, the loss where it does (or at its last
    budget), lr); the smallest ranks first."""
    points, diverged = _curve(sweep, lr)
    tokens = tokens_to_target(points.items(), target, fit_loss_law(points).floor)
    if tokens.value is None:
        return (math.inf, 1, 0.0, math.inf, lr)
    reached = tokens.bound != ">"
    at = min(b for b in points if b >= tokens.value) if reached else max(points)
    failed = sum(d for b, d in diverged.items() if b <= at)
    return (failed, 0 if reached else 1, tokens.value if reached else 0.0, points[at], lr)


def reach(budgets: Sequence[int], crossing: float | None) -> list[int]:
    """The budgets an estimate reads: up to the first at least REACH x the crossing (every budget when the
    arm never crosses), and at least the MIN_LAW_BUDGETS smallest."""
    ordered = sorted(budgets)
    if crossing is None:
        return ordered
    last = next((b for b in ordered if b >= crossing), ordered[-1])
    return ordered[:max(ordered.index(last) + 1, MIN_LAW_BUDGETS)]


def choose_at_crossing(sweeps: Mapping[str, Sweep], baselines: Sequence[str], reference: int,
                       angles: Mapping[str, AngleTarget] | None = None) -> dict[str, ArmChoice]:
    """{arm: ArmChoice} of one cell under the crossing rule (module docstring), every result in. The
    learning rate answers to the primary baseline's target; the budgets read reach every baseline's target
    (a further baseline's: its loss at N at its own chosen learning rate), and a baseline's reach N. An angle
    arm of `angles` is read at multiplier 1, up to its reach there, its own crossing choice kept as tuned."""
    primary = baselines[0]
    found = baseline_at_reference(sweeps[primary], reference)
    if found is None:  # the runs at or around N diverged: the target falls back as the estimator's does
        completed = [b for b, losses in sweeps[primary].items()
                     if any(math.isfinite(loss) for _, loss in losses.values())]
        reference = max(completed, default=reference)
        found = baseline_at_reference(sweeps[primary], reference)
    if found is None:
        return dict.fromkeys(sweeps, ArmChoice(why=f"every {primary} run diverged"))
    lrs, targets, choices = {primary: found[0]}, {primary: found[1]}, {}
    for arm, sweep in sweeps.items():
        if arm != primary:
            candidates = {lr for losses in sweep.values() for lr in losses}
            failed, *_, lr = min(crossing_rank(sweep, candidate, found[1]) for candidate in candidates)
            if math.isfinite(failed):
                lrs[arm] = lr
            else:
                choices[arm] = ArmChoice(why="every run diverged")
    for baseline in baselines[1:]:
        if baseline in lrs:
            points = _curve(sweeps[baseline], lrs[baseline])[0]
            loss = loss_at(points.items(), reference, fit_loss_law(points).floor)
            if loss is not None:
                targets[baseline] = loss

    def read(arm: str, lr: float) -> dict[int, float]:
        """{budget: lr} up to the arm's reach at lr: the first budget REACH x past its last crossing."""
        points = _curve(sweeps[arm], lr)[0]
        floor = fit_loss_law(points).floor
        ends = [reference if baseline == arm else REACH * tokens.value if tokens.bound != ">" else None
                for baseline, target in targets.items()
                for tokens in [tokens_to_target(points.items(), target, floor)]]
        last = None if None in ends else max(ends)
        return dict.fromkeys(reach(sorted(points), last), lr)

    for arm, lr in lrs.items():
        choices[arm] = ArmChoice(read(arm, lr))
    for arm, target in (angles or {}).items():
        if arm in sweeps and arm != primary:
            unit = target.measured_lr if target.measured_lr is not None else lrs.get(target.matched)
            choices[arm] = _at_multiplier_1(arm, choices[arm], target, unit, sweeps[arm], read)
    return {arm: choices[arm] for arm in sweeps}


def _at_multiplier_1(arm: str, tuned: ArmChoice, target: AngleTarget, unit: float | None, sweep: Sweep,
                     read: Callable[[str, float], dict[int, float]]) -> ArmChoice:
    """An angle arm's crossing choice at multiplier 1's learning rate `unit` (one for every budget), its
    choice over the sweep kept as tuned; none, and why, where unit is unknown, not swept or diverged."""
    if unit is None:
        return ArmChoice(why=f"no multiplier 1 yet: {target.matched} (whose angle it takes) has no chosen "
                             "learning rate in this cell", tuned=tuned.lrs)
    units = dict.fromkeys(sorted(sweep), unit)
    if not any(unit in losses for losses in sweep.values()):
        return ArmChoice(why=f"no primary estimate: multiplier 1 ({target.unit_words(unit)}) is not in its "
                             f"sweep", tuned=tuned.lrs, unit=units)
    if not _curve(sweep, unit)[0]:
        return ArmChoice(why=f"every run at multiplier 1 ({target.unit_words(unit)}) diverged",
                         tuned=tuned.lrs, unit=units)
    return ArmChoice(read(arm, unit), tuned=tuned.lrs, unit=units)


def _pinned(sweep: Mapping[int, Losses | None], tuned: ArmChoice, target: AngleTarget,
            unit: Mapping[int, float], why_no_unit: str) -> ArmChoice:
    """An angle arm's choice under the largest or budget rule: multiplier 1's learning rate at every budget
    the rule reads and multiplier 1 is known and swept at, tuned the rule's own choice; the others named."""
    if not tuned.lrs and tuned.why.startswith("waiting"):
        return ArmChoice(why=tuned.why, unit=dict(unit))
    lrs, missing, unswept, waiting = {}, [], [], []
    for budget in sorted(sweep):
        losses = sweep[budget]
        if losses is None and budget not in tuned.lrs:  # where the rule waits for results, so does this
            waiting.append(f"{budget:,}")
        elif budget not in unit:
            missing.append(f"{budget:,}")
        elif losses is not None and unit[budget] not in losses:
            unswept.append(f"{budget:,} ({target.unit_words(unit[budget])})")
        else:
            lrs[budget] = unit[budget]
    why = [f"waiting for the results at {', '.join(waiting)}"] if waiting else []
    why += [f"no multiplier 1 at {', '.join(missing)}: {why_no_unit}"] if missing else []
    why += [f"multiplier 1 is not in its sweep at {', '.join(unswept)}"] if unswept else []
    return ArmChoice(lrs, "; ".join(why), tuned=tuned.lrs, unit=dict(unit))


def choose(rule: str, sweeps: Mapping[str, Mapping[int, Losses | None]], baselines: Sequence[str],
           reference: int, angles: Mapping[str, AngleTarget] | None = None) -> dict[str, ArmChoice]:
    """{arm: ArmChoice} of one cell from {arm: {budget: swept seeds' Losses (None: waiting)}}; baselines
    the speed-ups are measured against, the primary first; angles the cell's angle arms' targets (none: no
    arm is pinned at multiplier 1)."""
    angles = {arm: target for arm, target in (angles or {}).items() if arm in sweeps}
    if rule == CROSSING:
        waiting = {arm: _waiting(sweep) for arm, sweep in sweeps.items()}
        primary = baselines[0]
        if waiting[primary]:  # the target is the primary baseline's
            return dict.fromkeys(sweeps, ArmChoice(why=f"{waiting[primary]} of {primary} (the target)"))
        ready = {arm: sweep for arm, sweep in sweeps.items() if not waiting[arm]}
        present = [b for b in baselines if b in ready]
        chosen = choose_at_crossing(ready, present, reference,  # type: ignore[arg-type]
                                    {arm: target for arm, target in angles.items() if arm in ready})
        return {arm: chosen.get(arm) or ArmChoice(why=waiting[arm]) for arm in sweeps}
    per_arm = choose_largest if rule == LARGEST else choose_per_budget
    choices = {arm: per_arm(sweep) for arm, sweep in sweeps.items()}
    for arm, target in angles.items():
        matched = choices.get(target.matched, ArmChoice(why="not in this cell"))
        if target.measured_lr is not None:
            unit, why = dict.fromkeys(sweeps[arm], target.measured_lr), ""
        elif rule == BUDGET:  # the prior's angle at lr' is the matched arm's at lr': its choice per budget
            unit, why = {b: lr for b, lr in matched.lrs.items() if b in sweeps[arm]}, matched.why
        else:
            unit = dict.fromkeys(sweeps[arm], matched.lrs[max(matched.lrs)]) if matched.lrs else {}
            why = matched.why
        choices[arm] = _pinned(sweeps[arm], choices[arm], target, unit,
                               f"{target.matched} (whose angle it takes) has no chosen learning rate there"
                               + (f" ({why})" if why else ""))
    return choices


ANGLE_RULE = ("an angle arm at multiplier 1 (primary): the learning rate at which its angle per step is its "
              "matched arm's (train.angles' measured lr; on the prior the matched arm's chosen one), read as "
              "the rule reads any arm; tuned (secondary): the rule's own choice over its sweep")


@dataclass(frozen=True)
class AngleArm:
    """An angle arm's two learning rates per budget: multiplier 1's (unit; its primary estimate reads them
    where swept) and the rule's choice over its sweep (tuned; the secondary estimate's)."""

    target: AngleTarget
    unit: dict[int, float]
    tuned: dict[int, float]

    def multiplier(self, budget: int) -> float | None:
        """tuned / multiplier 1's learning rate at a budget (0.5, 1, 2 on a sweep x2 apart)."""
        if budget not in self.tuned or budget not in self.unit:
            return None
        return self.tuned[budget] / self.unit[budget]

    def as_dict(self) -> dict:
        return {"matched": self.target.matched, "source": self.target.source, "rule": ANGLE_RULE,
                "multiplier_1": [{"budget": b, "lr": lr} for b, lr in sorted(self.unit.items())],
                "tuned": [{"budget": b, "lr": lr, "multiplier": self.multiplier(b)}
                          for b, lr in sorted(self.tuned.items())]}


@dataclass(frozen=True)
class LrPolicy:
    """The learning rates of one cell: chosen[(arm, budget)] = lr for every budget an arm's estimate reads,
    on selection_seeds; notes say why an arm has a budget without one."""

    name: str
    chosen: dict[tuple[str, int], float]
    selection_seeds: tuple[int, ...]
    notes: tuple[str, ...] = ()
    angle_arms: dict[str, AngleArm] = field(default_factory=dict)

    @property
    def rule(self) -> str:
        return f"{self.name}: {RULES[self.name]}{TIES}"

    def as_dict(self) -> dict:
        angles = {"angle_arms": {arm: a.as_dict() for arm, a in self.angle_arms.items()}} if self.angle_arms \
            else {}
        return {"name": self.name, "rule": self.rule, "selection_seeds": list(self.selection_seeds),
                "chosen": [{"arm": arm, "budget": budget, "lr": lr}
                           for (arm, budget), lr in sorted(self.chosen.items())],
                "notes": list(self.notes), **angles}

    def note_of(self, arm: str) -> str:
        """Why the arm lacks a choice somewhere ("" where it has every one)."""
        return "; ".join(note.removeprefix(f"{arm}: ") for note in self.notes if note.startswith(f"{arm}: "))

    def of_arm(self, arm: str) -> dict[int, float]:
        return {b: lr for (a, b), lr in sorted(self.chosen.items()) if a == arm}


def estimand(rule: str, baseline: str, reference: int, angle_arms: bool = False) -> str:
    """The speed-up's estimand in one sentence, under this rule (and the angle arms' where there are any)."""
    angles = (" (an angle arm at multiplier 1 instead, the learning rate at which its angle per step is its "
              "matched arm's)") if angle_arms else ""
    return (f"the tokens each arm needs, {AT_LR[rule]} (speedup.lr_policy {rule}){angles}, to reach "
            f"{baseline}'s loss at N = {reference:,} tokens, as S = N / those tokens")


def _policy(rule: str, choices: Mapping[str, ArmChoice], selection_seeds: Sequence[int],
            angles: Mapping[str, AngleTarget]) -> LrPolicy:
    chosen = {(arm, b): lr for arm, c in choices.items() for b, lr in c.lrs.items()}
    notes = tuple(f"{arm}: {c.why}" for arm, c in choices.items() if c.why)
    angle_arms = {arm: AngleArm(target, dict(choices[arm].unit), dict(choices[arm].tuned))
                  for arm, target in angles.items() if arm in choices}
    return LrPolicy(rule, chosen, tuple(sorted(selection_seeds)), notes, angle_arms)


def cell_policy(params: Params, results: ResultOf, scale: str, context: int,
                dtype: str | None = None, up_to: int | None = None) -> LrPolicy:
    """The policy of one cell of the params' grid ((scale, context) at one weight dtype: by default the
    first of train.weight_dtype), chosen on train.seeds' runs of that dtype under speedup.lr_policy; up_to:
    on the budgets up to it alone (what the results so far choose, for `--prune-sweeps`)."""
    train, speedup = params.train, params.speedup

    def budgets_of(arm: str) -> list[int]:
        return [b for b in grid_budgets(train, scale, context, arm) if up_to is None or b <= up_to]

    # an arm the protocol holds out of the cell (an angle arm awaiting its target) has no sweep to choose on
    sweeps = {arm: {b: sweep_losses(train, results, scale, context, arm, b, dtype) for b in budgets}
              for arm in train.arms if (budgets := budgets_of(arm))}
    reference = reference_tokens(speedup.reference_budget, train.budgets)
    angles = angle_targets(train, scale, context, list(sweeps))
    return _policy(speedup.lr_policy, choose(speedup.lr_policy, sweeps, speedup.baselines, reference, angles),
                   train.seeds, angles)


def runs_policy(results: Sequence[RunResult], rule: str, baselines: Sequence[str], reference: str | int,
                selection_seeds: Sequence[int] | None = None,
                angles: Mapping[str, AngleTarget] | None = None) -> LrPolicy:
    """The policy read off one cell's runs without their params file: the sweep at each (arm, budget) is
    the learning rates its selection seeds ran (every seed of the runs unless named); baselines the primary
    first; angles the angle arms' targets (default: the prior's, no train.angles at hand)."""
    seeds = sorted({r.spec.seed for r in results} if selection_seeds is None else set(selection_seeds))
    found = {r.spec: r for r in results}
    runs: dict[str, dict[int, dict[float, list[RunSpec]]]] = {}
    for spec in sorted(found):
        if spec.seed in seeds:
            runs.setdefault(spec.arm, {}).setdefault(spec.budget, {}).setdefault(spec.lr, []).append(spec)
    sweeps = {arm: {b: mean_losses(found.get, by_lr) for b, by_lr in by_budget.items()}
              for arm, by_budget in runs.items()}
    budgets = sorted({r.spec.budget for r in results})
    if rule == CROSSING and baselines[0] not in sweeps:
        return LrPolicy(rule, {}, tuple(seeds), (f"{baselines[0]}: no runs to set the target",))
    angles = prior_targets(list(sweeps)) if angles is None else \
        {arm: target for arm, target in angles.items() if arm in sweeps}
    return _policy(rule, choose(rule, sweeps, baselines, reference_tokens(reference, budgets), angles), seeds,
                   angles)
