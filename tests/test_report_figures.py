"""Figures a reader can trust, at the kit's level (no results tree, so fast): the baseline black and drawn
last, budgets ticked with the grid's own numbers, integer ticks on index axes, labels moved apart, one
precision per table column, a note every row shares said once.

support/figures.py's check_figure, which test_report.py applies to the report's own figures, is tested here
to fail where it should.
"""

from __future__ import annotations

import pytest
from matplotlib.ticker import MaxNLocator
from support.figures import check_figure, labels_overlap
from support.synthetic import synthetic_params

from ngptlab.report.kit import plot
from ngptlab.report.kit.document import Document, TableBlock
from ngptlab.report.kit.load import load_results
from ngptlab.report.kit.render import to_html
from ngptlab.report.kit.table import Table, fmt_sig, seeds_text
from ngptlab.report.sections import loss
from ngptlab.settings import Params
from ngptlab.train.data import FINAL_EVAL_CAP_TOKENS


def test_the_baseline_is_black_and_drawn_last_whichever_arm_it_is():
    arms = ["gpt", "gpt-nowd", "gpt-scalar", "gpt-lrm"]
    for baseline in ("gpt", "gpt-scalar"):
        with plot.use_baseline(baseline):
            assert plot.drawing_order(arms)[-1] == baseline
            assert plot.arm_color(baseline) == plot.BASELINE_COLOR
            assert all(plot.arm_color(a) != plot.BASELINE_COLOR for a in arms if a != baseline)
            assert plot.arm_zorder(baseline) > max(plot.arm_zorder(a) for a in arms if a != baseline)
            with plot.capture() as figures, plot.panels(1, 1) as (fig, (ax,)):
                for arm in plot.drawing_order(arms):  # the same curve: only the last drawn is seen
                    ax.plot([1, 2], [3, 2], color=plot.arm_color(arm), zorder=plot.arm_zorder(arm), label=arm)
                plot.arm_legend(fig, arms)
                plot.save(fig)
            check_figure(figures[0], baseline)
    assert not plot.is_baseline("gpt-scalar")  # the block ended: the default again


def test_a_coloured_line_over_the_baseline_fails_the_check():
    with plot.panels(1, 1) as (fig, (ax,)):
        ax.plot([1, 2], [3, 2], color=plot.arm_color("gpt"), label="gpt")
        ax.plot([1, 2], [3, 2], color=plot.arm_color("gpt-nowd"), label="gpt-nowd")
        ax.bar([1], [2])
        with pytest.raises(AssertionError, match="drawn over the baseline"):
            check_figure(fig)
        ax.lines[1].remove()
        ax.set_yscale("log")
        with pytest.raises(AssertionError, match="a bar on a log"):
            check_figure(fig)
        plot.discard(fig)


@pytest.mark.parametrize("budget, name", [(2048, "2048"), (8192, "8192"), (16000, "16k"), (16384, "16384"),
                                          (2097152, "2,097,152"), (625_000_000, "625M"),
                                          (1_250_000_000, "1.25B"), (10**11, "100B")])
def test_a_budget_is_named_as_the_grid_names_it(budget, name):
    assert plot.fmt_budget(budget) == name


def test_budget_and_index_axes_tick_what_they_count():
    budgets = [2048, 8192]
    with plot.panels(2, 2) as (fig, (a, b)):
        a.plot(budgets, [8.9, 7.6])
        plot.budget_axis(a, budgets)
        a.set_xlabel("token budget")
        b.plot([1, 2, 3, 4], [5, 4, 3, 2])
        plot.index_axis(b)
        b.set_xlabel("layer (1-based)")
        fig.canvas.draw()
        check_figure(fig, budgets=budgets)
        assert fig.get_size_inches()[0] >= plot.MIN_WIDTH
        b.xaxis.set_major_locator(MaxNLocator(nbins=8))  # matplotlib's default: 2.5 between layers
        fig.canvas.draw()
        with pytest.raises(AssertionError, match="ticks"):
            check_figure(fig, budgets=budgets)
        plot.discard(fig)


def test_labels_at_one_point_are_moved_apart():
    with plot.panels(1, 1) as (fig, (ax,)):
        ax.plot([1, 1.02, 3], [1, 1, 2], "o")
        texts = [ax.annotate(name, (x, 1), xytext=(5, 4), textcoords="offset points")
                 for name, x in (("gpt", 1), ("gpt-orth", 1.02), ("gpt-rownorm", 1))]
        fig.canvas.draw()
        assert labels_overlap(fig, ax)
        plot.dodge_labels(fig, [texts])
        fig.canvas.draw()
        assert labels_overlap(fig, ax) == []
        plot.discard(fig)


def test_table_columns_read_at_one_precision_and_a_shared_note_is_said_once():
    assert [fmt_sig(x) for x in (1.0, 0.985, 1780.0, 0.0, 12345, None)] == \
        ["1.00", "0.985", "1.78e3", "0.00", "12,345", "—"]
    assert (seeds_text([0]), seeds_text([0, 1, 2]), seeds_text([2, 0, 5])) == \
        ("seed 0", "seeds 0-2", "seeds 0, 2 and 5")
    t = Table("t", "T", ["arm", "seed", "speedup", "note"], formats={"seed": str, "arm": str},
              note="Geometric means.")
    t.add({"arm": "gpt", "seed": "0", "speedup": 1.0, "note": "one seed"})
    t.add({"arm": "7", "seed": "1", "speedup": 0.985, "note": "one seed"})
    assert "note" not in t.shown_columns() and t.full_note() == "Geometric means. Every row: One seed."
    html = to_html(Document("d", [TableBlock(t)]))
    assert '<td class="num">1.00</td>' in html and '<td class="num">0.985</td>' in html
    assert "<td>7</td>" in html  # a digit string in a column of words is not right-aligned alone
    assert '<td class="num">0</td>' in html  # a column of digits is


@pytest.mark.parametrize("final_eval_tokens, final", [
    ("all", f"the whole validation split (up to its first {FINAL_EVAL_CAP_TOKENS:,} tokens)"),
    (65536, "the validation split's first 65,536 tokens")])
def test_the_loss_caption_says_a_curve_and_the_final_loss_are_different_estimates(tmp_path, final_eval_tokens,
                                                                                  final):
    """A curve's last point and the final loss are two estimates on different tokens of the split (the default
    grid's final losses sit 0.01-0.59 nats below, against a standard error of ~0.014), not one loss and its
    noise."""
    params = synthetic_params()
    params["train"]["final_eval_tokens"] = final_eval_tokens
    results = load_results(Params.of(params), tmp_path)
    train, cell = results.params.train, results.cells[0]
    context = results.cell_runs(cell)[0].spec.context
    said = loss.two_losses(results, cell)
    assert "noise" not in said
    assert (f"the same {train.eval_windows} validation windows ({train.eval_windows * context:,} tokens at "
            f"positions drawn by train.eval_seed") in said
    assert f"on {final}" in said and "different tokens" in said
