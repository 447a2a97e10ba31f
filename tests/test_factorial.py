"""The 2x2 read as a factorial, the symmetric margin rule, the primary reading and Holm across cells, on
planted per-seed ln S values through the real functions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ngptlab.speedup.equivalence import claim_p_values, margin_verdict, verdict_from_p_values
from ngptlab.speedup.estimate import Estimate
from ngptlab.speedup.factorial import ANGLE, factorial
from ngptlab.speedup.inference import cell_contrasts, contrast, summarize_seeds
from ngptlab.speedup.multiplicity import holm, holm_claims
from ngptlab.speedup.reading import CONSISTENT, EFFECTIVE_LR, INCONSISTENT, NORM, primary_reading

MARGIN = 1.25


def planted(log_means: dict[str, float], n: int, sd: float, rng_seed: int = 0
            ) -> dict[str, dict[int, Estimate]]:
    """arm -> seed -> Estimate: gpt exactly 1 (the baseline), every other arm exp(mean + N(0, sd))."""
    rng = np.random.default_rng(rng_seed)
    out = {"gpt": {s: Estimate(1.0) for s in range(n)}}
    for arm, mean in log_means.items():
        out[arm] = {s: Estimate(math.exp(mean + x)) for s, x in enumerate(rng.normal(0.0, sd, n))}
    return out


def test_effects_are_the_textbook_2x2_contrasts():
    per_seed = planted({"gpt-rownorm": 0.1, "gpt-orth": 0.6, "ngpt": 0.7}, n=5, sd=0.05)
    f = factorial(per_seed, MARGIN)
    y = {arm: np.log([per_seed[arm][s].value for s in range(5)]) for arm in per_seed}
    by_hand = {
        "conditioning": ((y["gpt-orth"] - y["gpt"]) + (y["ngpt"] - y["gpt-rownorm"])) / 2,
        "norm": ((y["gpt-rownorm"] - y["gpt"]) + (y["ngpt"] - y["gpt-orth"])) / 2,
        "interaction": (y["ngpt"] - y["gpt-rownorm"]) - (y["gpt-orth"] - y["gpt"]),
    }
    for name, values in by_hand.items():
        e = f["effects"][name]
        half = stats.t.ppf(0.975, 4) * values.std(ddof=1) / math.sqrt(5)
        assert e["estimate"]["ln"] == pytest.approx(values.mean(), abs=1e-12)
        assert e["log_interval"] == pytest.approx([values.mean() - half, values.mean() + half], abs=1e-12)
        assert e["interval"] == pytest.approx([math.exp(x) for x in e["log_interval"]])
        assert (e["method"], e["level"], e["n_seeds"]) == ("paired t on ln S over seeds", 0.95, 5)
    assert f["effects"]["conditioning"]["verdict"] == "exceeds by more than x1.25"  # planted e^0.6
    assert f["effects"]["interaction"]["verdict"] == "equivalent within x1.25"  # planted 0


def test_arms_equal_to_gpt_get_intervals_around_zero_and_no_direction():
    f = factorial(planted({"gpt-rownorm": 0.0, "gpt-orth": 0.0, "ngpt": 0.0}, n=4, sd=0.1), MARGIN)
    for e in f["effects"].values():
        lo, hi = e["log_interval"]
        assert lo < 0 < hi
        assert not e["verdict"].startswith(("exceeds", "falls short"))


def test_bounds_enter_as_censored_seeds_and_conflicting_ones_are_left_out():
    per_seed = planted({"gpt-rownorm": 0.1, "gpt-orth": 0.6, "ngpt": 1.1}, n=4, sd=0.05)
    per_seed["ngpt"][3] = Estimate(4.0, ">")  # positive weight in every effect: each bounded from below
    f = factorial(per_seed, MARGIN)
    assert f["seeds"] == [0, 1, 2, 3] and f["left_out"] == [] and f["note"] is None
    for e in f["effects"].values():
        assert (e["n_seeds"], e["n_censored"]) == (4, 1)
        assert e["method"].startswith("censored-normal profile likelihood")
    # gpt-orth bounded from below too: it pulls the conditioning effect the same way as ngpt (both weights
    # +1/2), but the norm and interaction effects the other way (negative weights): those leave seed 3 out
    per_seed["gpt-orth"][3] = Estimate(3.0, ">")
    f = factorial(per_seed, MARGIN)
    assert [(e["seed"], e.get("effect")) for e in f["left_out"]] == [(3, "norm"), (3, "interaction")]
    assert f["left_out"][0]["reason"] == ("bounds in conflicting directions for the norm effect "
                                          "(gpt-orth, ngpt)")
    assert f["effects"]["conditioning"]["n_censored"] == 1 and f["effects"]["norm"]["n_seeds"] == 3
    assert f["effects"]["norm"]["method"] == "paired t on ln S over seeds"
    assert f["note"] == "2 (seed, effect) pair(s) left out for bounds in conflicting directions"
    per_seed["ngpt"][2] = Estimate(None)  # no estimate: out of every effect
    assert factorial(per_seed, MARGIN)["note"].startswith("1 seed(s) left out of every effect for a missing")
    assert factorial({"gpt": {}, "ngpt": {}}, MARGIN) is None  # not the 2x2


@pytest.mark.parametrize("ratio", [1.1, 0.9])
def test_a_probe_near_ngpt_is_not_resolved_at_three_seeds(ratio):
    # the probe at 1.1x or 0.9x of nGPT over 3 seeds whose log ratios have sd exactly 0.1: the interval
    # (half-width t_{0.975, 2} 0.1 / sqrt 3 = 0.25) crosses a margin's edge, so neither matches nor differs
    probe = {s: Estimate(3 * ratio * math.exp(x)) for s, x in enumerate((-0.1, 0.0, 0.1))}
    c = contrast("probe", "ngpt", probe, {s: Estimate(3.0) for s in range(3)}, MARGIN)
    assert c["difference_log"]["sd"] == pytest.approx(0.1)
    assert c["verdict"] == "not resolved"
    # over random draws it is called different (beyond the margin) at most at the one-sided 2.5%
    directional = 0
    for rng_seed in range(200):
        per_seed = planted({"probe": math.log(3 * ratio), "ngpt": math.log(3)}, n=3, sd=0.1,
                           rng_seed=rng_seed)
        verdict = contrast("probe", "ngpt", per_seed["probe"], per_seed["ngpt"], MARGIN)["verdict"]
        directional += verdict.startswith(("exceeds", "falls short"))
    assert directional / 200 <= 0.025


def test_equivalent_only_inside_the_margin():
    inside = planted({"probe": math.log(3 * 1.05), "ngpt": math.log(3)}, n=20, sd=0.05)
    c = contrast("probe", "ngpt", inside["probe"], inside["ngpt"], MARGIN)
    assert c["verdict"] == "equivalent within x1.25"
    outside = planted({"probe": math.log(3 * 1.5), "ngpt": math.log(3)}, n=20, sd=0.05)
    c = contrast("probe", "ngpt", outside["probe"], outside["ngpt"], MARGIN)
    assert c["verdict"] == "exceeds by more than x1.25"
    # wholly below 0 but across -ln 1.25: no longer "slower", not resolved; inside the band: equivalent
    assert margin_verdict([-0.3, -0.01], MARGIN) == "not resolved"
    assert margin_verdict([-0.2, -0.01], MARGIN) == "equivalent within x1.25"
    assert margin_verdict([-0.5, -0.3], MARGIN) == "falls short by more than x1.25"


def test_claim_p_values_agree_with_the_interval():
    for mean, se, df in [(0.5, 0.05, 4), (-0.4, 0.03, 2), (0.0, 0.05, 9), (0.1, 0.2, 2), (0.2, 0.01, 19)]:
        half = stats.t.ppf(0.975, df) * se
        assert verdict_from_p_values(claim_p_values(mean, se, df, MARGIN), MARGIN) == margin_verdict(
            [mean - half, mean + half], MARGIN)


def test_holm_equals_a_hand_computation_on_three_cells():
    p = {"a": 0.01, "b": 0.04, "c": 0.03}
    # sorted a (0.01), c (0.03), b (0.04): 3 x 0.01, max(0.03, 2 x 0.03), max(0.06, 1 x 0.04)
    assert holm([p["a"], p["b"], p["c"]]) == pytest.approx([0.03, 0.06, 0.06])
    cells = {"a": {"exceeds": 0.01, "falls_short": 0.99, "equivalent": 0.5},
             "b": {"exceeds": 0.04, "falls_short": 0.96, "equivalent": 0.2},
             "c": {"exceeds": 0.03, "falls_short": 0.97, "equivalent": 0.001},
             "d": None}
    adjusted = holm_claims(cells)
    assert adjusted["d"] is None
    assert [adjusted[c]["exceeds"] for c in "abc"] == pytest.approx([0.03, 0.06, 0.06])
    assert [adjusted[c]["equivalent"] for c in "abc"] == pytest.approx([0.5, 0.4, 0.003])
    assert [adjusted[c]["falls_short"] for c in "abc"] == [1.0, 1.0, 1.0]  # 3 x 0.96 capped at 1


def read(per_seed: dict[str, dict[int, Estimate]], primary: str = "conditioning",
         baseline: str = "gpt") -> dict:
    """The cell's reading from planted speed-ups, through the stage's own summaries and contrasts."""
    arms = {arm: {"speedup": summarize_seeds(list(seeds.values()), 0, 0, MARGIN, baseline=arm == "gpt")}
            for arm, seeds in per_seed.items()}
    return primary_reading(factorial(per_seed, MARGIN), primary, MARGIN, arms=arms,
                           contrasts=cell_contrasts(per_seed, MARGIN, 1.5), baseline=baseline)


def test_the_reading_tests_the_accounts_whole_pattern():
    conditioned = planted({"gpt-rownorm": 0.0, "gpt-orth": 1.0, "ngpt": 1.0}, n=8, sd=0.05)
    for primary in ("conditioning", "norm", "interaction"):  # the primary is the headline, not the verdict
        r = read(conditioned, primary)
        assert r["pattern_reading"] == CONSISTENT and r["accounts"]["norm"]["reading"] == NORM.inconsistent
        assert r["reading"] == f"{CONSISTENT}; {NORM.inconsistent}"  # both accounts, conditioning first
    assert [t["status"] for t in read(conditioned)["pattern"]] == ["holds"] * 4
    # speed-ups measured against another baseline answer no prediction against gpt: never consistent
    other = read(conditioned, baseline="gpt-qknorm")
    assert len(other["pattern"]) == 1 and other["pattern_reading"] == "not resolved"
    assert other["reading"].startswith("not resolved for the account that conditioning explains")
    # the mirror: the norm account's pattern holds, the conditioning account's fails
    r = read(planted({"gpt-rownorm": 1.0, "gpt-orth": 0.0, "ngpt": 1.0}, n=8, sd=0.05))
    assert r["pattern_reading"] == INCONSISTENT and r["verdict"] == "equivalent within x1.25"
    assert r["accounts"]["norm"]["reading"] == NORM.consistent
    assert [t["a"] for t in r["accounts"]["norm"]["pattern"]] == ["gpt-rownorm", "ngpt", "gpt-orth",
                                                                  "gpt-rownorm"]
    assert r["n_seeds"] == 8 and r["method"] == "paired t on ln S over seeds" and r["level"] == 0.95
    # only ngpt fast: the conditioning main effect carries half its speed-up and exceeds the margin, yet
    # gpt-orth is shown equivalent to gpt and short of ngpt: the account's pattern fails, and the norm's
    alone = read(planted({"gpt-rownorm": 0.0, "gpt-orth": 0.0, "ngpt": 1.0}, n=8, sd=0.05))
    assert alone["verdict"] == "exceeds by more than x1.25" and alone["pattern_reading"] == INCONSISTENT
    assert alone["accounts"]["norm"]["reading"] == NORM.inconsistent
    held = {(t["a"], t["b"]): (t["held"], t["status"]) for t in alone["pattern"]}
    assert held[("gpt-orth", "gpt")] == ("equivalent", "shown not to hold")
    assert held[("gpt-orth", "ngpt")] == ("falls_short", "shown not to hold")
    assert held[("ngpt", "gpt")] == ("exceeds", "holds")
    null = read(planted({"gpt-rownorm": 0.0, "gpt-orth": 0.0, "ngpt": 0.0}, n=8, sd=0.05))
    assert null["reading"] == f"{INCONSISTENT}; {NORM.inconsistent}"
    # one seed: no interval, nothing shown either way
    assert read(planted({"gpt-rownorm": 0.0, "gpt-orth": 1.0, "ngpt": 1.0}, n=1, sd=0.05))[
        "pattern_reading"] == "not resolved"
    assert primary_reading(None, "conditioning", MARGIN)["reading"] == "not resolved"


def test_the_angle_square_is_a_factorial_and_its_account_a_pattern():
    # the angle does it: gpt turned at ngpt's angle is as fast as ngpt, ngpt turned at gpt's as slow as gpt
    angle = planted({"gpt-rownorm": 0.0, "gpt-orth": 0.0, "ngpt": 1.0, "gpt-angle": 1.0, "ngpt-angle": 0.0},
                    n=8, sd=0.05)
    f = factorial(angle, MARGIN, square=ANGLE)
    y = {arm: np.log([angle[arm][s].value for s in range(8)]) for arm in angle}
    by_hand = ((y["gpt-angle"] - y["gpt"]) + (y["ngpt"] - y["ngpt-angle"])) / 2
    assert f["effects"]["angle"]["estimate"]["ln"] == pytest.approx(by_hand.mean(), rel=1e-12)
    assert f["effects"]["architecture"]["verdict"] == "equivalent within x1.25"
    assert set(f["effects"]) == {"angle", "architecture", "interaction"}
    assert factorial({arm: angle[arm] for arm in ("gpt", "gpt-orth", "gpt-rownorm", "ngpt")}, MARGIN,
                     square=ANGLE) is None  # no angle arms: no angle square
    r = read(angle)
    accounts = {name: entry["reading"] for name, entry in r["accounts"].items()}
    assert accounts == {"conditioning": INCONSISTENT, "norm": NORM.inconsistent,
                        "effective learning rate": EFFECTIVE_LR.consistent}
    # the angle account's own test replaces the confound clause: three accounts named, nothing beside them
    assert r["reading"] == f"{INCONSISTENT}; {NORM.inconsistent}; {EFFECTIVE_LR.consistent}"
    assert r["effective_lr_clause"] is None
    # by labels the pattern predicts only its own square's arms: gpt-orth, a measured mechanism's to place
    # (speedup/dose_response.py), is not predicted by its name
    held = {(t["a"], t["b"]): t["status"] for t in r["accounts"]["effective learning rate"]["pattern"]}
    assert set(held) == {("gpt-angle", "gpt"), ("ngpt", "gpt"), ("ngpt-angle", "gpt"), ("gpt-angle", "ngpt")}
    assert {a["source"] for a in r["accounts"].values()} == {"labels", "construction"}  # no dose document
    # conditioning does it: the angle arms run as their architecture, and the angle account fails
    conditioned = planted({"gpt-rownorm": 0.0, "gpt-orth": 1.0, "ngpt": 1.0, "gpt-angle": 0.0,
                           "ngpt-angle": 1.0}, n=8, sd=0.05)
    r = read(conditioned)
    assert r["pattern_reading"] == CONSISTENT
    assert r["accounts"]["effective learning rate"]["reading"] == EFFECTIVE_LR.inconsistent
    assert [t["required"] for t in r["pattern"]] == [True] * 4  # no label prediction of the angle arms
    # without the angle arms the angle account is not read: left out of the words, not resolved in the file
    r = read(planted({"gpt-rownorm": 0.0, "gpt-orth": 1.0, "ngpt": 1.0}, n=8, sd=0.05))
    assert r["accounts"]["effective learning rate"]["reading"] == "not resolved"
    assert "effective learning rate" not in r["reading"]
