"""The report's kit: one style per arm in every figure, log axes that always label their ticks, and the best
runs read from the speed-up stage's file as its own function chooses them."""

from __future__ import annotations

import json

import matplotlib.colors as mcolors
import pytest
from support import synthetic
from support.synthetic import settings_of

from ngptlab import layout
from ngptlab.report.kit import plot, views
from ngptlab.report.kit.load import load_results
from ngptlab.report.kit.table import fmt_short
from ngptlab.settings import allowed_arms
from ngptlab.speedup.document import SpeedupDocument


def test_every_arm_has_its_own_colour_and_marker_and_none_is_grey():
    assert list(plot.ARM_STYLE) == allowed_arms()
    colours = [mcolors.to_hex(plot.ARM_STYLE[a][0]) for a in allowed_arms()]  # as an arm, not the baseline
    markers = [plot.arm_marker(a) for a in allowed_arms()]
    assert len(set(colours)) == len(colours) and len(set(markers)) == len(markers)
    for colour in colours:
        r, g, b = mcolors.to_rgb(colour)
        assert max(r, g, b) - min(r, g, b) > 0.1, f"{colour} is grey, the colour of legend keys"
    assert mcolors.to_hex(plot.KEY_COLOR) not in colours
    baseline = mcolors.to_hex(plot.BASELINE_COLOR)  # whichever arm is the baseline: black, like none other
    assert baseline not in colours and baseline != mcolors.to_hex(plot.KEY_COLOR)
    assert not {"^", "v"} & set(markers)  # triangles mark bounds


@pytest.mark.parametrize("lo, hi", [(3.1, 3.9), (2.0, 9.0), (1.0e3, 8.0e3), (2048, 8192), (512, 8192),
                                    (1.0, 1.0e6), (0.9, 1.3), (40.0, 2.0e3)])
def test_a_log_axis_always_labels_at_least_two_ticks(lo, hi):
    with plot.panels(1, 1) as (fig, (ax,)):
        ax.plot([lo, hi], [1, 2])
        plot.log_axis(ax, "x", fmt_short)
        ax.set_xlim(lo, hi)
        fig.canvas.draw()
        labels = [t.get_text() for t in ax.get_xticklabels()
                  if t.get_text() and lo <= t.get_position()[0] <= hi]
        plot.discard(fig)
    assert len(labels) >= 2, (lo, hi, labels)
    assert len(set(labels)) == len(labels)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("kit")
    params = synthetic.synthetic_params(seeds=(0, 1), budgets=(16384, 65536))
    synthetic.write_results(root, params, diverged=("cpu-4l-ctx64-gpt-t65536-lr0.01-s1",))
    return root, params


def test_best_runs_are_the_speedup_files_choice_and_its_functions(tree):
    root, params = tree
    results = load_results(settings_of(params), root)
    for cell, doc in results.speedups.items():
        from_file = views.best_runs(results, cell)
        marked = sorted(e.run for e in doc.runs if e.best_lr_for_budget)
        assert sorted(r.name for per in from_file.values() for r in per.values()) == marked
        computed = views.best_of(results, results.compared_runs(cell))
        # The same runs, in the same order (a mean over seeds sums in it).
        assert [(k, list(per.items())) for k, per in from_file.items()] == \
               [(k, list(per.items())) for k, per in computed.items()]


def test_best_runs_follow_the_file_not_a_recomputation(tree):
    root, params = tree
    results = load_results(settings_of(params), root)
    cell = results.cells[0]
    doc = json.loads((root / layout.speedup_file(cell)).read_text())
    entry = next(e for e in doc["runs"] if e["arm"] == "gpt" and e["budget"] == 16384 and e["seed"] == 0
                 and not e["best_lr_for_budget"] and e["status"] == "completed")
    for e in doc["runs"]:
        if (e["arm"], e["budget"], e["seed"]) == ("gpt", 16384, 0):
            e["best_lr_for_budget"] = e["run"] == entry["run"]
    results.speedups[cell] = SpeedupDocument.from_dict(doc)
    assert views.best_runs(results, cell)[("gpt", 0)][16384].name == entry["run"]
    results.speedups[cell] = None  # no speed-up file yet (a cell still running): the stage's function
    assert views.best_runs(results, cell)[("gpt", 0)][16384].name != entry["run"]
