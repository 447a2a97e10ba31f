"""The cell's reading: what the two 2x2s say about each account of nGPT's speed-up.

An account is a pattern, and the reading tests the whole pattern (an intersection-union test). Each
prediction is a claim on the symmetric rule (speedup/equivalence.py: the level interval of a mean log ratio
against the margin M). The conditioning account:
  gpt-orth vs gpt       exceeds by more than xM     fixing conditioning alone speeds training up
  ngpt vs gpt           exceeds by more than xM     nGPT is faster (the paper's finding)
  gpt-rownorm vs gpt    equivalent within xM        fixing the norms alone does nothing
  gpt-orth vs ngpt      equivalent within xM        conditioning is all of nGPT's speed-up
its mirror, the norm account, with gpt-rownorm and gpt-orth exchanged, and the effective-learning-rate
account, on the angle square, with gpt-angle (gpt turned at ngpt's per-step angle) in gpt-orth's place
and ngpt-angle (ngpt turned at gpt's angle) in gpt-rownorm's. Where the cell also runs the other square's
arms, each account predicts them too (Account.extra): an account that does not credit the angle, each
angle arm as fast as its architecture (gpt-angle as gpt, ngpt-angle as ngpt); the angle account, gpt-orth
as gpt. An account's reading is "consistent with" it only when its pattern's every prediction is tested
and every prediction tested holds by its own test at the level; "inconsistent with" it when any prediction
is shown not to hold (another claim holds: the effect absent, reversed or different); else "not resolved".
So a world where only ngpt is fast reads inconsistent with every account, although the conditioning main
effect, which carries half of ngpt's speed-up, exceeds the margin; and a cell without the angle arms
leaves the angle account not resolved. An arm against gpt is read from its speed-up's interval on ln S, a
pair of arms from their paired contrast (speedup/inference.py). The words name each account in turn, the
conditioning account first (the paper's Section 3.2 points at the matrices' condition numbers).

The pre-specified primary effect (speedup.primary_contrast: conditioning, norm or interaction) stays the
headline number and the family Holm's adjustment reads across cells (speedup/across_cells.py), not the
verdict. The reading never proves an account: the factorials are not clean (speedup/factorial.py).
Where the cell has no angle square, whether the effective learning rate confounds the primary effect
(speedup/rivals.py: the interval of the arms' difference in ln angular rate against the margin) is said
beside it: the words gain "; " and that verdict with its interval (effective_lr_clause), e.g. "; confounded
by the effective learning rate: the arms it credits turn their weights x1.73 [1.61, 1.86] as fast ...";
confounded_by_effective_lr is true, false, or null where not resolved or not measured. With the angle
square the angle account's own test replaces that clause, and the words gain whether the square can
separate the accounts at all (speedup/separation.py: each angle arm's conditioning against gpt's and
ngpt's), e.g. "; the angle square cannot separate the accounts: gpt-angle drifted to ...".
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from ngptlab.models import arms
from ngptlab.speedup.equivalence import NOT_RESOLVED, held_claim, interval_claim
from ngptlab.speedup.factorial import ANGLE
from ngptlab.speedup.rivals import clause
from ngptlab.speedup.separation import clause as separation_clause
from ngptlab.stats import LEVEL

_C, _A = arms.square("conditioning"), arms.square("angle")  # corner "ab" -> arm (models/arms.yaml)
BASELINE = _C["00"]
HOLDS, SHOWN_NOT, OPEN = "holds", "shown not to hold", "open"


@dataclass(frozen=True)
class Account:
    """An account of nGPT's speed-up and the pattern it predicts: (a, b, the claim of ln S_a - ln S_b);
    b = gpt: the arm's own speed-up."""

    name: str
    claim: str  # what the account says, after "the account that"
    pattern: tuple[tuple[str, str, str], ...]
    extra: tuple[tuple[str, str, str], ...] = ()  # tested where the cell has their arms and the pattern's

    @property
    def consistent(self) -> str:
        return f"consistent with the account that {self.claim}"

    @property
    def inconsistent(self) -> str:
        return f"inconsistent with the account that {self.claim}"

    def words(self, tests: Sequence[Mapping]) -> str:
        """The reading from its tests ({status, required}, pattern_tests') (module docstring): consistent
        needs every prediction of the pattern tested, and every prediction tested holding; a cell lacking
        one (an arm, or gpt as the baseline) cannot read consistent."""
        statuses = [t["status"] for t in tests]
        required = sum(bool(t["required"]) for t in tests)
        if required == len(self.pattern) and all(s == HOLDS for s in statuses):
            return self.consistent
        return self.inconsistent if SHOWN_NOT in statuses else NOT_RESOLVED

    def readable(self, arms: Collection[str]) -> bool:
        """Whether a cell of these arms has every arm of the pattern."""
        return all(a in arms and b in arms for a, b, _ in self.pattern)

    def predictions(self, arms: Collection[str]) -> list[tuple[str, str, str, bool]]:
        """(a, b, predicted claim, required) of every prediction a cell of these arms tests: the pattern's
        whose two arms it has, then the extra ones likewise where it has the whole pattern."""
        tested = [(*p, True) for p in self.pattern]
        tested += [(*p, False) for p in self.extra] if self.readable(arms) else []
        return [(a, b, claim, required) for a, b, claim, required in tested if a in arms and b in arms]

    def sentence(self, words: str) -> str:
        """The reading as a clause that names the account, "not resolved" included."""
        return f"not resolved for the account that {self.claim}" if words == NOT_RESOLVED else words


def short(words: str) -> str:
    """An account's reading in a word: consistent | inconsistent | not resolved (the words without the
    account they name)."""
    return words.split(" with ")[0]


def _account(name: str, claim: str, fixer: str, other: str, extra: tuple = ()) -> Account:
    """The pattern of an account that credits `fixer` (the control that gives gpt the property the account
    credits) and not `other` (the control that takes it from, or gives gpt, something else)."""
    return Account(name, claim, ((fixer, BASELINE, "exceeds"), (_C["11"], BASELINE, "exceeds"),
                                 (other, BASELINE, "equivalent"), (fixer, _C["11"], "equivalent")), extra)


# Where the angle arms run: an account that does not credit the angle predicts each angle arm as fast as
# its architecture; the angle account predicts gpt-orth (conditioning fixed, angle gpt's) as slow as gpt.
AS_THEIR_ARCHITECTURE = ((_A["01"], BASELINE, "equivalent"), (_A["10"], _A["11"], "equivalent"))
CONDITIONING = _account("conditioning", "conditioning explains nGPT's speed-up", _C["01"], _C["10"],
                        AS_THEIR_ARCHITECTURE)
NORM = _account("norm", "the weight norms explain nGPT's speed-up", _C["10"], _C["01"], AS_THEIR_ARCHITECTURE)
EFFECTIVE_LR = _account("effective learning rate",
                        "the effective learning rate (how far each matrix turns per step) explains nGPT's "
                        "speed-up", _A["01"], _A["10"], ((_C["01"], BASELINE, "equivalent"),))
ACCOUNTS = (CONDITIONING, NORM, EFFECTIVE_LR)
CONSISTENT, INCONSISTENT = CONDITIONING.consistent, CONDITIONING.inconsistent
PREDICTED = {"conditioning": "exceeds", "norm": "equivalent", "interaction": "equivalent"}


def pattern_tests(arms: Mapping[str, Mapping], contrasts: list[Mapping], margin: float,
                  baseline: str = BASELINE, account: Account = CONDITIONING) -> list[dict]:
    """[{a, b, predicted, required, log_interval, held, status}] of every prediction of the account the cell
    tests (Account.predictions): the claim its level interval holds (None: none) against the predicted one;
    an arm's speed-up answers a prediction against gpt only where gpt is the baseline it was measured
    against."""
    intervals: dict[tuple[str, str], list[float] | None] = {}
    for arm, entry in arms.items():
        interval = entry["speedup"].get("interval") if entry.get("speedup") else None
        intervals[(arm, baseline)] = None if interval is None else [math.log(x) for x in interval]
    for c in contrasts:
        intervals[(c["a"], c["b"])] = c["difference_log"]["interval"]
    tests = []
    for a, b, predicted, required in account.predictions(arms):
        if (a, b) not in intervals:
            continue
        interval = intervals[(a, b)]
        held = None if interval is None else interval_claim(interval, margin)
        status = OPEN if held is None else HOLDS if held == predicted else SHOWN_NOT
        tests.append({"a": a, "b": b, "predicted": predicted, "required": required, "log_interval": interval,
                      "held": held, "status": status})
    return tests


def reading_words(primary: str, p_values: dict[str, float] | None, level: float = LEVEL) -> str:
    """consistent with / inconsistent with the account / not resolved, from the primary effect's (possibly
    adjusted) claim p-values alone: what a speed-up file from before the pattern reading gives."""
    claim = held_claim(p_values, level)
    if claim is None:
        return NOT_RESOLVED
    return CONSISTENT if claim == PREDICTED[primary] else INCONSISTENT


def family_words(pattern_reading: str | None, primary: str, p_values: dict[str, float] | None,
                 level: float = LEVEL) -> str:
    """The reading across cells: the cell's pattern reading, where "consistent" also needs the primary
    effect's Holm-adjusted claim to be the predicted one (else not resolved); a file without a pattern
    reading falls back to the primary effect's claim."""
    if pattern_reading is None:
        return reading_words(primary, p_values, level)
    if pattern_reading == CONSISTENT and held_claim(p_values, level) != PREDICTED[primary]:
        return NOT_RESOLVED
    return pattern_reading


def runs_angle_square(arms: Collection[str]) -> bool:
    """Whether a cell of these arms runs the angle square: there the angle account's own test, not the
    confound clause, reads the effective learning rate."""
    return all(arm in arms for arm in ANGLE.arms)


def primary_reading(factorial: dict | None, primary: str, margin: float, level: float = LEVEL,
                    confound: Mapping | None = None, arms: Mapping[str, Mapping] | None = None,
                    contrasts: list[Mapping] | None = None, baseline: str = BASELINE,
                    separation: Mapping | None = None) -> dict:
    """{primary, predicted, estimate {ln, ratio}, log_interval, interval, method, level, n_seeds, verdict,
    p_values, pattern [pattern_tests], pattern_reading, accounts {name: {claim, pattern, reading}}, reading,
    confounded_by_effective_lr, effective_lr_clause, note}: the cell's primary effect, each account's
    pattern and the words the report uses for them (pattern and pattern_reading: the conditioning
    account's); arms and contrasts are estimate_cell's (the patterns' intervals), confound rivals()'s
    primary entry (None: not checked), separation speedup/separation.py's (None: no angle arms)."""
    out = {"primary": primary, "predicted": PREDICTED[primary], "margin": margin, "estimate": None,
           "log_interval": None, "interval": None, "method": None, "level": level, "n_seeds": 0,
           "verdict": None, "p_values": None, "pattern": [], "pattern_reading": NOT_RESOLVED,
           "accounts": {}, "reading": NOT_RESOLVED,
           "confounded_by_effective_lr": None, "effective_lr_clause": None, "separation_clause": None,
           "note": None}
    if factorial is None:
        out["note"] = "the cell lacks one of gpt, gpt-rownorm, gpt-orth, ngpt: no factorial"
        return out
    effect = factorial["effects"][primary]
    out.update({key: effect[key] for key in ("estimate", "log_interval", "interval", "method", "level",
                                               "n_seeds", "verdict", "p_values")})
    for account in ACCOUNTS:
        tests = pattern_tests(arms or {}, contrasts or [], margin, baseline, account)
        out["accounts"][account.name] = {"claim": account.claim, "pattern": tests,
                                         "reading": account.words(tests)}
    out["pattern"] = out["accounts"][CONDITIONING.name]["pattern"]
    out["pattern_reading"] = out["accounts"][CONDITIONING.name]["reading"]
    # the angle account is read, and replaces the confound clause, only where the angle square runs
    angle_square = runs_angle_square(arms or {})
    said = [account for account in ACCOUNTS if account is not EFFECTIVE_LR or angle_square]
    words = "; ".join(account.sentence(out["accounts"][account.name]["reading"]) for account in said)
    effective_lr = None if angle_square else clause(confound or {})
    separated = separation_clause(separation) if angle_square else None
    out["reading"] = words + "".join(f"; {c}" for c in (effective_lr, separated) if c)
    out["confounded_by_effective_lr"] = (confound or {}).get("confounded")
    out["effective_lr_clause"] = effective_lr
    out["separation_clause"] = separated
    out["note"] = factorial["note"]
    return out
