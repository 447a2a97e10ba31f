"""kappa read at one token count across a cell's arms (speedup/common_kappa.py): the common count, the
interpolation on ln tokens, and what a run without a measurement on one side of it is read at."""

from __future__ import annotations

import math

import pytest

from ngptlab.grid.runs import RunSpec
from ngptlab.results import RunResult
from ngptlab.speedup.common_kappa import (
    EMBED_KEY,
    HEAD_KEYS,
    HEADS,
    at_tokens,
    by_seed,
    common_kappa,
    common_tokens,
    kappa,
)


def run(arm: str, budget: int, points: list[tuple[float, float]], seed: int = 0) -> RunResult:
    """A run observing each (tokens, kappa) as every head median and a tenth of it as the embedding's."""
    observed = {"kappa": [(t, {**dict.fromkeys(HEAD_KEYS, k), EMBED_KEY: k / 10}) for t, k in points]}
    return RunResult(RunSpec("cpu-4l", 64, arm, budget, 1e-3, seed), "completed", 3.0, [], observed)


def test_between_two_measurements_ln_kappa_is_interpolated_in_ln_tokens():
    # ln 2000 is halfway between ln 1000 and ln 4000: kappa the geometric mean of 10 and 40
    assert at_tokens([(1000, 10.0), (4000, 40.0)], 2000) == {"kappa": pytest.approx(20.0), "tokens": 2000}
    assert at_tokens([(1000, 10.0), (4000, 40.0)], 4000) == {"kappa": 40.0, "tokens": 4000}  # exact


def test_a_run_without_a_measurement_on_one_side_is_read_at_its_nearest():
    assert at_tokens([(3000, 30.0), (4000, 40.0)], 2000) == {"kappa": 30.0, "tokens": 3000}
    assert at_tokens([(1000, 10.0)], 2000) == {"kappa": 10.0, "tokens": 1000}
    assert at_tokens([(1000, math.inf), (4000, 40.0)], 2000) == {"kappa": math.inf, "tokens": 2000}
    assert at_tokens([], 2000) is None


def test_the_common_count_is_the_fewest_tokens_among_the_runs_last_kappas():
    runs = {"gpt": {0: run("gpt", 8192, [(2048, 100.0), (4096, 200.0), (8192, 400.0)])},
            "ngpt": {0: run("ngpt", 4096, [(2048, 10.0), (4096, 20.0)])},
            "gpt-orth": {0: run("gpt-orth", 2048, [])}}  # no kappa logged: not counted
    assert common_tokens(r for by in runs.values() for r in by.values()) == 4096
    doc = common_kappa(runs)
    assert doc["tokens"] == 4096 and "T_common" in doc["rule"]
    assert by_seed(doc, "gpt") == {0: 200.0} and by_seed(doc, "ngpt") == {0: 20.0}
    assert by_seed(doc, "gpt", EMBED_KEY) == {0: pytest.approx(20.0)} and by_seed(doc, "gpt-orth") == {}
    (entry,) = doc["arms"]["gpt"]
    assert entry[HEADS] == {"kappa": 200.0, "tokens": 4096} and entry["run"] == runs["gpt"][0].spec.name
    assert common_tokens([]) is None and common_kappa({"gpt": {}})["tokens"] is None


def test_by_default_a_runs_kappa_is_its_last():
    assert kappa(run("gpt", 8192, [(2048, 100.0), (8192, 400.0)])) == {EMBED_KEY: 40.0, HEADS: 400.0}
