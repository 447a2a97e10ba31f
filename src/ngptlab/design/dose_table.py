"""The dose-response worlds' table (design/mechanisms.py): per world, noise level, cell and account, how often
each reading comes out, how often it is the expected one, how often it is "consistent" where the planted
values read the account otherwise, and how often the slope's interval covers its value.

Noise levels (NOISES): the loss model's seed noise as given and twice it, the seed sd of the loss and the sd
of ln kappa and ln angle together (scaled_noise). Definitions, each probability with its Monte-Carlo standard
error (design/table.py proportion):
- expected reading: the dose-response rule applied to the planted values (mechanisms.expected_fits);
- correct: the world's reading agrees with it (mechanisms.agrees: an inconsistent reading names an arm the
  planted values make depart);
- consistent under a false account: the reading "consistent" (the capacity reading included) wherever the
  expected reading is another;
- the slope's coverage: as design/table.py estimate_summary, of the noise-free world's slope (the estimand:
  the same protocol's learning rates), beside it of the planted values' slope.
Thresholds, at every noise level, as the label-based truths' (design/table.py): >= 80% correct in every world
and account, <= 5% consistent under a false account, and 93-97% coverage of each slope's interval not
excluded by its Monte-Carlo Clopper-Pearson interval.
Measured on settle (20 worlds per world and noise level): the slope's coverage of the noise-free world's slope
is 75-95% on the line each world follows (85% pooled over its 12 angle- and conditioning-line scenarios) and
65-70% on the other in two angle-line worlds: 3 of 114 checks fail. The held-out seeds' ln S share, at each
seed, the baseline's run that sets every arm's target, a noise common to the arms (their mean ln S correlate
0.51 across worlds) that speedup/dose_response.py's bootstrap, resampling each arm's seeds apart, does not
see; resampling the seeds jointly across arms, or the pooled within-arm deviations, widened the slope's
interval too little (tried). An interval with the seed as its unit (a line per seed, t on n_seeds - 1 df)
would carry it, at the width two degrees of freedom give at three seeds: not built.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from ngptlab.design.loss_model import LossModel
from ngptlab.design.mechanisms import DoseWorld, agrees, label
from ngptlab.design.table import (
    COVERAGE,
    MAX_FALSE_CONSISTENT,
    MC_LEVEL,
    MIN_CORRECT,
    estimate_summary,
    monte_carlo_interval,
    proportion,
)
from ngptlab.speedup.dose_response import CONSISTENT

NOISES = (1, 2)  # the seed noise as given and twice it


def scaled_noise(model: LossModel, multiple: float) -> LossModel:
    """The loss model with its seed noise, and kappa's and the angle's, times `multiple`."""
    return dataclasses.replace(model, seed_sd=multiple * model.seed_sd, kappa_sd=multiple * model.kappa_sd,
                               angle_sd=multiple * model.angle_sd)


def account_summary(records: list[dict], name: str) -> dict:
    """{expected_reading, expected_label, readings {label: proportion}, correct, consistent, slope
    (estimate_summary)} of one account over a cell's worlds."""
    n, expected = len(records), records[0]["dose_expected"][name]
    read = [r["dose_response"][name] for r in records]
    slopes = [r["estimates"][f"slope {name}"] for r in records if f"slope {name}" in r["estimates"]]
    counts = Counter(label(x) for x in read)
    return {"expected_reading": expected["reading"], "expected_label": label(expected),
            "readings": {words: proportion(k, n) for words, k in counts.most_common()},
            "correct": proportion(sum(agrees(x, expected) for x in read), n),
            "consistent": proportion(sum(x["reading"] == CONSISTENT for x in read), n),
            "slope": estimate_summary(slopes) if slopes else None}


def thresholds(scenarios: list[dict]) -> list[dict]:
    """[{check, world, noise, cell, account, value, bound, passed}]: the module docstring's thresholds."""
    checks = []
    for scenario in scenarios:
        for cell, accounts in scenario["cells"].items():
            for name, a in accounts.items():
                row = {"world": scenario["world"], "noise": scenario["noise"], "cell": cell, "account": name}
                checks.append({**row, "check": f"correct dose-response reading of the {name} account",
                               "value": a["correct"], "bound": f">= {MIN_CORRECT:.0%}",
                               "passed": a["correct"]["p"] >= MIN_CORRECT})
                if a["expected_reading"] != CONSISTENT:
                    checks.append({**row, "check": f"dose-response reading consistent with the {name} "
                                                   "account, false here",
                                   "value": a["consistent"], "bound": f"<= {MAX_FALSE_CONSISTENT:.0%}",
                                   "passed": a["consistent"]["p"] <= MAX_FALSE_CONSISTENT})
                if a["slope"] is not None:
                    coverage = a["slope"]["coverage"]
                    mc = monte_carlo_interval(coverage)
                    checks.append({**row, "check": f"coverage of the {name} slope's interval",
                                   "value": coverage, "monte_carlo_interval": mc,
                                   "bound": f"{COVERAGE[0]:.0%}-{COVERAGE[1]:.0%} not excluded by its "
                                            f"Monte-Carlo {MC_LEVEL:.0%} Clopper-Pearson interval",
                                   "passed": (mc is not None and mc[0] <= COVERAGE[1]
                                              and mc[1] >= COVERAGE[0])})
    return checks


def dose_table(outcomes: dict[int, list[list[dict]]], worlds: list[DoseWorld]) -> dict:
    """{noises, scenarios [{world, line (the account S follows), noise, worlds, cells {cell: {account:
    account_summary}}}], thresholds, passed} from the outcomes of every world at each noise level."""
    scenarios = []
    for noise, by_world in outcomes.items():
        for world, played in zip(worlds, by_world, strict=True):
            cells = list(dict.fromkeys(cell for w in played for cell in w))
            scenarios.append({
                "world": world.label, "line": world.account, "noise": noise, "worlds": len(played),
                "cells": {cell: {name: account_summary([w[cell] for w in played], name)
                                 for name in played[0][cell]["dose_response"]} for cell in cells}})
    checks = thresholds(scenarios)
    return {"noises": list(outcomes), "scenarios": scenarios, "thresholds": checks,
            "passed": all(c["passed"] for c in checks)}
