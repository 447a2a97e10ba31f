"""Inference over seeds (t on ln S, contrasts, verdicts, seeds needed) and the interpolated minimum over lr,
on planted speed-ups with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats
from test_speedup_estimator import estimate_cell, make_results

from ngptlab.grid.runs import RunSpec
from ngptlab.results import RunResult
from ngptlab.speedup.estimate import Estimate
from ngptlab.speedup.inference import BOOTSTRAP_MIN_SEEDS, contrast, summarize_seeds, verdict
from ngptlab.speedup.interpolate import interpolate_cell, parabola_vertex, sweep_minimum
from ngptlab.stats import mean_sd_interval, t_interval, t_quantile

SEEDS = tuple(range(8))


def test_t_quantile_matches_the_table():
    assert t_quantile(0.95, 2) == pytest.approx(4.302653, abs=1e-6)
    assert t_quantile(0.95, 9) == pytest.approx(2.262157, abs=1e-6)
    assert t_quantile(0.95, 1) == pytest.approx(12.706205, abs=1e-6)
    assert t_quantile(0.6, 4) == pytest.approx(0.940965, abs=1e-6)  # one-sided 80%: t_{0.8, 4}
    assert t_interval([1.0]) is None
    one = mean_sd_interval([2.0])
    assert (one["mean"], one["sd"], one["interval"]) == (2.0, None, None)


def noisy_cell(planted: dict[str, float], sd: float = 0.05, seeds=SEEDS, rng_seed: int = 0
               ) -> tuple[list, dict]:
    """Baseline gpt without noise; every other arm's k multiplied per seed by exp(N(0, sd)), independently
    per arm. Loss a power law in tokens, so each seed's speed-up is exactly its planted k_s."""
    rng = np.random.default_rng(rng_seed)
    noise = {arm: dict(zip(seeds, rng.normal(0.0, sd, len(seeds)), strict=True)) for arm in planted}
    results = make_results({"gpt": 1.0}, seeds=seeds)
    for arm, k in planted.items():
        results += make_results({arm: k}, seeds=seeds,
                                seed_scale=lambda s, arm=arm: math.exp(noise[arm][s]))
    return results, {arm: {s: k * math.exp(noise[arm][s]) for s in seeds} for arm, k in planted.items()}


def test_t_interval_on_log_speedup_is_the_textbook_one_and_covers_the_planted_value():
    results, per_seed = noisy_cell({"ngpt": 3.0})
    s = estimate_cell(results, "gpt", 1000, 0)["arms"]["ngpt"]["speedup"]
    assert s["n_seeds"] == len(SEEDS) and s["method"] == "t on ln S"
    # the expected value from the per-seed values, by the textbook formula
    logs = np.log([per_seed["ngpt"][seed] for seed in SEEDS])
    n = len(logs)
    half = scipy_stats.t.ppf(0.975, n - 1) * logs.std(ddof=1) / math.sqrt(n)
    assert s["value"] == pytest.approx(math.exp(logs.mean()), rel=1e-9)
    assert s["interval"] == pytest.approx([math.exp(logs.mean() - half), math.exp(logs.mean() + half)],
                                          rel=1e-9)
    assert s["log"]["df"] == n - 1 and s["log"]["se"] == pytest.approx(logs.std(ddof=1) / math.sqrt(n))
    # ... and it covers the planted ln 3
    assert s["interval"][0] < 3.0 < s["interval"][1]
    # a sd of 0.05 resolves x1.5 at once
    assert s["verdict"] == "faster by more than x1.25" and s["seeds_needed"] == 2


def test_contrasts_contain_zero_for_equal_arms_and_exclude_it_for_different_ones():
    # A 95% interval misses the truth in 1 draw of 20: rng seed 0 is such a draw for the equal pair here
    # (test_intervals_cover_at_their_level checks the rate), so this example uses seed 1.
    results, _ = noisy_cell({"gpt-orth": 2.0, "gpt-rownorm": 2.0, "ngpt": 4.0}, rng_seed=1)
    out = estimate_cell(results, "gpt", 0, 0)
    by_label = {c["label"]: c for c in out["contrasts"]}
    assert list(by_label) == ["gpt-orth vs ngpt", "gpt-rownorm vs ngpt", "gpt-orth vs gpt-rownorm"]
    same = by_label["gpt-orth vs gpt-rownorm"]
    assert same["n_seeds"] == len(SEEDS) and same["seeds"] == list(SEEDS)
    lo, hi = same["difference_log"]["interval"]
    assert lo < 0 < hi and same["interval"][0] < 1 < same["interval"][1]
    assert same["verdict"] == "equivalent within x1.25"
    slower = by_label["gpt-orth vs ngpt"]
    # half of nGPT's speed-up: the whole interval below -ln 1.25, so different by the symmetric rule
    assert slower["difference_log"]["interval"][1] < -math.log(1.25)
    assert slower["verdict"] == "falls short by more than x1.25"
    assert slower["ratio"] == pytest.approx(0.5, rel=0.1)
    assert out["arms"]["gpt-orth"]["speedup"]["verdict"] == "faster by more than x1.25"  # 2x over gpt
    assert out["equivalence_margin"] == 1.25 and out["resolve_ratio"] == 1.5
    assert "equivalent within x1.25" in out["verdict_rule"]
    # the paired difference by hand
    a = np.log([p["speedup"]["value"] for p in out["arms"]["gpt-orth"]["per_seed"]])
    b = np.log([p["speedup"]["value"] for p in out["arms"]["ngpt"]["per_seed"]])
    assert slower["difference_log"]["mean"] == pytest.approx((a - b).mean(), rel=1e-9)
    assert slower["difference_log"]["sd"] == pytest.approx((a - b).std(ddof=1), rel=1e-9)


def test_contrast_without_an_interval_says_why():
    one = contrast("gpt-orth", "ngpt", {0: Estimate(2.0)}, {0: Estimate(4.0)})
    assert one["ratio"] == pytest.approx(0.5) and one["interval"] is None and one["seeds_needed"] is None
    assert one["verdict"] == "not resolved (no interval)"
    assert one["note"] == "one seed: the difference, no interval; needs 2 seeds to measure the noise"
    # a bound on a is a bound on the difference in its direction, one on b in the opposite direction: seed 2
    # enters the censored likelihood; bounds on both that pull the difference apart leave the seed out
    bounded = contrast("gpt-orth", "ngpt", {0: Estimate(2.0), 1: Estimate(2.1), 2: Estimate(1.0, "<")},
                       {0: Estimate(4.0), 1: Estimate(4.2), 2: Estimate(4.0, ">")})
    assert (bounded["seeds"], bounded["n_censored"]) == ([0, 1, 2], 1)
    assert bounded["method"].startswith("censored-normal profile likelihood")
    assert bounded["note"].startswith("1 of 3 seeds are bounds (censored), used as such in the likelihood")
    apart = contrast("gpt-orth", "ngpt", {0: Estimate(2.0), 1: Estimate(2.1), 2: Estimate(1.0, "<")},
                     {0: Estimate(4.0), 1: Estimate(4.2), 2: Estimate(4.0, "<")})
    assert (apart["seeds"], apart["n_censored"]) == ([0, 1], 0)
    assert apart["method"] == "paired t on ln S_a - ln S_b over seeds"
    assert apart["note"].startswith("seed 2 left out: bounds for gpt-orth and ngpt in directions that leave")
    # only seeds both arms have
    assert contrast("a", "b", {0: Estimate(2.0), 1: Estimate(2.0)}, {1: Estimate(1.0)})["seeds"] == [1]


def test_verdict_rule():
    ln = math.log
    assert verdict([0.3, 0.5], 1.25) == "faster by more than x1.25"
    assert verdict([-0.5, -0.3], 1.25) == "slower by more than x1.25"
    # faster than 1 but not by the margin: no verdict, as for a contrast (the symmetric rule)
    assert verdict([0.05, 0.4], 1.25) == verdict([-0.4, -0.05], 1.25) == "not resolved"
    assert verdict([-0.1, 0.1], 1.25) == "equivalent within x1.25"
    assert verdict([-0.1, ln(1.25) + 1e-9], 1.25) == "not resolved"
    assert verdict(None, 1.25) == "not resolved (no interval)"


def test_bootstrap_interval_only_from_ten_seeds():
    values = [2.0 * math.exp(0.1 * math.sin(i)) for i in range(BOOTSTRAP_MIN_SEEDS)]
    assert BOOTSTRAP_MIN_SEEDS == 10
    below = summarize_seeds([Estimate(v) for v in values[:9]], 2000, 0)
    assert below["bootstrap_interval"] is None and below["interval"] is not None
    at = summarize_seeds([Estimate(v) for v in values], 2000, 0)
    logs = np.log(values)
    rng = np.random.default_rng(0)
    means = logs[rng.integers(0, 10, size=(2000, 10))].mean(axis=1)
    expected = [math.exp(np.percentile(means, 2.5)), math.exp(np.percentile(means, 97.5))]
    assert at["bootstrap_interval"] == pytest.approx(expected, rel=1e-9)
    assert summarize_seeds([Estimate(v) for v in values], 0, 0)["bootstrap_interval"] is None  # no resamples


def test_intervals_cover_at_their_level():
    # 400 draws of 8 seeds with sd 0.1 on ln S: one arm's interval covers its planted ln k, and a contrast of
    # two arms with the same planted k covers 0, about 95% of the time each
    rng = np.random.default_rng(0)
    covered_arm = covered_contrast = 0
    for _ in range(400):
        a, b = (dict(enumerate(2.0 * np.exp(rng.normal(0.0, 0.1, 8)))) for _ in range(2))
        lo, hi = summarize_seeds([Estimate(v) for v in a.values()], 0, 0)["interval"]
        covered_arm += lo < 2.0 < hi
        lo, hi = contrast("a", "b", {s: Estimate(v) for s, v in a.items()},
                          {s: Estimate(v) for s, v in b.items()})["difference_log"]["interval"]
        covered_contrast += lo < 0 < hi
    assert 0.92 <= covered_arm / 400 <= 0.98 and 0.92 <= covered_contrast / 400 <= 0.98


# ----------------------------------------------------------------------------------------------------------
# The interpolated minimum

GRID = [1e-3, 2e-3, 4e-3, 8e-3]  # x2 apart
CURVATURE = 0.2


def bowl(lr: float, best_lr: float) -> float:
    return CURVATURE * math.log(lr / best_lr) ** 2


def test_parabola_recovers_a_planted_optimum_between_grid_points():
    for lrs, best_lr in ((GRID, 2.8e-3), ([1e-3, 3e-3, 1e-2], 4.1e-3), ([1e-3, 1.5e-3, 6e-3], 2e-3)):
        xs = [math.log(lr) for lr in lrs[:3]]
        x, y = parabola_vertex(xs, [2.5 + bowl(lr, best_lr) for lr in lrs[:3]])
        assert math.exp(x) == pytest.approx(best_lr, rel=1e-9) and y == pytest.approx(2.5, abs=1e-9)
    assert parabola_vertex([0.0, 1.0, 2.0], [1.0, 1.0, 1.0]) is None  # flat


def bowl_law(tokens: float) -> float:
    return 3.0 + 5.0 * (tokens / 4096) ** -0.3


def bowl_runs(arm: str, best_lr: float, k: float, seeds=(0, 1), budgets=(4096, 16384, 65536),
              grid=GRID, diverged=()) -> list[RunResult]:
    """Loss a power law in tokens (bowl_law) with a parabola in ln(lr) around best_lr, the same for every
    seed."""
    out = []
    for seed in seeds:
        for budget in budgets:
            for lr in grid:
                spec = RunSpec("cpu-4l", 64, arm, budget, lr, seed)
                loss = bowl_law(k * budget) + bowl(lr, best_lr)
                out.append(RunResult(spec, "diverged" if (budget, lr) in diverged else "completed", loss,
                                     [(budget, loss)]))
    return out


def interpolated(results: list[RunResult], reference: str | int = "largest") -> tuple[dict, dict]:
    estimate = estimate_cell(results, "gpt", 0, 0, reference=reference)
    return estimate, interpolate_cell(results, estimate, 0, 0)


def test_interpolation_moves_each_best_loss_to_the_vertex_and_the_speedup_with_it():
    # gpt's optimum is on the grid, ngpt's between two points: the grid charges ngpt a loss it need not have
    results = bowl_runs("gpt", 2e-3, 1.0) + bowl_runs("ngpt", 2.8e-3, 3.0)
    estimate, out = interpolated(results)
    ngpt = out["ngpt"]
    for entry in ngpt["per_budget"]:
        assert entry["status"] == "interpolated" and entry["seeds"] == [0, 1] and entry["lr_best"] == 2e-3
        assert entry["lr_vertex"] == pytest.approx(2.8e-3, rel=1e-9)
        assert entry["loss_vertex"] == pytest.approx(bowl_law(3.0 * entry["budget"]), abs=1e-9)
        assert entry["correction"] == pytest.approx(-bowl(2e-3, 2.8e-3), abs=1e-9)
        assert entry["lr_grid"] == GRID and None not in entry["loss_grid"]
    assert all(abs(e["correction"]) < 1e-12 for e in out["gpt"]["per_budget"])
    grid_s, interp_s = estimate["arms"]["ngpt"]["speedup"]["value"], ngpt["speedup"]["value"]
    # power-law loss: interpolation recovers the planted 3 exactly; the grid estimate is below it, by the
    # law's floor raised by the lr penalty c: S = 3 (1 - (c / 5) (65536 / 4096)^0.3)^(1 / 0.3)
    assert interp_s == pytest.approx(3.0, rel=1e-9) and grid_s < interp_s
    penalty = bowl(2e-3, 2.8e-3) / 5.0 * (65536 / 4096) ** 0.3
    assert grid_s == pytest.approx(3.0 * (1 - penalty) ** (1 / 0.3), rel=1e-9)
    assert ngpt["log_difference"] == pytest.approx(math.log(interp_s / grid_s), rel=1e-9)
    assert ngpt["seed_noise_log"] == pytest.approx(0.0, abs=1e-12) and ngpt["differs"] is True
    assert out["gpt"]["speedup"]["value"] == pytest.approx(1.0) and out["gpt"]["speedup"]["verdict"] is None
    # a reference between budgets (32768): the target is re-interpolated from the baseline's corrected losses
    estimate, out = interpolated(results, 32768)
    assert estimate["targets"][0]["interpolated"] is True
    assert out["ngpt"]["speedup"]["value"] == pytest.approx(3.0, rel=1e-6)

    # the other way round: the baseline's optimum between points lowers the target, so the arm's speed-up
    results = bowl_runs("gpt", 2.8e-3, 1.0) + bowl_runs("ngpt", 2e-3, 3.0)
    estimate, out = interpolated(results)
    assert out["ngpt"]["speedup"]["value"] < estimate["arms"]["ngpt"]["speedup"]["value"]
    assert out["ngpt"]["per_seed"][0]["target_loss"] < estimate["targets"][0]["loss"]


def test_no_interpolation_at_an_edge_or_next_to_a_diverged_run_and_unswept_seeds_are_corrected_too():
    edge = bowl_runs("gpt", 1e-3, 1.0, budgets=(4096,))
    assert sweep_minimum(edge, 4096)["status"] == "best at the bottom edge of the sweep"
    broken = bowl_runs("gpt", 2.8e-3, 1.0, budgets=(4096,), diverged={(4096, 4e-3)})
    m = sweep_minimum(broken, 4096)
    assert m["status"].startswith("a neighbour of the best was left out") and m["correction"] == 0.0
    assert m["loss_grid"][2] is None  # a learning rate some swept seed lacks is left out of the mean
    # a seed run only at the best learning rate has no sweep: it is not in the mean, but it is corrected
    swept = bowl_runs("gpt", 1e-3 * 2, 1.0) + bowl_runs("ngpt", 2.8e-3, 3.0)
    extra = bowl_runs("gpt", 2e-3, 1.0, seeds=(5,), grid=[2e-3]) + bowl_runs("ngpt", 2.8e-3, 3.0, seeds=(5,),
                                                                             grid=[2e-3])
    estimate, out = interpolated(swept + extra)
    assert all(e["seeds"] == [0, 1] for e in out["ngpt"]["per_budget"])
    by_seed = {p["seed"]: p["speedup"]["value"] for p in out["ngpt"]["per_seed"]}
    assert by_seed[5] == pytest.approx(3.0, rel=1e-9) == pytest.approx(by_seed[0], rel=1e-9)
    one_lr = sweep_minimum([r for r in extra if r.spec.arm == "gpt" and r.spec.budget == 4096], 4096)
    assert one_lr["status"] == "no seed swept more than one learning rate"
