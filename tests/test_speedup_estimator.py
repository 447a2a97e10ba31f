"""The speed-up estimator recovers planted speed-ups from synthetic loss curves.

Its arithmetic is read under the per-budget learning-rate rule (speedup.lr_policy budget): every budget at
its own best learning rate, every budget read (tests/test_lr_policy.py has the rules themselves).
"""

from __future__ import annotations

import functools
import math
import random

import numpy as np
import pytest

from ngptlab.grid.runs import RunSpec
from ngptlab.results import RunResult
from ngptlab.speedup import estimator
from ngptlab.speedup.estimator import (
    Estimate,
    measurable_range,
    runs_at_chosen_lr,
    seed_speedup,
    speedup_from_tokens,
    tokens_to_target,
)
from ngptlab.speedup.inference import summarize_seeds
from ngptlab.speedup.loss_law import LossLaw, fit_loss_law
from ngptlab.speedup.lr_policy import runs_policy
from ngptlab.stats import t_quantile

BUDGETS = [2**k for k in range(10, 17)]  # 1024 ... 65536 tokens
LRS = [1e-3, 3e-3, 1e-2]
BEST_LR = 3e-3
LARGEST = {"reference": "largest"}  # the paper's (Fig. 2): the baseline's loss at its largest budget
estimate_cell = functools.partial(estimator.estimate_cell, rule="budget")


def power_law(tokens: float, k: float, lr: float = BEST_LR) -> float:
    """An arm that is k times as token-efficient as the baseline (k = 1); worse away from its best lr."""
    return 2.0 + 50.0 * (k * tokens) ** -0.3 + 0.05 * math.log(lr / BEST_LR) ** 2


def log_linear(tokens: float, k: float, lr: float = BEST_LR) -> float:
    """Loss exactly linear in log tokens: interpolation in log tokens is then exact."""
    return 10.0 - 0.5 * math.log(k * tokens) + 0.05 * math.log(lr / BEST_LR) ** 2


def make_results(planted: dict[str, float], curve=power_law, seeds=(0,), budgets=BUDGETS,
                 seed_scale=None, diverged=()) -> list[RunResult]:
    """One run per (arm, budget, lr, seed); within-run curves evaluate the same law at 8 points."""
    results = []
    for arm, k in planted.items():
        for seed in seeds:
            k_s = k * (seed_scale(seed) if seed_scale else 1.0)
            for budget in budgets:
                for lr in LRS:
                    spec = RunSpec("cpu-4l", 64, arm, budget, lr, seed)
                    if (arm, budget, lr) in diverged:
                        results.append(RunResult(spec, "diverged", 0.5, []))  # low loss must not count
                        continue
                    points = [(budget * i / 8, curve(budget * i / 8, k_s, lr) + 0.1) for i in range(1, 9)]
                    points[-1] = (budget, curve(budget, k_s, lr))  # the annealed end of the schedule
                    results.append(RunResult(spec, "completed", curve(budget, k_s, lr), points))
    return results


def test_tokens_to_target_interpolates_and_bounds():
    pts = [(1000, 5.0), (2000, 4.0), (4000, 3.0)]
    assert tokens_to_target(pts, 3.5) == Estimate(pytest.approx(math.sqrt(2000 * 4000)))
    assert tokens_to_target(pts, 4.0) == Estimate(2000.0)
    assert tokens_to_target(pts, 6.0) == Estimate(1000.0, "<")  # already better at the smallest budget
    assert tokens_to_target(pts, 5.0) == Estimate(1000.0)  # lands exactly on the smallest budget
    assert tokens_to_target(pts, 2.0) == Estimate(4000.0, ">")  # never reaches it
    assert tokens_to_target(list(reversed(pts)), 3.5) == tokens_to_target(pts, 3.5)
    # non-monotone: the first crossing counts; non-finite losses are skipped
    assert tokens_to_target([(1000, 5.0), (2000, 3.0), (4000, 3.6), (8000, float("nan"))], 3.5).value < 2000
    assert tokens_to_target([], 3.0) == Estimate(None)
    assert speedup_from_tokens(8000, Estimate(1000.0, "<")) == Estimate(8.0, ">")
    assert speedup_from_tokens(8000, Estimate(8000.0, ">")) == Estimate(1.0, "<")
    assert Estimate(8.0, ">").display() == ">8" and Estimate(None).display() == "n/a"
    assert Estimate(8192.0, ">").display() == ">8192" and Estimate(2.5e9).display() == "2.5e+09"


def test_recovers_planted_speedups_exactly_when_loss_is_a_power_law():
    planted = {"gpt": 1.0, "ngpt": 3.0, "gpt-orth": 1.7, "gpt-scalar": 60.0}
    out = estimate_cell(make_results({**planted, "gpt-lrm": 0.6}), "gpt", 100, 0, **LARGEST)
    for arm, k in planted.items():
        assert out["arms"][arm]["speedup"]["value"] == pytest.approx(k, rel=1e-9), arm
        assert out["arms"][arm]["speedup"]["bound"] is None
    # a slower arm cannot reach the baseline's final loss within the same budgets: only a bound exists
    assert out["arms"]["gpt-lrm"]["speedup"]["display"] == "<1"
    assert out["arms_order"][0] == "gpt"
    assert out["targets"] == [{"seed": 0, "arm": "gpt", "reference": "largest", "reference_budget": 65536,
                               "interpolated": False, "loss": power_law(65536, 1.0),
                               "runs": [{"budget": 65536, "lr": BEST_LR, "loss": power_law(65536, 1.0),
                                         "run": "cpu-4l-ctx64-gpt-t65536-lr0.003-s0"}],
                               "at_largest_budget": True, "measurable": [1.0, 64.0], "note": None}]


@pytest.mark.parametrize("k", [1.0, 1.5, 3.0, 4.0, 10.0, 20.0])
def test_recovers_planted_speedups_from_power_laws(k):
    out = estimate_cell(make_results({"gpt": 1.0, "ngpt": k}), "gpt", 0, 0, **LARGEST)
    s = out["arms"]["ngpt"]["speedup"]
    assert s["bound"] is None
    # the fitted power law is the planted one: exact (a chord in log tokens was within 2%, biased low)
    assert s["value"] == pytest.approx(k, rel=1e-9)
    assert out["arms"]["ngpt"]["per_seed"][0]["interpolation"].startswith("power law E + A T^-alpha (E = 2,")
    assert out["arms"]["gpt"]["speedup"]["value"] == pytest.approx(1.0)
    # the best lr was picked at every budget
    assert all(b["lr"] == BEST_LR for b in out["arms"]["ngpt"]["per_seed"][0]["best"])


def test_both_bound_cases():
    out = estimate_cell(make_results({"gpt": 1.0, "ngpt": 200.0, "gpt-nowd": 0.2}), "gpt", 100, 0, **LARGEST)
    fast, slow = out["arms"]["ngpt"]["speedup"], out["arms"]["gpt-nowd"]["speedup"]
    # beats the target at the smallest budget: speed-up > largest / smallest budget, not extrapolated
    assert (fast["bound"], fast["value"], fast["display"]) == (">", 64.0, ">64")
    assert fast["interval"] is None
    # never reaches the target within the largest budget: speed-up < 1
    assert (slow["bound"], slow["value"], slow["display"]) == ("<", 1.0, "<1")


def test_invariant_to_run_order():
    results = make_results({"gpt": 1.0, "ngpt": 4.0, "gpt-orth": 2.0}, seeds=(0, 1, 2),
                           seed_scale=lambda s: 1 + 0.1 * s)
    reference = estimate_cell(results, "gpt", 200, 7)
    for shuffle_seed in range(3):
        shuffled = results[:]
        random.Random(shuffle_seed).shuffle(shuffled)
        assert estimate_cell(shuffled, "gpt", 200, 7) == reference


def test_diverged_runs_are_ignored_even_with_a_low_loss():
    # The best lr diverges at two budgets: the estimate then uses the next-best lr there, never the 0.5.
    diverged = {("ngpt", 16384, BEST_LR), ("ngpt", 32768, BEST_LR)}
    results = make_results({"gpt": 1.0, "ngpt": 3.0}, diverged=diverged)
    out = estimate_cell(results, "gpt", 0, 0)
    used = {b["budget"]: b["lr"] for b in out["arms"]["ngpt"]["per_seed"][0]["best"]}
    assert used[16384] != BEST_LR and used[65536] == BEST_LR
    assert all(b["loss"] > 0.5 for b in out["arms"]["ngpt"]["per_seed"][0]["best"])
    assert {i["run"] for i in out["ignored"]} == {RunSpec("cpu-4l", 64, "ngpt", b, BEST_LR, 0).name
                                                  for _, b, _ in diverged}
    # the baseline's largest budget all diverged: the target moves to its largest completed budget
    all_lrs = {("gpt", 65536, lr) for lr in LRS}
    results = make_results({"gpt": 1.0, "ngpt": 3.0}, diverged=all_lrs)
    out = estimate_cell(results, "gpt", 0, 0, **LARGEST)
    target = out["targets"][0]
    assert target["reference_budget"] == 32768 and target["interpolated"] is False
    assert out["arms"]["ngpt"]["speedup"]["value"] == pytest.approx(3.0)
    # ... and says so, with the range of speed-ups it can now measure (32768 / 65536 .. 32768 / 1024)
    assert target["at_largest_budget"] is False
    assert target["measurable"] == [0.5, 32.0]
    assert (target["arm"], target["runs"][0]["lr"]) == ("gpt", BEST_LR)
    assert target["note"] == ("the gpt runs do not give the loss at the reference budget (65,536 tokens): no "
                              "completed run at 65,536; the target is its best loss at 32,768, its largest "
                              "budget with a completed run")
    # a middle reference (8192 tokens) is a budget that ran: the diverged largest budget does not move it
    target = estimate_cell(results, "gpt", 0, 0)["targets"][0]
    assert (target["reference_budget"], target["note"], target["measurable"]) == (8192, None, [0.125, 8.0])


def test_measurable_range_is_set_by_the_budget_range():
    out = estimate_cell(make_results({"gpt": 1.0, "ngpt": 3.0}), "gpt", 0, 0, **LARGEST)
    assert out["targets"][0]["at_largest_budget"] is True
    assert out["targets"][0]["measurable"] == [1.0, 64.0]  # budgets 1024 .. 65536
    middle = estimate_cell(make_results({"gpt": 1.0, "ngpt": 3.0}), "gpt", 0, 0)["targets"][0]
    assert (middle["at_largest_budget"], middle["measurable"]) == (False, [0.125, 8.0])  # 8192 / 65536 ..
    assert summarize_seeds([Estimate(1.0, "<")], 100, 0)["note"] == "a bound: no interval"  # one seed
    # the one exact value lies inside the bound: the censored likelihood has no maximum (sigma -> 0), so
    # the bound rule stands: the geometric mean sqrt(0.5) is itself a bound
    two = summarize_seeds([Estimate(1.0, "<"), Estimate(0.5)], 100, 0)
    assert (two["display"], two["verdict"]) == ("<0.707", "not resolved (a bound)")
    assert two["note"].endswith("geometric mean of bounds and point estimates is itself a bound; no interval")
    assert measurable_range(32768, [8192, 32768]) == [1.0, 4.0]  # budgets 4x apart: only (1, 4)
    # a speed-up outside the range is a bound, never a number
    out = estimate_cell(make_results({"gpt": 1.0, "ngpt": 5.0}, curve=log_linear, budgets=[16384, 65536]),
                        "gpt", 0, 0, **LARGEST)
    assert out["arms"]["ngpt"]["speedup"]["display"] == ">4"


def test_seeds_geometric_mean_and_t_interval_on_log_speedup():
    # planted speed-up 4 * (1 + 0.1 s) per seed s, baseline identical across seeds
    seeds = (0, 1, 2, 3)
    results = make_results({"gpt": 1.0}, seeds=seeds)
    results += make_results({"ngpt": 4.0}, seeds=seeds, seed_scale=lambda s: 1 + 0.1 * s)
    out = estimate_cell(results, "gpt", 2000, 0)
    s = out["arms"]["ngpt"]["speedup"]
    logs = np.log([4.0 * (1 + 0.1 * i) for i in seeds])
    assert s["value"] == pytest.approx(math.exp(logs.mean()), rel=1e-9)  # geometric, not arithmetic, mean
    assert s["n_seeds"] == 4 and s["bound"] is None and s["method"] == "t on ln S"
    # the textbook interval on ln S, mean +- t_{0.975, 3} s / sqrt(4), exponentiated
    half = t_quantile(0.95, 3) * logs.std(ddof=1) / 2
    assert s["interval"] == pytest.approx([math.exp(logs.mean() - half), math.exp(logs.mean() + half)],
                                          rel=1e-9)
    assert s["log"] == pytest.approx({"mean": logs.mean(), "sd": logs.std(ddof=1),
                                      "se": logs.std(ddof=1) / 2, "df": 3}, rel=1e-9)
    # 4 seeds: too few distinct resamples for a bootstrap, whatever the resamples asked for
    assert s["bootstrap_interval"] is None
    # the interval does not depend on the bootstrap's settings
    assert estimate_cell(results, "gpt", 0, 3)["arms"]["ngpt"]["speedup"]["interval"] == s["interval"]
    assert s["verdict"] == "faster by more than x1.25" and out["arms"]["gpt"]["speedup"]["verdict"] is None


def test_summaries_with_bounds():
    # one exact value below a lower bound: the censored likelihood places the mean above 3, with an
    # interval too wide at two seeds to say anything
    two = summarize_seeds([Estimate(3.0), Estimate(5.0, ">")], 100, 0)
    assert (two["bound"], two["n_censored"], two["verdict"]) == (None, 1, "not resolved")
    assert two["value"] > 3.0 and two["interval"][0] < 1 < two["interval"][1]
    assert summarize_seeds([Estimate(3.0, "<"), Estimate(5.0, ">")], 100, 0)["value"] is None
    one = summarize_seeds([Estimate(3.0)], 100, 0)
    assert one["value"] == 3.0 and one["interval"] is None and one["n_seeds"] == 1 and one["log"] is None
    assert (one["verdict"], one["seeds_needed"]) == ("not resolved (no interval)", None)
    assert one["seeds_needed_note"] == "needs 2 seeds to measure the noise"
    assert summarize_seeds([], 100, 0)["display"] == "n/a"


def test_cheap_within_run_estimate():
    # Within-run curves here are the annealed law + 0.1 until the end: the cheap estimate needs more tokens.
    out = estimate_cell(make_results({"gpt": 1.0, "ngpt": 4.0}), "gpt", 0, 0, **LARGEST)
    cheap = out["arms"]["ngpt"]["cheap"]
    assert "cheaper" in cheap["method"]
    assert cheap["per_seed"][0]["run"] == "cpu-4l-ctx64-ngpt-t65536-lr0.003-s0"
    assert 1.0 < cheap["speedup"]["value"] < out["arms"]["ngpt"]["speedup"]["value"]
    # the baseline's own best run reaches the target exactly at its end: cheap speed-up 1
    assert out["arms"]["gpt"]["cheap"]["speedup"]["value"] == pytest.approx(1.0)
    # every completed run gets its own within-run estimate
    by_run = {r["run"]: r for r in out["runs"]}
    assert all(r["within_run"] is not None for r in by_run.values())
    assert sum(r["best_lr_for_budget"] for r in by_run.values()) == 2 * len(BUDGETS)


def test_chosen_lr_tie_breaks_on_lr():
    spec = lambda lr: RunSpec("cpu-4l", 64, "gpt", 1024, lr, 0)  # noqa: E731
    runs = [RunResult(spec(1e-2), "completed", 3.0), RunResult(spec(1e-3), "completed", 3.0)]
    for order in (runs, list(reversed(runs))):
        chosen = runs_at_chosen_lr(order, runs_policy(order, "budget", ["gpt"], "largest"))
        assert chosen[("gpt", 0)][1024].spec.lr == 1e-3
    diverged = [RunResult(spec(1e-3), "completed", float("nan"))]
    assert runs_at_chosen_lr(diverged, runs_policy(diverged, "budget", ["gpt"], "largest")) == {}


# ----------------------------------------------------------------------------------------------------------
# The law between budgets


@pytest.mark.parametrize(("spacing", "planted"), [(2, 1.5), (2, 2.8), (3, 1.5), (3, 4.0), (4, 1.5)])
def test_fitted_law_removes_the_chords_bias_on_planted_power_laws(spacing, planted):
    # L = 3 + A (S T)^-0.3, five budgets `spacing` apart, no noise; the target at the largest budget.
    budgets = [2**20 * spacing**i for i in range(5)]
    amplitude = 5.0 * budgets[0] ** 0.3
    losses = {b: 3.0 + amplitude * (planted * b) ** -0.3 for b in budgets}
    target = 3.0 + amplitude * budgets[-1] ** -0.3
    tokens, speedup, interpolation = seed_speedup(losses, target, budgets[-1])
    assert interpolation == "power law E + A T^-alpha (E = 3, fitted over 5 budgets)"
    fitted_error = abs(math.log(speedup.value / planted))
    chord_error = abs(math.log(budgets[-1] / tokens_to_target(losses.items(), target).value / planted))
    assert fitted_error < 1e-9
    assert chord_error > 0.01  # 0.018 (x2 apart) to 0.058 (x4 apart): the estimator's docstring


def test_log_linear_loss_costs_the_fit_little_and_the_chord_nothing():
    # Loss exactly linear in ln T is the chord's own world: the fitted law (E held at its bound 0) errs there
    # by under 0.01 in ln S, about half the chord's error on a power law.
    losses = {b: log_linear(b, 3.0) for b in BUDGETS}
    tokens, speedup, _ = seed_speedup(losses, log_linear(BUDGETS[-1], 1.0), BUDGETS[-1])
    assert abs(math.log(speedup.value / 3.0)) < 0.01
    assert tokens_to_target(losses.items(), log_linear(BUDGETS[-1], 1.0)).value == pytest.approx(
        BUDGETS[-1] / 3.0)


def test_chord_where_no_law_can_be_fitted():
    assert fit_loss_law({1000: 5.0, 2000: 4.0}) == LossLaw(None, "chord in log tokens (2 budgets)")
    assert fit_loss_law({1000: 5.0, 2000: 4.0, 4000: 4.2}) == LossLaw(
        None, "chord in log tokens (the loss does not fall at every budget)")
    assert fit_loss_law({1000: 5.0, 2000: 4.0, 4000: 3.0}).floor is not None  # concave: E at 0, still a law
    out = estimate_cell(make_results({"gpt": 1.0, "ngpt": 5.0}, curve=log_linear, budgets=[16384, 65536]),
                        "gpt", 0, 0)
    assert out["arms"]["ngpt"]["per_seed"][0]["interpolation"] == "chord in log tokens (2 budgets)"
