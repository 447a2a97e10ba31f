"""The design's table: per planted truth and cell, how often each reading and claim comes out, how often
each interval covers its planted value, the bias of each estimate, and the thresholds a design must meet.

Every probability p over n worlds comes with its Monte-Carlo standard error sqrt(p (1 - p) / n).
Definitions (per cell; the primary effect is speedup.primary_contrast):
- correct reading, per account the cell reads (speedup/reading.py ACCOUNTS): for the conditioning and the
  effective-learning-rate accounts, read from the arms' measured mechanisms wherever the planted values give
  a line, the dose-response rule applied to the planted values (design/mechanisms.py expected_fits: every
  truth plants its arms' kappa and angle, design/placements.py), a world's reading counted right by
  mechanisms.agrees (an inconsistent reading naming an arm the planted values make depart), and where the
  planted values read "not resolved" (an arm at the margin's edge) also by the world's construction
  (`right`: inconsistent with an account the world makes false, consistent with the one it makes true); for
  the norm account (read by construction) and where no line is fitted, the reading the planted speed-ups
  give by the account's label pattern (design/truths.py Truth.reading); readings are counted by their short
  words (consistent, inconsistent, cannot tell the accounts apart, not resolved); the top-level readings are
  the conditioning account's;
- wrong directional: the primary effect's claim is "exceeds" or "falls short" and the planted effect makes
  another claim (under the null, any directional claim);
- estimand: what the estimate estimates, the value a noise-free world gives (design/simulate.py): the
  speed-up at the learning rates the policy chooses; policy gap: estimand - planted (the planted law's
  ln S, effect, or a contrast's ln S_a - ln S_b), what the learning-rate policy itself costs;
- coverage: among the worlds where an estimate has an interval, the fraction whose interval holds the
  estimand (the planted value where the noise-free world gives none); with_interval: the fraction of
  worlds with one; coverage_planted: the same for the planted value;
- bias: the mean over worlds with an estimate of estimate - estimand (ln scale).
Thresholds, for each account the cell's arms can read: >= 80% correct readings where the conditioning
account is true, where its mirror (the norm account) is, where the angle account is, and where only ngpt is
fast; <= 5% readings "consistent" wherever the expected reading is another (the partial and null worlds
included) and wherever the world makes the account false by construction (design/truths.py MADE_TRUE: every
account but the one a world makes true; where the planted values themselves read "consistent" there, as the
2x2 alone reads "only ngpt" as conditioning with gpt-orth's capacity cost, the check fails: the grid cannot
tell the world from the account);
<= 5% wrong directional claims of the primary effect under the null; 93-97% coverage of the primary effect's
interval in each. Coverage is a Monte-Carlo estimate whose standard error at 200 worlds (~1.5%) is a third
of the band's width, so its check fails only where the estimate's own 95% Clopper-Pearson interval
(scipy.stats.binomtest) lies wholly outside 93-97%: coverage shown to miss the band, not a point estimate
that strays from it by Monte-Carlo error; the check keeps that interval beside the estimate.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping

from scipy import stats

from ngptlab.design.mechanisms import agrees, expected_fits, label
from ngptlab.design.truths import MADE_TRUE, Truth
from ngptlab.speedup.dose_response import CONSISTENT, INCONSISTENT
from ngptlab.speedup.equivalence import CLAIMS, NOT_RESOLVED
from ngptlab.speedup.factorial import CONDITIONING as CONDITIONING_SQUARE
from ngptlab.speedup.reading import (
    ACCOUNTS,
    CONDITIONING,
    LABELS,
    MEASURED,
    MEASURED_ACCOUNTS,
    NO_FIT,
    SHORT,
    Account,
    short,
)

DIRECTIONAL = ("exceeds", "falls_short")
MIN_CORRECT, MAX_WRONG_DIRECTIONAL, MAX_FALSE_CONSISTENT, COVERAGE = 0.80, 0.05, 0.05, (0.93, 0.97)
MC_LEVEL = 0.95  # of the Monte-Carlo interval a coverage check reads
# the truths whose reading must come out right; in the others (partial, null) "not resolved" is no error
MUST_READ = ("account true", "account false", "ngpt only", "angle account")


def counted(read: list[str | None], n: int) -> dict[str, dict]:
    """{short reading: proportion} of the worlds' readings (speedup/reading.py short)."""
    return {key: proportion(sum(r is not None and short(r) == key for r in read), n) for key in SHORT}


def proportion(hits: int, n: int) -> dict:
    """{p, se, n}: a Monte-Carlo proportion and its standard error (None over no worlds)."""
    if n == 0:
        return {"p": None, "se": None, "n": 0}
    p = hits / n
    return {"p": p, "se": math.sqrt(p * (1 - p) / n), "n": n}


def monte_carlo_interval(value: dict, level: float = 0.95) -> list[float] | None:
    """The exact (Clopper-Pearson) interval of a Monte-Carlo proportion {p, n} (scipy.stats.binomtest)."""
    if not value["n"]:
        return None
    ci = stats.binomtest(round(value["p"] * value["n"]), value["n"]).proportion_ci(level, method="exact")
    return [ci.low, ci.high]


def _covers(interval: list[float], value: float) -> bool:
    return interval[0] <= value <= interval[1]


def estimate_summary(entries: list[dict]) -> dict:
    """{planted, estimand, policy_gap, with_interval, coverage, coverage_planted, bias, n_estimates} of one
    estimate over the worlds."""
    planted, estimand = entries[0]["planted"], entries[0].get("estimand")
    target = planted if estimand is None else estimand
    with_interval = [e for e in entries if e["interval"] is not None]
    estimated = [e["estimate"] - target for e in entries if e["estimate"] is not None]
    return {"planted": planted, "estimand": estimand,
            "policy_gap": None if estimand is None else estimand - planted,
            "with_interval": proportion(len(with_interval), len(entries)),
            "coverage": proportion(sum(_covers(e["interval"], target) for e in with_interval),
                                   len(with_interval)),
            "coverage_planted": proportion(sum(_covers(e["interval"], planted) for e in with_interval),
                                           len(with_interval)),
            "bias": statistics.fmean(estimated) if estimated else None, "n_estimates": len(estimated)}


def measured_expectation(outcomes: list[dict], truth: Truth, margin: float, account: Account) -> dict | None:
    """The truth's planted values' dose-response reading of the account in the cell's arms (expected_fits'
    entry) where the worlds read it from measured mechanisms and the planted values give a line, else None
    (read by its label pattern)."""
    arms = tuple(outcomes[0]["arms"])  # the baseline first
    if account not in MEASURED_ACCOUNTS or "dose_response" not in outcomes[0] or not arms \
            or truth.mechanism(arms[0]) is None:
        return None
    expected = expected_fits(truth, arms, arms[0], margin)[account.name]
    return None if expected["reading"] == NO_FIT else expected


def right(read: Mapping, expected: Mapping, truth: Truth, account: Account) -> bool:
    """Whether a world's measured reading of the account is right: the planted values' reading
    (mechanisms.agrees), or, where they read "not resolved" (an arm's planted residual at the margin's edge,
    so noise decides which side it is read on), the world's construction: "inconsistent" with an account
    the world makes false, "consistent" with the one it makes true (truths.py MADE_TRUE)."""
    if agrees(read, expected):
        return True
    if expected["reading"] != NOT_RESOLVED:
        return False
    return (read["reading"] == INCONSISTENT and account.name in truth.false_accounts()
            or read["reading"] == CONSISTENT and MADE_TRUE.get(truth.account) == account.name)


def readable(outcomes: list[dict], truth: Truth, margin: float, account: Account) -> bool:
    """Whether the cell reads the account: from measured mechanisms, or its label pattern's every arm."""
    return (measured_expectation(outcomes, truth, margin, account) is not None
            or account.readable(outcomes[0]["arms"]))


def account_summary(outcomes: list[dict], truth: Truth, margin: float, account: Account,
                    arms: tuple[str, ...] | None = None) -> dict:
    """{source, expected_reading (short), expected_label, readings {short: proportion}, correct} of one
    account over a cell's worlds (module docstring); arms: the label pattern's (default the cell's)."""
    n = len(outcomes)
    read = [o["accounts"].get(account.name, o["reading"] if account is CONDITIONING else None)
            for o in outcomes]
    expected = measured_expectation(outcomes, truth, margin, account)
    if expected is not None:
        return {"source": MEASURED, "expected_reading": short(expected["reading"]),
                "expected_label": label(expected), "readings": counted(read, n),
                "correct": proportion(sum(right(o["dose_response"][account.name], expected, truth, account)
                                          for o in outcomes), n)}
    words = truth.reading(margin, account, outcomes[0]["arms"] if arms is None else arms)
    return {"source": LABELS if account in MEASURED_ACCOUNTS else "construction",
            "expected_reading": None if words is None else short(words),
            "expected_label": None if words is None else short(words), "readings": counted(read, n),
            "correct": None if words is None else proportion(sum(r == words for r in read), n)}


def cell_summary(outcomes: list[dict], truth: Truth, primary: str, margin: float) -> dict:
    """The table's entries of one cell over its worlds' outcomes (design/outcome.py); the top-level reading
    the conditioning account's (by labels: of the conditioning square's arms)."""
    n = len(outcomes)
    planted_claim = truth.claim(primary, margin)
    top = account_summary(outcomes, truth, margin, CONDITIONING, tuple(CONDITIONING_SQUARE.arms))
    names = list(dict.fromkeys(name for o in outcomes for name in o["estimates"]))
    summary = {
        "expected_reading": top["expected_reading"], "expected_label": top["expected_label"],
        "source": top["source"], "planted_claim": planted_claim, "readings": top["readings"],
        "claims": {claim: proportion(sum(o["claim"] == claim for o in outcomes), n) for claim in CLAIMS}
        | {"none": proportion(sum(o["claim"] is None for o in outcomes), n)},
        "correct": top["correct"],
        "wrong_directional": proportion(sum(o["claim"] in DIRECTIONAL and o["claim"] != planted_claim
                                            for o in outcomes), n),
        "accounts": {account.name: account_summary(outcomes, truth, margin, account) for account in ACCOUNTS
                     if readable(outcomes, truth, margin, account)},
        "estimates": {name: estimate_summary([o["estimates"][name] for o in outcomes
                                              if name in o["estimates"]]) for name in names}}
    if any(o["holm_reading"] is not None for o in outcomes):
        summary["holm_readings"] = counted([o["holm_reading"] for o in outcomes], n)
    return summary


def thresholds(scenarios: list[dict]) -> list[dict]:
    """[{check, truth, cell, value {p, se, n}, bound, passed}]: the module docstring's thresholds."""
    checks = []
    for scenario in scenarios:
        account = scenario["account"]
        for cell, s in scenario["cells"].items():
            row = {"truth": scenario["truth"], "cell": cell}
            for name, a in s["accounts"].items():
                if account in MUST_READ and a["correct"] is not None:
                    checks.append({**row, "check": f"correct reading of the {name} account",
                                   "value": a["correct"], "bound": f">= {MIN_CORRECT:.0%}",
                                   "passed": a["correct"]["p"] >= MIN_CORRECT})
                if name in scenario["false_accounts"] or (a["expected_reading"] is not None
                                                          and a["expected_reading"] != "consistent"):
                    value = a["readings"]["consistent"]
                    checks.append({**row, "check": f"reading consistent with the {name} account, false here",
                                   "value": value, "bound": f"<= {MAX_FALSE_CONSISTENT:.0%}",
                                   "passed": value["p"] <= MAX_FALSE_CONSISTENT})
            if account == "null":
                value = s["wrong_directional"]
                checks.append({**row, "check": "wrong directional reading", "value": value,
                               "bound": f"<= {MAX_WRONG_DIRECTIONAL:.0%}",
                               "passed": value["p"] <= MAX_WRONG_DIRECTIONAL})
            coverage = s["estimates"]["primary"]["coverage"]
            monte_carlo = monte_carlo_interval(coverage)
            checks.append({**row, "check": "coverage of the primary effect's interval", "value": coverage,
                           "bound": f"{COVERAGE[0]:.0%}-{COVERAGE[1]:.0%} not excluded by its Monte-Carlo "
                                    f"{MC_LEVEL:.0%} Clopper-Pearson interval",
                           "monte_carlo_interval": monte_carlo,
                           "passed": monte_carlo is not None and monte_carlo[0] <= COVERAGE[1]
                           and monte_carlo[1] >= COVERAGE[0]})
    return checks


def design_table(outcomes: list[list[dict]], truths: list[Truth], primary: str, margin: float) -> dict:
    """{scenarios [{truth, account, ngpt, worlds, cells {cell: cell_summary}}], thresholds, passed}."""
    scenarios = []
    for truth, worlds in zip(truths, outcomes, strict=True):
        cells = list(dict.fromkeys(cell for world in worlds for cell in world))
        scenarios.append({"truth": truth.label, "account": truth.account, "ngpt": truth.ngpt,
                          "false_accounts": list(truth.false_accounts()), "worlds": len(worlds),
                          "cells": {cell: cell_summary([w[cell] for w in worlds], truth, primary, margin)
                                    for cell in cells}})
    checks = thresholds(scenarios)
    return {"scenarios": scenarios, "thresholds": checks, "passed": all(c["passed"] for c in checks)}
