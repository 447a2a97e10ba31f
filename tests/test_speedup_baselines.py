"""speedup.baseline naming several arms: the primary's document as with one, a further baseline's speed-ups
under by_baseline from the same estimate, one report table per baseline."""

from __future__ import annotations

import json
import math
import random

import pytest
from support import fixture_params
from support.synthetic import settings_of

from ngptlab import layout
from ngptlab.config.load import validate_params
from ngptlab.errors import ParamsError, ResultsError
from ngptlab.grid.runs import RunSpec
from ngptlab.report.kit.document import Document
from ngptlab.report.kit.load import load_results
from ngptlab.report.sections import speedup as section
from ngptlab.results import RunResult, write_json
from ngptlab.settings import Params
from ngptlab.speedup.cell import analyse_cell
from ngptlab.speedup.estimator import estimate_cell

BUDGETS = [8192, 16384, 32768, 65536]
LRS = [1e-3, 3e-3, 1e-2]
BEST_LR = 3e-3
# Token efficiency relative to gpt; the 2x2 arms are there so that the factorial and its reading exist.
PLANTED = {"gpt": 1.0, "gpt-qknorm": 1.5, "ngpt": 3.0, "gpt-rownorm": 1.3, "gpt-orth": 2.2}
SEEDS = [0, 1, 2]
CELL = "cpu-4l-ctx1024"  # a context where the paper gives a speed-up (about 4x)
RESAMPLES, SEED = 50, 0


def efficiency(arm: str, seed: int) -> float:
    """The planted efficiency of one (arm, seed): seeds differ a little, so every speed-up has an interval."""
    return PLANTED[arm] * math.exp(random.Random(f"{arm}/{seed}").gauss(0.0, 0.05))


def loss(tokens: float, k: float, lr: float) -> float:
    """A power law in tokens (the estimator's fitted law is then exact), worse away from the best lr."""
    return 2.0 + 50.0 * (k * tokens) ** -0.3 + 0.05 * math.log(lr / BEST_LR) ** 2


def planted_results() -> list[RunResult]:
    out = []
    for arm in PLANTED:
        for seed in SEEDS:
            k = efficiency(arm, seed)
            for budget in BUDGETS:
                for lr in LRS:
                    curve = [(budget * i / 4, loss(budget * i / 4, k, lr) + 0.1) for i in range(1, 4)]
                    out.append(RunResult(RunSpec("cpu-4l", 1024, arm, budget, lr, seed), "completed",
                                         loss(budget, k, lr), [*curve, (budget, loss(budget, k, lr))]))
    return out


def grid(baseline) -> Params:
    params = fixture_params()
    params["train"].update(scales=["cpu-4l"], contexts=[1024], budgets=BUDGETS, seeds=SEEDS,
                           arms=list(PLANTED), micro_batch_tokens=4096,
                           learning_rates={"cpu-4l": {arm: LRS for arm in PLANTED}})
    # every budget read at its best learning rate, so a baseline's estimate alone reads the same runs
    params["speedup"].update(baseline=baseline, bootstrap=RESAMPLES, seed=SEED, lr_policy="budget")
    return validate_params(params)


@pytest.fixture(scope="module")
def results() -> list[RunResult]:
    return planted_results()


@pytest.fixture(scope="module")
def two(results) -> dict:
    return analyse_cell(grid(["gpt", "gpt-qknorm"]), CELL, results)


@pytest.fixture(scope="module")
def single(results) -> dict:
    return analyse_cell(grid("gpt"), CELL, results)


@pytest.fixture(scope="module")
def alone(results) -> dict[str, dict]:
    """estimate_cell run with each baseline on its own, at the params' settings."""
    cfg = grid("gpt").speedup
    return {baseline: estimate_cell(results, baseline, RESAMPLES, SEED, cfg.equivalence_margin,
                                    cfg.resolve_ratio, rule=cfg.lr_policy)
            for baseline in ("gpt", "gpt-qknorm")}


def test_each_baseline_gets_the_speedups_estimate_cell_gives_it_alone(two, alone):
    for baseline, doc in (("gpt", two), ("gpt-qknorm", two["by_baseline"]["gpt-qknorm"])):
        expected = alone[baseline]
        assert doc["targets"] == expected["targets"] and doc["contrasts"] == expected["contrasts"]
        assert list(doc["arms"]) == list(expected["arms"])
        for arm, entry in expected["arms"].items():
            assert doc["arms"][arm]["speedup"] == entry["speedup"], (baseline, arm)
            assert doc["arms"][arm]["per_seed"] == entry["per_seed"], (baseline, arm)
    assert list(two["by_baseline"]) == ["gpt-qknorm"] and two["baseline"] == "gpt"
    further = two["by_baseline"]["gpt-qknorm"]
    assert set(further) == {"targets", "arms", "contrasts"}
    assert {t["arm"] for t in further["targets"]} == {"gpt-qknorm"}
    # the planted truth: ngpt against gpt-qknorm is the ratio of their efficiencies, seed by seed
    ratio = math.exp(sum(math.log(efficiency("ngpt", s) / efficiency("gpt-qknorm", s)) for s in SEEDS) / 3)
    assert further["arms"]["ngpt"]["speedup"]["value"] == pytest.approx(ratio, rel=1e-6)
    assert two["arms"]["ngpt"]["speedup"]["value"] != pytest.approx(ratio, rel=0.1)
    # gpt is slower than gpt-qknorm: measured below 1, since the reference budget lies inside the grid
    slower = math.exp(sum(math.log(efficiency("gpt", s) / efficiency("gpt-qknorm", s)) for s in SEEDS) / 3)
    assert slower < 1 and further["arms"]["gpt"]["speedup"]["bound"] is None
    assert further["arms"]["gpt"]["speedup"]["value"] == pytest.approx(slower, rel=1e-6)


def test_one_baseline_gives_the_document_of_before_and_a_further_one_leaves_it_alone(results, two, single):
    assert "by_baseline" not in single
    assert json.dumps(analyse_cell(grid(["gpt"]), CELL, results)) == json.dumps(single)
    # the primary's fields, factorial and reading included, do not move for a further baseline
    assert {key: value for key, value in two.items() if key != "by_baseline"} == single
    assert single["factorial"] is not None and single["reading"]["n_seeds"] == len(SEEDS)
    assert list(two) == [*list(single)[:list(single).index("factorial")], "by_baseline",
                         *list(single)[list(single).index("factorial"):]]


MISSING = "speedup.baseline 'gpt-qknorm' is not among train.arms: gpt, ngpt"


@pytest.mark.parametrize("baseline, arms, message", [
    (["gpt", "gpt-qknorm"], ["gpt", "ngpt"], MISSING),
    (["gpt-qknorm", "gpt"], ["gpt", "ngpt"], MISSING),
    (["gpt", "gpt"], list(PLANTED), "speedup.baseline: ['gpt', 'gpt'] has non-unique elements"),
    ([], list(PLANTED), "speedup.baseline: [] should be non-empty"),
    (["gpt", "gpt-no"], list(PLANTED), "speedup.baseline[1]: 'gpt-no' is not allowed; allowed values: gpt"),
    ("gpt-no", list(PLANTED), "speedup.baseline: 'gpt-no' is not allowed; allowed values: gpt"),
])
def test_a_baseline_outside_train_arms_or_malformed_is_one_error_naming_the_key(baseline, arms, message):
    params = fixture_params()
    params["train"]["arms"] = arms
    params["speedup"]["baseline"] = baseline
    with pytest.raises(ParamsError) as err:
        validate_params(params)
    assert message in str(err.value) and "\n" not in str(err.value)


def report(tmp_path, params: Params, doc: dict) -> Document:
    """The speed-up section of the report on one planted speed-up file (no train results: the tables read
    only the speed-up file)."""
    write_json(tmp_path / layout.speedup_file(CELL), doc)
    results = load_results(settings_of(params), tmp_path)
    out = Document("planted")
    section.section(out, results, section.speedup_table(results))
    return out


def rows(table) -> dict[str, dict]:
    return {row[table.columns.index("arm")]: dict(zip(table.columns, row, strict=True)) for row in table.rows}


def test_the_report_shows_one_speedup_table_per_baseline(tmp_path, two, alone):
    doc = report(tmp_path, grid(["gpt", "gpt-qknorm"]), json.loads(json.dumps(two)))
    tables = {t.id: t for t in doc.tables}
    assert tables["speedup"].title.startswith("Speed-up against gpt (")
    assert tables["speedup_gpt-qknorm"].title.startswith("Speed-up against gpt-qknorm (")
    assert tables["speedup_by_cell"].title.endswith(", against gpt")
    assert tables["speedup_by_cell_gpt-qknorm"].title.endswith(", against gpt-qknorm")
    for table_id, baseline in (("speedup", "gpt"), ("speedup_gpt-qknorm", "gpt-qknorm")):
        shown = rows(tables[table_id])
        expected = alone[baseline]["arms"]
        assert shown[baseline]["display"] == "1 (baseline)" and list(shown)[0] == baseline
        for arm in PLANTED:
            assert shown[arm]["speedup"] == pytest.approx(expected[arm]["speedup"]["value"], rel=1e-12), arm
        assert shown["ngpt"]["paper"] == "~4x"  # the paper's factor beside each baseline's ngpt
    for table_id, baseline in (("speedup_by_cell", "gpt"), ("speedup_by_cell_gpt-qknorm", "gpt-qknorm")):
        cells, long = tables[table_id], rows(tables[table_id.replace("_by_cell", "")])
        assert baseline not in cells.columns and set(cells.columns) >= set(PLANTED) - {baseline}
        assert cells.rows[0][cells.columns.index("ngpt")] == long["ngpt"]["display"]
        assert cells.rows[0][cells.columns.index("paper_ngpt")].startswith("~4x at 1,024")
    # the settle-it section keeps the primary: nothing else reads a further baseline
    assert [t.id for t in doc.tables].count("speedup_per_seed") == 1


def test_one_baseline_keeps_the_reports_tables_and_titles(tmp_path, single):
    doc = report(tmp_path, grid("gpt"), json.loads(json.dumps(single)))
    tables = {t.id: t for t in doc.tables}
    assert not [i for i in tables if "qknorm" in i]
    assert tables["speedup"].title == ("Speed-up over the baseline (tokens the baseline needs / tokens the "
                                       "arm needs)")
    assert tables["speedup_by_cell"].title == "Speed-up per cell beside the paper's"


def test_a_speedup_file_without_a_named_further_baseline_is_a_clear_error(tmp_path, single):
    write_json(tmp_path / layout.speedup_file(CELL), single)
    with pytest.raises(ResultsError, match="no speed-ups against 'gpt-qknorm', which speedup.baseline names"):
        load_results(grid(["gpt", "gpt-qknorm"]), tmp_path)
