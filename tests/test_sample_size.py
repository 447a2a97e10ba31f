"""Seeds needed: the noncentral-t size of a paired t test, the sd's upper bound, and the TOST size, each
checked against an independent computation (scipy's nct at n and n - 1, or a simulation of the tests)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ngptlab.sample_size import (
    sd_upper_bound,
    seeds_for_equivalence,
    seeds_to_resolve,
    t_test_power,
    tost_power,
)
from ngptlab.speedup.inference import seeds_needed


def simulated_t_test_power(n: int, sd: float, ratio: float, draws: int = 200_000) -> float:
    x = np.random.default_rng(0).normal(math.log(ratio), sd, (draws, n))
    t = x.mean(axis=1) / (x.std(axis=1, ddof=1) / math.sqrt(n))
    return float(np.mean(np.abs(t) > stats.t.ppf(0.975, n - 1)))


def simulated_tost_power(n: int, sd: float, margin: float, alpha: float, draws: int = 200_000) -> float:
    x = np.random.default_rng(1).normal(0.0, sd, (draws, n))
    half = stats.t.ppf(1 - alpha, n - 1) * x.std(axis=1, ddof=1) / math.sqrt(n)
    mean = x.mean(axis=1)
    return float(np.mean((mean - half > -math.log(margin)) & (mean + half < math.log(margin))))


def nct_power(n: int, sd: float, ratio: float) -> float:
    """The textbook form, the lower tail included, written out independently of the module."""
    df, nc, crit = n - 1, math.log(ratio) * math.sqrt(n) / sd, stats.t.ppf(0.975, n - 1)
    return stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc)


@pytest.mark.parametrize("sd", [0.1, 0.2, 0.3, 1.0])
def test_seeds_to_resolve_is_the_first_n_with_80_percent_noncentral_t_power(sd):
    n = seeds_to_resolve(sd, 1.5, 0.95)
    assert nct_power(n, sd, 1.5) >= 0.8 > nct_power(n - 1, sd, 1.5)
    assert t_test_power(n, sd, 1.5, 0.95) == pytest.approx(nct_power(n, sd, 1.5), abs=1e-9)


def test_t_test_power_agrees_with_a_simulated_t_test():
    for n, sd in ((3, 0.2), (5, 0.2), (7, 0.3)):
        assert t_test_power(n, sd, 1.5, 0.95) == pytest.approx(simulated_t_test_power(n, sd, 1.5), abs=0.005)


def test_sizes_at_the_edges():
    assert seeds_to_resolve(0.0, 1.5, 0.95) == 2 and seeds_to_resolve(50.0, 1.5, 0.95) is None
    assert seeds_to_resolve(float("nan"), 1.5, 0.95) is None
    with pytest.raises(ValueError):
        seeds_to_resolve(0.1, 1.0, 0.95)
    with pytest.raises(ValueError):
        seeds_for_equivalence(0.1, 1.0, 0.05)


def test_sd_upper_bound_is_the_chi_square_bound_and_covers_at_its_level():
    assert sd_upper_bound(0.2, 3) == pytest.approx(0.2 * math.sqrt(2 / stats.chi2.ppf(0.2, 2)))
    x = np.random.default_rng(2).normal(0.0, 1.0, (100_000, 3))
    covered = np.mean([sd_upper_bound(s, 3) >= 1.0 for s in x.std(axis=1, ddof=1)])
    assert covered == pytest.approx(0.8, abs=0.005)


def test_tost_size_at_sd_0_2_and_margin_1_25():
    # alpha 0.05 each side (the 90% interval inside the margin): 9 seeds; 0.025 each side (the 95%
    # interval, as the verdict reads it): 11.
    for alpha, expected in ((0.05, 9), (0.025, 11)):
        n = seeds_for_equivalence(0.2, 1.25, alpha)
        assert n == expected
        assert tost_power(n, 0.2, 1.25, alpha) >= 0.8 > tost_power(n - 1, 0.2, 1.25, alpha)
        assert simulated_tost_power(n, 0.2, 1.25, alpha) >= 0.8 - 0.005
        assert simulated_tost_power(n - 1, 0.2, 1.25, alpha) < 0.8
        assert tost_power(n, 0.2, 1.25, alpha) == pytest.approx(
            simulated_tost_power(n, 0.2, 1.25, alpha), abs=0.005)


def test_seeds_needed_states_method_level_power_and_df():
    out = seeds_needed(0.2, 3, 1.5, 1.25)
    assert out["seeds_needed"] == seeds_to_resolve(0.2, 1.5, 0.95)
    assert out["seeds_needed_upper"] == seeds_to_resolve(sd_upper_bound(0.2, 3), 1.5, 0.95)
    assert out["seeds_needed_upper"] > out["seeds_needed"]
    assert out["seeds_needed_equivalence"] == 11
    for key in ("seeds_needed", "seeds_needed_upper", "seeds_needed_equivalence"):
        note = out[f"{key}_note"]
        assert "sd from 3 seeds (df 2)" in note and "power 0.8" in note, note
    assert "noncentral t" in out["seeds_needed_note"] and "level 0.95" in out["seeds_needed_note"]
    assert "80% upper confidence bound" in out["seeds_needed_upper_note"]
    assert "chi-square" in out["seeds_needed_upper_note"]
    assert "alpha 0.025 each side" in out["seeds_needed_equivalence_note"]
    assert "x1.25" in out["seeds_needed_equivalence_note"]
    none = seeds_needed(None, 1, 1.5, 1.25)
    assert set(none.values()) == {None, "needs 2 seeds to measure the noise"}
