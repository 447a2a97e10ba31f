"""The effective learning rate beside the factorial (speedup/rivals.py): planted worlds through analyse_cell
where the arms rotate their weights at planted rates, and the rank correlation the report draws."""

from __future__ import annotations

import copy
import math
import random
import statistics

import pytest
from scipy import stats as scipy_stats
from support import fixture_params
from support.synthetic import settings_of

from ngptlab.config.load import validate_params
from ngptlab.grid.runs import RunSpec
from ngptlab.results import RunResult
from ngptlab.speedup.cell import analyse_cell
from ngptlab.speedup.common_kappa import HEADS, kappa
from ngptlab.speedup.reading import CONSISTENT, EFFECTIVE_LR, NORM, primary_reading
from ngptlab.speedup.rivals import LEADS, METHOD, NO_RATE, angular_rate, clause, log_difference
from ngptlab.stats import rank_correlation

BUDGETS = [8192, 16384, 32768]
LRS = [1e-3, 3e-3, 1e-2]
BEST_LR = 3e-3
# the account: gpt-orth as fast as ngpt, gpt-rownorm within the margin of gpt
PLANTED = {"gpt": 1.0, "gpt-rownorm": 1.1, "gpt-orth": 2.6, "ngpt": 2.6}
SEEDS = [0, 1, 2]
CELL = "cpu-4l-ctx1024"
KINDS = ("q", "k", "v", "o", "mlp_u", "mlp_v", "mlp_o")
RATE = 0.01  # rad / step of gpt

BOTH = f"{CONSISTENT}; {NORM.inconsistent}"  # the conditioning account holds, so its mirror cannot


def loss(tokens: float, k: float, lr: float) -> float:
    return 2.0 + 50.0 * (k * tokens) ** -0.3 + 0.05 * math.log(lr / BEST_LR) ** 2


def planted_rate(arm: str, seed: int, faster: dict[str, float]) -> float:
    """The run's angular rate: the arm's factor times a little seed noise, so every interval has width."""
    return RATE * faster.get(arm, 1.0) * math.exp(random.Random(f"rate/{arm}/{seed}").gauss(0.0, 0.05))


def observed(arm: str, seed: int, budget: int, faster: dict[str, float]) -> dict:
    """Three evaluation points; the kinds' rates average to the planted rate, embed_in (not counted) off by
    far; kappa at the middle and last points, only the last counting."""
    rate = planted_rate(arm, seed, faster)
    points = [budget * i / 3 for i in range(1, 4)]
    kinds = {kind: rate * (1 + 0.1 * (i - 3)) for i, kind in enumerate(KINDS)}  # mean over KINDS: rate
    angular = [(t, {**kinds, "embed_in": 100.0}) for t in points]
    last = {"embed_in_cov_condition": 10.0 if arm != "ngpt" else 2.5, "layer3_q_head_condition_median": 2.0,
            "layer3_k_head_condition_median": 3.0, "layer4_q_head_condition_median": 5.0,
            "layer4_k_head_condition_median": math.inf}
    earlier = {"embed_in_cov_condition": 99.0}
    return {"angular_rate": angular, "kappa": [(points[1], earlier), (points[2], last)]}


def planted_results(faster: dict[str, float] | None) -> list[RunResult]:
    """The grid's runs; faster None: runs trained before the observations existed."""
    out = []
    for arm, efficiency in PLANTED.items():
        for seed in SEEDS:
            k = efficiency * math.exp(random.Random(f"{arm}/{seed}").gauss(0.0, 0.02))
            for budget in BUDGETS:
                for lr in LRS:
                    curve = [(budget * i / 3, loss(budget * i / 3, k, lr) + 0.1) for i in (1, 2)]
                    final = loss(budget, k, lr)
                    out.append(RunResult(RunSpec("cpu-4l", 1024, arm, budget, lr, seed), "completed", final,
                                         [*curve, (budget, final)],
                                         {} if faster is None else observed(arm, seed, budget, faster)))
    return out


def grid() -> dict:
    params = fixture_params()
    params["train"].update(scales=["cpu-4l"], contexts=[1024], budgets=BUDGETS, seeds=SEEDS,
                           arms=list(PLANTED), micro_batch_tokens=4096,
                           learning_rates={"cpu-4l": {arm: LRS for arm in PLANTED}})
    params["speedup"].update(baseline="gpt", bootstrap=20, seed=0, primary_contrast="conditioning",
                             reference_budget="largest", equivalence_margin=1.25)
    validate_params(params)
    return params


CONDITIONED_FAST = {"gpt-orth": 1.5, "ngpt": 1.5}


@pytest.fixture(scope="module")
def confounded() -> dict:
    return analyse_cell(settings_of(grid()), CELL, planted_results(CONDITIONED_FAST))


@pytest.fixture(scope="module")
def equal() -> dict:
    return analyse_cell(settings_of(grid()), CELL, planted_results({}))


def test_a_runs_angular_rate_is_the_mean_over_points_of_the_mean_over_attention_and_mlp_kinds():
    spec = RunSpec("cpu-4l", 1024, "gpt", 8192, 3e-3, 0)
    run = RunResult(spec, "completed", 3.0, [], {"angular_rate": [
        (1.0, {"q": 0.01, "mlp_o": 0.03, "embed_in": 5.0}), (2.0, {"k": 0.04, "embed_out": 5.0})]})
    assert angular_rate(run) == pytest.approx((0.02 + 0.04) / 2)
    assert angular_rate(RunResult(spec, "completed", 3.0)) is None


def test_a_runs_kappa_is_its_last_with_the_median_of_the_layer_3_4_head_medians():
    spec = RunSpec("cpu-4l", 1024, "ngpt", 8192, 3e-3, 0)
    run = RunResult(spec, "completed", 3.0, [], observed("ngpt", 0, 8192, {}))
    assert kappa(run) == {"embed_in_cov_condition": 2.5, HEADS: 4.0}  # median of 2, 3, 5, inf


def test_arms_rotating_faster_where_conditioning_is_fixed_confound_the_conditioning_effect(confounded):
    rivals, reading = confounded["rivals"], confounded["reading"]
    primary = rivals["primary"]
    assert primary["effect"] == "conditioning" and primary["n_seeds"] == 3
    assert primary["log_difference"]["mean"] == pytest.approx(math.log(1.5), abs=0.06)
    assert primary["verdict"] == "confounded" and primary["note"] is None
    assert primary["confounded"] is True and reading["confounded_by_effective_lr"] is True
    assert primary["log_difference"]["interval"][0] > math.log(1.25)  # wholly above the margin
    assert primary["interval"] == pytest.approx([math.exp(x) for x in primary["log_difference"]["interval"]])
    (lo, hi), ratio = primary["interval"], primary["ratio"]
    words = (f"confounded by the effective learning rate: the arms it credits turn their weights "
             f"x{ratio:.3g} [{lo:.3g}, {hi:.3g}] as fast as those it debits (95% paired t on ln angular "
             "rate over seeds, 3 seeds)")
    assert clause(primary) == words
    # every arm's angle measured: the effective-learning-rate account is read from its line, not the clause
    assert_read_from_the_angle_line(confounded)
    by_pair = {(c["a"], c["b"]): c for c in rivals["contrasts"]}
    assert by_pair[("gpt-orth", "gpt-rownorm")]["confounded"] is True
    assert by_pair[("gpt-orth", "ngpt")]["confounded"] is False
    assert by_pair[("gpt-rownorm", "ngpt")]["ratio"] == pytest.approx(1 / 1.5, rel=0.15)
    assert "x1.25" in rivals["rule"]


def test_equal_rates_are_not_confounded_on_an_interval_inside_the_margin(equal):
    primary = equal["rivals"]["primary"]
    lo, hi = primary["log_difference"]["interval"]
    assert -math.log(1.25) < lo and hi < math.log(1.25)
    assert primary["verdict"] == "not confounded" and primary["confounded"] is False
    reading = equal["reading"]
    assert reading["confounded_by_effective_lr"] is False
    assert clause(primary).startswith(
        f"not confounded by the effective learning rate: the arms it credits turn their weights "
        f"x{primary['ratio']:.3g} [")
    assert_read_from_the_angle_line(equal)
    assert all(c["confounded"] is False for c in equal["rivals"]["contrasts"])


def assert_read_from_the_angle_line(doc: dict) -> None:
    """The angle line fitted over the four arms' measured angles, gpt-orth's included, reads the
    effective-learning-rate account (source measured) in the words, and no confound clause is said; every
    arm's head kappa is the same here, so the conditioning account has no line and is read by its labels."""
    reading, fit = doc["reading"], doc["dose_response"]["accounts"][EFFECTIVE_LR.name]
    assert sorted(fit["arms"]) == sorted(PLANTED) and fit["slope"]["estimate"] is not None
    entry = reading["accounts"][EFFECTIVE_LR.name]
    assert entry["source"] == "measured" and entry["words"] == fit["words"]
    assert reading["accounts"]["conditioning"]["source"] == "labels"
    assert reading["effective_lr_clause"] is None
    assert reading["reading"] == f"{BOTH}; {EFFECTIVE_LR.sentence(entry['reading'])}"


def test_the_confound_clause_stays_where_the_angle_line_lacks_an_arm_of_the_square(confounded):
    """Where the angle line is not fitted over every conditioning-square arm's measured angle (here gpt-orth
    taken out of the fit), the clause says whether the effective learning rate confounds the primary
    effect."""
    dose = copy.deepcopy(confounded["dose_response"])
    del dose["accounts"][EFFECTIVE_LR.name]["arms"]["gpt-orth"]
    reading = primary_reading(confounded["factorial"], "conditioning", 1.25,
                              confound=confounded["rivals"]["primary"], arms=confounded["arms"],
                              contrasts=confounded["contrasts"], dose=dose)
    words = clause(confounded["rivals"]["primary"])
    assert words.startswith("confounded by the effective learning rate")
    assert reading["effective_lr_clause"] == words and reading["reading"].endswith(f"; {words}")


@pytest.mark.parametrize("values, verdict", [
    ([math.log(3.0)], "not resolved (one seed)"),  # far beyond the margin, but one seed has no interval
    ([0.9, 0.1, 0.5], "not resolved"),  # mean 0.5 beyond ln 1.25, the interval across both edges
    ([0.5, 0.52, 0.54], "confounded"),  # wholly above ln 1.25
    ([-0.5, -0.52, -0.54], "confounded"),  # wholly below -ln 1.25: the credited arms turn slower
    ([0.05, -0.02, 0.01], "not confounded"),  # wholly inside
])
def test_the_confound_rests_on_its_interval_against_the_margin(values, verdict):
    got = log_difference(values, 1.25, 0.95)
    assert got["verdict"] == verdict
    assert got["confounded"] is {"confounded": True, "not confounded": False}.get(verdict)
    assert got["log_difference"]["level"] == 0.95 and got["log_difference"]["method"] == METHOD
    words = clause(got)
    assert words.startswith(LEADS[verdict]) and "95% paired t on ln angular rate over seeds" in words
    assert words.endswith("1 seed: no interval)" if len(values) == 1 else "3 seeds)")


def test_the_effects_log_rate_difference_is_the_textbook_weighted_sum_with_its_paired_t_interval(confounded):
    r = {arm: [math.log(planted_rate(arm, s, CONDITIONED_FAST)) for s in SEEDS] for arm in PLANTED}
    d = [((r["gpt-orth"][i] - r["gpt"][i]) + (r["ngpt"][i] - r["gpt-rownorm"][i])) / 2 for i in range(3)]
    mean, se = statistics.fmean(d), statistics.stdev(d) / math.sqrt(3)
    half = scipy_stats.t.ppf(0.975, 2) * se
    got = confounded["rivals"]["primary"]["log_difference"]
    assert got["mean"] == pytest.approx(mean, rel=1e-9)
    assert got["interval"] == pytest.approx([mean - half, mean + half], rel=1e-9)
    assert got["level"] == 0.95 and got["method"] == "paired t on ln angular rate over seeds"
    contrast = next(c for c in confounded["rivals"]["contrasts"] if (c["a"], c["b"]) == ("gpt-orth", "ngpt"))
    assert contrast["log_difference"]["mean"] == pytest.approx(
        statistics.fmean(a - b for a, b in zip(r["gpt-orth"], r["ngpt"], strict=True)), rel=1e-9)


def test_each_arm_gets_the_geometric_mean_over_seeds_of_its_chosen_runs(confounded):
    arm = confounded["rivals"]["arms"]["gpt-orth"]
    rates = [planted_rate("gpt-orth", s, CONDITIONED_FAST) for s in SEEDS]
    assert arm["angular_rate"] == pytest.approx(math.exp(statistics.fmean(map(math.log, rates))), rel=1e-9)
    assert arm["n_seeds"] == 3
    assert arm["kappa"] == {"embed_in_cov_condition": pytest.approx(10.0), HEADS: pytest.approx(4.0)}


def test_runs_without_observations_give_null_with_a_note():
    doc = analyse_cell(settings_of(grid()), CELL, planted_results(None))
    rivals = doc["rivals"]
    assert rivals["note"] == NO_RATE
    assert all(a["angular_rate"] is None and a["n_seeds"] == 0 for a in rivals["arms"].values())
    assert rivals["primary"]["confounded"] is None and NO_RATE in rivals["primary"]["note"]
    assert rivals["primary"]["verdict"] is None and clause(rivals["primary"]) is None
    assert rivals["primary"]["log_difference"]["interval"] is None
    assert all(c["confounded"] is None for c in rivals["contrasts"])
    assert doc["reading"]["confounded_by_effective_lr"] is None
    assert doc["reading"]["effective_lr_clause"] is None and doc["reading"]["reading"] == BOTH


def test_the_rank_correlation_and_its_fisher_z_interval_match_an_independent_computation():
    x = [1.0, 2.0, 3.5, 0.5, 4.0, 2.5, 6.0]
    y = [0.3, 0.1, 0.7, 0.2, 0.4, 0.9, 0.8]
    got = rank_correlation(x, y)
    # Spearman's rho by hand: Pearson's r of the ranks (no ties)
    rx, ry = scipy_stats.rankdata(x), scipy_stats.rankdata(y)
    rho = 1 - 6 * sum((a - b) ** 2 for a, b in zip(rx, ry, strict=True)) / (7 * (7 ** 2 - 1))
    z, half = 0.5 * math.log((1 + rho) / (1 - rho)), 1.959963984540054 * math.sqrt(1.06 / 4)
    assert got["rho"] == pytest.approx(rho, rel=1e-12)
    assert got["interval"] == pytest.approx([math.tanh(z - half), math.tanh(z + half)], rel=1e-9)
    assert got["n"] == 7 and got["level"] == 0.95 and "Fisher" in got["method"]


def test_the_rank_correlation_is_null_below_four_points_and_says_why():
    got = rank_correlation([1.0, 2.0, 3.0], [3.0, 1.0, 2.0])
    assert got["rho"] is None and got["interval"] is None and "at least 4" in got["note"]
    perfect = rank_correlation([1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0, 8.0])
    assert perfect["rho"] == pytest.approx(1.0) and perfect["interval"] is None and perfect["note"]
