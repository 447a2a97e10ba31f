"""The report's section on the rival accounts over training: where each quantity separates from the baseline,
on planted points and on the synthetic grid's planted curves, angular rates and kappas."""

from __future__ import annotations

import math

import pytest
from support import synthetic
from support.synthetic import settings_of

from ngptlab.grid.enumeration import enumerate_cells, enumerate_runs
from ngptlab.report.kit.document import Document, FigureBlock, TableBlock, Text
from ngptlab.report.kit.load import OBSERVED, Results, RunRecord
from ngptlab.report.sections import rivals

LOSS, RATE, KAPPA_EMBED, KAPPA_HEADS = rivals.QUANTITIES


def test_separation_is_the_first_point_from_which_on_the_arm_stays_outside_the_band():
    base = {1.0: 1.0, 2.0: 1.0, 3.0: 1.0, 4.0: 1.0}
    assert rivals.first_separation(RATE, {1.0: 1.3, 2.0: 1.1, 3.0: 1.3, 4.0: 0.7}, base) == 3.0
    assert rivals.first_separation(RATE, {1.0: 1.3, 2.0: 1.3, 3.0: 1.3, 4.0: 1.2}, base) is None  # back in
    assert rivals.first_separation(RATE, {1.0: 1.26, 2.0: 0.79}, base) == 1.0  # a factor 1.25 either way
    assert rivals.first_separation(KAPPA_EMBED, {2.0: math.inf, 4.0: math.inf}, base) == 2.0
    assert rivals.first_separation(KAPPA_EMBED, {4.0: math.inf}, {4.0: math.inf}) is None
    losses = {1.0: 3.0, 2.0: 2.5}
    assert rivals.first_separation(LOSS, {1.0: 3.01, 2.0: 2.47}, losses) == 2.0  # 0.03 > 0.02 nats
    assert rivals.first_separation(LOSS, {5.0: 1.0}, losses) is None  # no common point


def test_the_sentence_orders_the_quantities_and_names_those_that_never_separate():
    found = {"loss": 8192.0, "angular rate": 4096.0, "κ input embedding": 4096.0, "κ heads, layers 3-4": None}
    text = rivals.sentence("ngpt", found, observed=True)
    assert text.startswith("ngpt: the angular rate and κ input embedding separate together first")
    assert "loss (from 8,192 tokens)" in text and text.endswith("Not separated: κ heads, layers 3-4.")
    assert "trained before" in rivals.sentence("ngpt", found, observed=False)


@pytest.fixture
def results(tmp_path):
    """The synthetic grid's runs as the report loads them, built in memory (no speed-up file: the best runs
    are the speed-up stage's own choice), with the planted curves and observations of its metrics rows."""
    params = synthetic.synthetic_params(seeds=(0,), budgets=(16384, 65536))
    runs = {}
    for spec in enumerate_runs(settings_of(params)):
        curve = [(float(t), loss) for t, loss in synthetic.planted_curve(spec, params["train"])]
        observed = {name: [(t, synthetic.planted_observations(spec, t)[name]) for t, _ in curve]
                    for name in OBSERVED}
        runs[spec.name] = RunRecord(spec, {"status": "completed", "final_val_loss": curve[-1][1]}, curve,
                                    observed)
    settings = settings_of(params)
    return Results(tmp_path, settings, None, runs, dict.fromkeys(enumerate_cells(settings)), None)


def test_the_section_finds_where_the_planted_quantities_separate(results):
    doc = Document("t")
    rivals.section(doc, results)
    figures = [b.figure.id for b in doc.blocks if isinstance(b, FigureBlock)]
    assert figures == [f"rivals_{cell}" for cell in results.cells]
    (table,) = [b.table for b in doc.blocks if isinstance(b, TableBlock)]
    rows = {(row[0], row[1]): dict(zip(table.columns, row, strict=True)) for row in table.rows}
    every = results.params.train.eval_every_tokens  # the first evaluation point
    for cell in results.cells:
        ngpt = rows[(cell, "ngpt")]
        # planted: ngpt turns 3x faster from the first point and its loss is far lower; its embedding
        # kappa 10 / (1 + 3 t / 65536) leaves the band (below 8) at t > 5,461: the next point after
        assert (ngpt["loss"], ngpt["angular rate"], ngpt["κ input embedding"]) == \
            (every, every, every * (5461 // every + 1))
        assert ngpt["κ heads, layers 3-4"] is None and ngpt["first"] == "loss, angular rate"
        orth = rows[(cell, "gpt-orth")]  # a planted speed-up of 2.2, the baseline's angular rate and kappa
        assert orth["loss"] == every and orth["angular rate"] is None and orth["first"] == "loss"
    sentences = " ".join(b.text for b in doc.blocks if isinstance(b, Text))
    assert "ngpt: the loss and angular rate separate together first" in sentences
    assert "correlational" in sentences
