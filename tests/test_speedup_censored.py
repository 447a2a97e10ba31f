"""Censored seeds in the inference (speedup/censored.py) and a reference budget between the budgets
(speedup.reference_budget), on planted samples and planted power laws with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from test_speedup_estimator import make_results

from ngptlab.speedup.censored import METHOD, CensoredMean, censored_mean, weighted_sum
from ngptlab.speedup.equivalence import claim_p_values, claim_p_values_at
from ngptlab.speedup.estimate import Estimate
from ngptlab.speedup.estimator import estimate_cell, loss_at, reference_tokens, tokens_to_target
from ngptlab.speedup.inference import contrast, summarize_seeds
from ngptlab.stats import mean_sd_interval


def test_without_censoring_it_is_the_t_interval_and_the_t_test():
    y = [0.31, 0.12, 0.45, 0.26, 0.38]
    fit, t = censored_mean([Estimate(v) for v in y]), mean_sd_interval(y)
    assert (fit.n, fit.n_censored, fit.df) == (5, 0, 4)
    assert fit.mean == pytest.approx(t["mean"], abs=1e-8) and fit.sd == pytest.approx(t["sd"], rel=1e-9)
    assert fit.interval == pytest.approx(t["interval"], abs=1e-10) and fit.bounded and fit.note is None
    for mu0 in (-0.2, 0.0, 0.1, 0.3):
        assert fit.t_at(mu0) == pytest.approx((t["mean"] - mu0) / t["se"], rel=1e-7)
    assert claim_p_values_at(fit.t_at, fit.df, 1.25) == pytest.approx(
        claim_p_values(t["mean"], t["se"], t["df"], 1.25), rel=1e-7)
    # a summary without a censored seed stays the t on ln S, with nothing censored
    s = summarize_seeds([Estimate(math.exp(v)) for v in y], 0, 0)
    assert (s["method"], s["n_censored"]) == ("t on ln S", 0)


def test_profile_interval_covers_at_its_level_with_thirty_percent_censored():
    # 400 samples of 6 seeds, y ~ N(0, 1) seen only up to c = the 70% quantile: above it a bound ">= c"
    # (an arm that beat the target at its smallest budget). Measured: 0.9475 here; 0.951 over 2000 samples,
    # 0.9545 with 15% censored on each side, 0.936 at 3 seeds (counting the 2.8% without an estimate as
    # misses), 0.957 at 10.
    rng = np.random.default_rng(0)
    edge = float(stats.norm.ppf(0.7))
    covered = censored = 0
    for _ in range(400):
        y = rng.normal(0.0, 1.0, 6)
        fit = censored_mean([Estimate(edge, ">") if v > edge else Estimate(float(v)) for v in y])
        censored += fit.n_censored
        covered += fit.interval is not None and fit.interval[0] < 0.0 < fit.interval[1]
    assert 0.27 < censored / 2400 < 0.33
    assert 0.92 <= covered / 400 <= 0.98


def test_bounds_in_one_direction_alone_give_no_verdict():
    fit = censored_mean([Estimate(0.7, ">")] * 3)
    assert fit.mean is None and fit.interval is None and "every seed is a bound" in fit.note
    s = summarize_seeds([Estimate(2.0, ">")] * 3, 0, 0)
    assert (s["display"], s["interval"], s["verdict"]) == (">2", None, "not resolved (a bound)")
    c = contrast("ngpt", "gpt-orth", {s: Estimate(2.0, ">") for s in range(3)},
                 {s: Estimate(1.0) for s in range(3)})
    assert (c["interval"], c["verdict"], c["n_censored"]) == (None, "not resolved (no interval)", 3)
    # an interval the data leave open on one side is no verdict either, whatever its other end
    open_side = CensoredMean(3, 2, 1.0, 0.5, [0.2, math.inf], 0.95, "one side only", None)
    assert not open_side.bounded and open_side.verdict(lambda i: "faster") == "not resolved"


def test_a_bound_on_either_side_bounds_the_difference():
    ln = math.log
    assert weighted_sum([(1.0, Estimate(ln(2), ">")), (-1.0, Estimate(0.0))]) == Estimate(ln(2), ">")
    assert weighted_sum([(1.0, Estimate(0.0)), (-1.0, Estimate(ln(2), ">"))]) == Estimate(-ln(2), "<")
    assert weighted_sum([(1.0, Estimate(ln(2), ">")), (-1.0, Estimate(0.0, "<"))]) == Estimate(ln(2), ">")
    assert weighted_sum([(1.0, Estimate(ln(2), ">")), (-1.0, Estimate(0.0, ">"))]) is None  # no information


def test_reference_budget_tokens():
    assert reference_tokens("largest", [2048, 8192]) == 8192
    assert reference_tokens("middle", [2048, 8192]) == 4096
    assert reference_tokens("middle", [125_000_000, 250_000_000, 500_000_000]) == 250_000_000
    assert reference_tokens(3000, [2048, 8192]) == 3000
    # loss_at is tokens_to_target's inverse along the same law
    pts = [(2048.0, 4.0), (8192.0, 3.5)]
    for floor in (None, 3.0):
        loss = loss_at(pts, 4096.0, floor)
        assert 3.5 < loss < 4.0 and tokens_to_target(pts, loss, floor).value == pytest.approx(4096.0)
    assert loss_at(pts, 4096.0) == pytest.approx(3.75)  # the chord: the mean, half-way in ln T
    assert loss_at(pts, 8192.0) == 3.5 and loss_at(pts, 1000.0) is None


@pytest.mark.parametrize(("k", "bias"), [(0.7, 0.0136), (1.4, 0.0227)])
def test_a_middle_reference_measures_both_sides_of_one(k, bias):
    # L = 2 + 50 (S T)^-0.3 at budgets 2048 and 8192, reference 4096 between them: the chord in log tokens
    # (two budgets, no law to fit) sets the target and the arm's tokens alike. Measured bias of ln S: +0.0136
    # at S = 0.7, +0.0227 at 1.4 (the convex loss lies below both chords); the baseline's S is 1.
    out = estimate_cell(make_results({"gpt": 1.0, "ngpt": k}, budgets=[2048, 8192]), "gpt", 0, 0)
    target = out["targets"][0]
    assert (target["reference"], target["reference_budget"], target["interpolated"]) == ("middle", 4096, True)
    assert [r["budget"] for r in target["runs"]] == [2048, 8192] and target["measurable"] == [0.5, 2.0]
    s = out["arms"]["ngpt"]["speedup"]
    assert s["bound"] is None and math.log(s["value"] / k) == pytest.approx(bias, abs=5e-4)
    assert out["arms"]["gpt"]["speedup"]["value"] == pytest.approx(1.0, abs=1e-12)
    # with a third budget the power law is fitted, and the same reference gives the planted S
    three = estimate_cell(make_results({"gpt": 1.0, "ngpt": k}, budgets=[2048, 4096, 8192]), "gpt", 0, 0)
    assert three["arms"]["ngpt"]["speedup"]["value"] == pytest.approx(k, rel=1e-9)


def test_an_arm_equal_to_the_baseline_gets_an_interval_around_one_and_no_direction():
    # S = 1 with seed noise sd 0.4 on ln S over 6 seeds, budgets 2048 and 8192 (measurable 0.5 to 2): seeds
    # beyond either end are bounds and enter the censored likelihood
    seeds = tuple(range(6))
    noise = dict(zip(seeds, np.random.default_rng(3).normal(0.0, 0.4, 6), strict=True))
    results = make_results({"gpt": 1.0}, seeds=seeds, budgets=[2048, 8192])
    results += make_results({"ngpt": 1.0}, seeds=seeds, budgets=[2048, 8192],
                            seed_scale=lambda s: math.exp(noise[s]))
    s = estimate_cell(results, "gpt", 0, 0)["arms"]["ngpt"]["speedup"]
    assert s["n_censored"] >= 1 and s["method"] == METHOD and s["bound"] is None
    assert s["interval"][0] < 1.0 < s["interval"][1]
    assert s["verdict"] not in ("faster", "slower")
