"""The cell's reading: what the arms say about each account of nGPT's speed-up.

An account is a claim about a mechanism, so its prediction for each arm comes from that arm's measured
mechanism, not from the arm's label. The conditioning account and the effective-learning-rate account are
read from the dose-response fits (speedup/dose_response.py: ln S against each arm's measured ln kappa and ln
angle per step, every arm of the cell, gpt-orth's angle included): consistent, inconsistent, cannot tell the
accounts apart or not resolved, the conditioning account's consistent reading saying "kappa = 1 costs
capacity" where gpt-orth lies below its line; source "measured", words the fit's. Where the cell has no such
fit (runs trained before kappa and the angle were logged, fewer than three arms with the predictor), the
account falls back to its label pattern below, source "labels", its words saying so.

The norm account stays read by its pattern, source "construction": its mechanism, fixed row norms, is set by
construction (gpt-rownorm and ngpt fix every row norm exactly, gpt and gpt-orth leave them free), so an arm's
label is its measurement.

A label pattern is a claim on the symmetric rule (speedup/equivalence.py: the level interval of a mean log
ratio against the margin M) per pair of arms. The conditioning account's:
  gpt-orth vs gpt       exceeds by more than xM     fixing conditioning alone speeds training up
  ngpt vs gpt           exceeds by more than xM     nGPT is faster (the paper's finding)
  gpt-rownorm vs gpt    equivalent within xM        fixing the norms alone does nothing
  gpt-orth vs ngpt      equivalent within xM        conditioning is all of nGPT's speed-up
its mirror, the norm account, with gpt-rownorm and gpt-orth exchanged, and the effective-learning-rate
account, on the angle square, with gpt-angle (gpt turned at ngpt's per-step angle) in gpt-orth's place and
ngpt-angle (ngpt turned at gpt's angle) in gpt-rownorm's. A pattern reads "consistent with" the account only
when its every prediction is tested and holds by its own test at the level; "inconsistent with" it when any
prediction is shown not to hold (another claim holds: the effect absent, reversed or different); else "not
resolved". So a world where only ngpt is fast reads inconsistent with every pattern, although the
conditioning main effect, which carries half of ngpt's speed-up, exceeds the margin. An arm against gpt is
read from its speed-up's interval on ln S, a pair of arms from their paired contrast (speedup/inference.py).
Every account's pattern tests stay in the document (`pattern`, `by_labels`: what the labels would read),
whatever its source. The words name each account in turn, the conditioning account first (the paper's
Section 3.2 points at the matrices' condition numbers).

The pre-specified primary effect (speedup.primary_contrast: conditioning, norm or interaction) stays the
headline number and the family Holm's adjustment reads across cells (speedup/across_cells.py), not the
verdict. The reading never proves an account: the factorials are not clean (speedup/factorial.py).
Where the angle line is fitted over measured angles (every conditioning-square arm's, gpt-orth's included)
the effective-learning-rate account is read from it and no confound clause is said; only where there is no
angle fit (nor the angle square's pattern) whether the effective learning rate confounds the primary effect
(speedup/rivals.py: the interval of the arms' difference in ln angular rate against the margin) is said
beside it: the words gain "; " and that verdict with its interval (effective_lr_clause), e.g. "; confounded
by the effective learning rate: the arms it credits turn their weights x1.73 [1.61, 1.86] as fast ...";
confounded_by_effective_lr is true, false, or null where not resolved or not measured. With the angle square
the words gain whether the square can separate the accounts at all (speedup/separation.py: each angle arm's
conditioning against gpt's and ngpt's), e.g. "; the angle square cannot separate the accounts: ...".
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from ngptlab.models import arms
from ngptlab.speedup.equivalence import NOT_RESOLVED, held_claim, interval_claim
from ngptlab.speedup.factorial import ANGLE
from ngptlab.speedup.factorial import CONDITIONING as CONDITIONING_SQUARE
from ngptlab.speedup.rivals import clause
from ngptlab.speedup.separation import clause as separation_clause
from ngptlab.stats import LEVEL

_C, _A = arms.square("conditioning"), arms.square("angle")  # corner "ab" -> arm (models/arms.yaml)
BASELINE = _C["00"]
HOLDS, SHOWN_NOT, OPEN = "holds", "shown not to hold", "open"
# the dose-response fit's readings beyond consistent / inconsistent / not resolved (speedup/dose_response.py
# says them; defined here, which it imports, so this module needs no import of it)
CANNOT_TELL, NO_FIT, CAPACITY = "cannot tell the accounts apart", "no fit", "kappa = 1 costs capacity"
MEASURED, LABELS, CONSTRUCTION = "measured", "labels", "construction"  # an account's source


@dataclass(frozen=True)
class Account:
    """An account of nGPT's speed-up and the label pattern it predicts: (a, b, the claim of ln S_a - ln
    S_b); b = gpt: the arm's own speed-up."""

    name: str
    claim: str  # what the account says, after "the account that"
    pattern: tuple[tuple[str, str, str], ...]

    @property
    def consistent(self) -> str:
        return f"consistent with the account that {self.claim}"

    @property
    def inconsistent(self) -> str:
        return f"inconsistent with the account that {self.claim}"

    @property
    def cannot_tell(self) -> str:
        return f"{CANNOT_TELL} for the account that {self.claim}"

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
        """(a, b, predicted claim, required) of every prediction of the pattern whose two arms the cell
        has."""
        return [(a, b, claim, True) for a, b, claim in self.pattern if a in arms and b in arms]

    def sentence(self, words: str) -> str:
        """The reading as a clause that names the account, "not resolved" included."""
        return f"not resolved for the account that {self.claim}" if words == NOT_RESOLVED else words

    def measured(self, fit: Mapping) -> str:
        """The reading of a dose-response fit (speedup/dose_response.py fit_account + reading) in this
        account's words: consistent (with "kappa = 1 costs capacity" where gpt-orth lies below the line),
        inconsistent, cannot tell the accounts apart, or not resolved."""
        reading = fit["reading"]
        if reading == "consistent":
            capacity = any(e["status"] == CAPACITY for e in fit["arms"].values())
            return self.consistent + (f" ({CAPACITY})" if capacity else "")
        return {"inconsistent": self.inconsistent, CANNOT_TELL: self.cannot_tell}.get(reading, NOT_RESOLVED)


SHORT = ("consistent", "inconsistent", CANNOT_TELL, NOT_RESOLVED)  # an account's reading in a word


def short(words: str) -> str:
    """An account's reading in a word (SHORT): consistent | inconsistent | cannot tell the accounts apart |
    not resolved, the words without the account they name or what follows."""
    return next((w for w in SHORT if words == w or words.startswith(f"{w} ")), words.split(" with ")[0])


def _account(name: str, claim: str, fixer: str, other: str) -> Account:
    """The pattern of an account that credits `fixer` (the control that gives gpt the property the account
    credits) and not `other` (the control that takes it from, or gives gpt, something else)."""
    return Account(name, claim, ((fixer, BASELINE, "exceeds"), (_C["11"], BASELINE, "exceeds"),
                                 (other, BASELINE, "equivalent"), (fixer, _C["11"], "equivalent")))


CONDITIONING = _account("conditioning", "conditioning explains nGPT's speed-up", _C["01"], _C["10"])
NORM = _account("norm", "the weight norms explain nGPT's speed-up", _C["10"], _C["01"])
EFFECTIVE_LR = _account("effective learning rate",
                        "the effective learning rate (how far each matrix turns per step) explains nGPT's "
                        "speed-up", _A["01"], _A["10"])
ACCOUNTS = (CONDITIONING, NORM, EFFECTIVE_LR)
MEASURED_ACCOUNTS = (CONDITIONING, EFFECTIVE_LR)  # read from the dose-response fits where the cell has them
CONSISTENT, INCONSISTENT = CONDITIONING.consistent, CONDITIONING.inconsistent
PREDICTED = {"conditioning": "exceeds", "norm": "equivalent", "interaction": "equivalent"}
NORM_WORDS = ("read by its pattern: its mechanism, fixed row norms, is set by construction (gpt-rownorm and "
              "ngpt fix every row norm exactly, gpt and gpt-orth leave them free), so the label is its "
              "measurement")


def pattern_tests(arms: Mapping[str, Mapping], contrasts: list[Mapping], margin: float,
                  baseline: str = BASELINE, account: Account = CONDITIONING) -> list[dict]:
    """[{a, b, predicted, required, log_interval, held, status}] of every prediction of the account's
    pattern the cell tests (Account.predictions): the claim its level interval holds (None: none) against
    the predicted one; an arm's speed-up answers a prediction against gpt only where gpt is the baseline it
    was measured against."""
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
    """The reading across cells: the cell's reading of the conditioning account, where "consistent" (its
    short reading: the measured one may say more) also needs the primary effect's Holm-adjusted claim to be
    the predicted one (else not resolved); a file without such a reading falls back to the primary effect's
    claim."""
    if pattern_reading is None:
        return reading_words(primary, p_values, level)
    if short(pattern_reading) == "consistent" and held_claim(p_values, level) != PREDICTED[primary]:
        return NOT_RESOLVED
    return pattern_reading


def runs_angle_square(arms: Collection[str]) -> bool:
    """Whether a cell of these arms runs the angle square: there the angle account's pattern, not the
    confound clause, reads the effective learning rate where its angles were not measured."""
    return all(arm in arms for arm in ANGLE.arms)


def fitted(dose: Mapping | None, account: Account) -> Mapping | None:
    """The account's dose-response fit where it has a line (reading not "no fit"), else None."""
    fit = ((dose or {}).get("accounts") or {}).get(account.name)
    return fit if fit is not None and fit.get("reading") not in (None, NO_FIT) else None


def angle_fitted(dose: Mapping | None) -> bool:
    """Whether the angle line is fitted over the measured angles of every arm of the conditioning square
    (gpt-orth's included): there the effective-learning-rate account is read from it, not the confound
    clause."""
    fit = fitted(dose, EFFECTIVE_LR)
    return fit is not None and all(arm in fit["arms"] for arm in CONDITIONING_SQUARE.arms)


def account_reading(account: Account, tests: list[dict], dose: Mapping | None) -> dict:
    """{claim, source, reading, words, pattern, by_labels} of one account (module docstring): the measured
    reading where the cell has the account's fit, the norm account's pattern by construction, else the label
    pattern, its words saying so."""
    by_labels = account.words(tests)
    fit = fitted(dose, account) if account in MEASURED_ACCOUNTS else None
    if account not in MEASURED_ACCOUNTS:
        source, reading, words = CONSTRUCTION, by_labels, f"{account.sentence(by_labels)}: {NORM_WORDS}"
    elif fit is not None:
        source, reading, words = MEASURED, account.measured(fit), fit["words"]
    else:
        # the cell's note where nothing was measured, else why this account's line has no fit
        why = ((dose or {}).get("note") or (((dose or {}).get("accounts") or {}).get(account.name) or {})
               .get("words") or "no dose-response fit in the cell")
        source, reading = LABELS, by_labels
        words = (f"{account.sentence(by_labels)}, by the arms' labels (its pattern), not their measured "
                 f"mechanisms: {why}")
    return {"claim": account.claim, "source": source, "reading": reading, "words": words, "pattern": tests,
            "by_labels": by_labels}


def primary_reading(factorial: dict | None, primary: str, margin: float, level: float = LEVEL,
                    confound: Mapping | None = None, arms: Mapping[str, Mapping] | None = None,
                    contrasts: list[Mapping] | None = None, baseline: str = BASELINE,
                    separation: Mapping | None = None, dose: Mapping | None = None) -> dict:
    """{primary, predicted, estimate {ln, ratio}, log_interval, interval, method, level, n_seeds, verdict,
    p_values, pattern [pattern_tests], pattern_reading, accounts {name: account_reading}, reading,
    confounded_by_effective_lr, effective_lr_clause, note}: the cell's primary effect, each account's
    reading and the words the report uses for them (pattern and pattern_reading: the conditioning
    account's); arms and contrasts are estimate_cell's (the patterns' intervals), confound rivals()'s
    primary entry (None: not checked), separation speedup/separation.py's (None: no angle arms), dose
    speedup/dose_response.py's document (None: none; passed in, not imported, as it imports this module)."""
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
        out["accounts"][account.name] = account_reading(account, tests, dose)
    out["pattern"] = out["accounts"][CONDITIONING.name]["pattern"]
    out["pattern_reading"] = out["accounts"][CONDITIONING.name]["reading"]
    # the angle account is said where it is measured, or its pattern has the angle square; the confound
    # clause only where neither reads the effective learning rate
    angle_square, measured_angle = runs_angle_square(arms or {}), angle_fitted(dose)
    said = [account for account in ACCOUNTS if account is not EFFECTIVE_LR or angle_square
            or out["accounts"][account.name]["source"] == MEASURED]
    words = "; ".join(account.sentence(out["accounts"][account.name]["reading"]) for account in said)
    effective_lr = None if angle_square or measured_angle else clause(confound or {})
    separated = separation_clause(separation) if angle_square else None
    out["reading"] = words + "".join(f"; {c}" for c in (effective_lr, separated) if c)
    out["confounded_by_effective_lr"] = (confound or {}).get("confounded")
    out["effective_lr_clause"] = effective_lr
    out["separation_clause"] = separated
    out["note"] = factorial["note"]
    return out
