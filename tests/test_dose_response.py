"""Each account read as a prediction from measured mechanisms (speedup/dose_response.py): planted worlds
through the real `ngptlab speedup`, whose arms' speed-ups follow a planted law of their measured kappa or
angle per step, and the intervals' coverage on a pure planted line."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pytest
import yaml
from test_lr_policy_drift import BUDGETS, CELL, params_file, write_result

from ngptlab.cli import main
from ngptlab.config.load import load_params
from ngptlab.design.loss_model import LrLaw, loss_model
from ngptlab.design.truths import Truth
from ngptlab.design.world import World
from ngptlab.grid.enumeration import compared_runs
from ngptlab.report.command import render_report, write_report
from ngptlab.report.kit import plot
from ngptlab.report.kit.load import Results
from ngptlab.report.sections.dose_response import dose_figure, paper_line, slopes_table
from ngptlab.results import train_dir
from ngptlab.speedup.common_kappa import HEAD_KEYS, HEADS
from ngptlab.speedup.document import SpeedupDocument
from ngptlab.speedup.dose_response import (
    CANNOT_TELL,
    CAPACITY,
    CONSISTENT,
    DEPARTS,
    INCONSISTENT,
    NO_FIT,
    OFF_OPTIMUM,
    ON_LINE,
    PREDICTORS,
    fit_account,
    read_points,
)
from ngptlab.speedup.equivalence import NOT_RESOLVED
from ngptlab.speedup.reading import CONDITIONING, EFFECTIVE_LR
from ngptlab.speedup.rivals import RATE_KINDS

ARMS = ["gpt", "gpt-rownorm", "gpt-orth", "ngpt", "gpt-angle", "ngpt-angle"]
KAPPA_ACCOUNT, ANGLE_ACCOUNT = (p.account for p in PREDICTORS)
GPT_KAPPA, RATE = 1800.0, 0.01  # gpt's planted head kappa and angle per step (rad)


@dataclass(frozen=True)
class Planted(Truth):
    """A world whose every arm runs at a planted speed-up over gpt."""

    speedups: tuple[tuple[str, float], ...] = ()

    def speedup(self, arm: str) -> float:
        return dict(self.speedups)[arm]


GROWN_AT = 65536  # tokens at which a growing kappa is the planted value


def plant_mechanisms(root, spec, kappa: float, rate: float, growth: float = 0.0) -> None:
    """Every metrics row (at t tokens) turns each kind by `rate` per step and observes
    kappa (t / GROWN_AT)^growth as every layer 3-4 Q and K head median (growth 0: constant)."""
    path = train_dir(root, spec) / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        row["angular_rate"] = dict.fromkeys(RATE_KINDS, rate)
        row["kappa"] = dict.fromkeys(HEAD_KEYS, kappa * (row["tokens"] / GROWN_AT) ** growth)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def planted_cell(tmp_path, kappas: dict[str, float], angles: dict[str, float], speedups: dict[str, float],
                 arms=ARMS, seeds=(0, 1, 2, 3), growth: float = 0.0,
                 lr_laws: tuple[tuple[str, LrLaw], ...] = ()) -> dict:
    """The cell's dose_response through `ngptlab speedup`: each arm at its planted speed-up (the design's loss
    model with its seed and run noise; lr_laws: an arm's learning-rate law other than gpt's), its runs' kappa
    and angle per step at the planted values times a seed's noise (sd 0.1 and 0.05 in ln)."""
    path = params_file(tmp_path, "crossing", arms=list(arms), seeds=list(seeds), design={})
    params = load_params(path)
    truth = Planted("dose", 1.0, lr_laws, speedups=tuple(speedups.items()))
    world = World(loss_model(params), truth, params.train.eval_every_tokens, np.random.default_rng(7))
    noise = np.random.default_rng(3)
    drawn: dict[tuple[str, int], tuple[float, float]] = {}
    for spec in compared_runs(params):
        write_result(tmp_path, world.result_of(spec))
        k, a = drawn.setdefault((spec.arm, spec.seed), tuple(noise.standard_normal(2)))
        plant_mechanisms(tmp_path, spec, kappas[spec.arm] * math.exp(0.1 * k),
                         RATE * angles[spec.arm] * math.exp(0.05 * a), growth)
    assert main(["speedup", CELL, "--params", str(path), "--root", str(tmp_path)]) == 0
    return json.loads((tmp_path / "results" / "speedup" / f"{CELL}.json").read_text())


def on_kappa_line(kappas: dict[str, float], slope: float = -0.5) -> dict[str, float]:
    """S = (kappa / gpt's)^slope: the conditioning account's dose-response."""
    return {arm: (k / GPT_KAPPA) ** slope for arm, k in kappas.items()}


def statuses(account: dict) -> dict[str, str]:
    return {arm: e["status"] for arm, e in account["arms"].items()}


# gpt-angle turned at ngpt's angle and conditioned like ngpt (as on the smoke grid: its head kappa x0.355 of
# gpt's); ngpt-angle keeps ngpt's conditioning at gpt's angle
KAPPAS = {"gpt": GPT_KAPPA, "gpt-rownorm": 900.0, "gpt-orth": 30.0, "ngpt": 220.0, "gpt-angle": 640.0,
          "ngpt-angle": 260.0}
ANGLES = {"gpt": 1.0, "gpt-rownorm": 1.5, "gpt-orth": 1.2, "ngpt": 4.0, "gpt-angle": 4.0, "ngpt-angle": 1.0}


def test_a_conditioning_world_reads_consistent_with_conditioning_where_gpt_angle_is_conditioned_and_fast(
        tmp_path):
    """S follows kappa, ngpt on the line, gpt-angle conditioned towards ngpt and fast: the measured account
    is consistent, where the label-based reading (gpt-angle predicted as slow as gpt) reads inconsistent."""
    doc = planted_cell(tmp_path, KAPPAS, ANGLES, on_kappa_line(KAPPAS))
    found = doc["dose_response"]
    kappa, angle = found["accounts"][KAPPA_ACCOUNT], found["accounts"][ANGLE_ACCOUNT]
    assert kappa["reading"] == CONSISTENT, kappa["words"]
    assert set(statuses(kappa).values()) == {"baseline", ON_LINE}
    lo, hi = kappa["slope"]["interval"]
    assert lo < -0.5 < hi < 0 and kappa["slope"]["estimate"] == pytest.approx(-0.5, abs=0.05)
    assert kappa["fitted_arms"] == sorted(a for a in ARMS if a != "gpt") and not kappa["excluded"]
    # the angle account: ngpt-angle at gpt's angle and gpt-orth at about it, both fast, depart from its line
    assert angle["reading"] == INCONSISTENT and statuses(angle)["ngpt-angle"] == DEPARTS
    assert "ngpt-angle x" in angle["words"]
    assert found["distinguishable"]["verdict"] is True
    assert found["level"] == 0.95 and "bootstrap" in found["method"] and "arm means" in found["method"]
    assert len(found["points"]) == 6 * 4
    # the cell's headline reads the account from the fit: consistent, where its label pattern (gpt-orth as
    # fast as ngpt) reads inconsistent, as the headline did before
    headline = doc["reading"]
    conditioning = headline["accounts"]["conditioning"]
    assert conditioning["source"] == "measured" and conditioning["reading"] == CONDITIONING.consistent
    assert conditioning["words"] == kappa["words"] and conditioning["by_labels"] == CONDITIONING.inconsistent
    assert headline["pattern_reading"] == CONDITIONING.consistent
    assert headline["reading"].startswith(CONDITIONING.consistent + "; ")
    assert headline["accounts"]["effective learning rate"]["source"] == "measured"
    assert headline["accounts"]["norm"]["source"] == "construction"


def test_kappa_growing_with_tokens_is_read_at_the_common_token_count(tmp_path):
    """The conditioning world with kappa ~ tokens^1.5 and the arms' estimate runs ending at different
    budgets: every point's ln kappa is read at T_common, so the line keeps its slope; each run's last kappa
    would have moved the arms trained longest a factor 2^1.5 or more up their x-axis."""
    doc = planted_cell(tmp_path, KAPPAS, ANGLES, on_kappa_line(KAPPAS), growth=1.5)
    common, found = doc["kappa_common"], doc["dose_response"]
    ends = {e["run"].split("-t")[1].split("-")[0] for entries in common["arms"].values() for e in entries}
    assert len(ends) > 1 and common["tokens"] == min(map(int, ends))
    read = {(arm, e["seed"]): e[HEADS]["kappa"] for arm, entries in common["arms"].items() for e in entries}
    assert all(p["x_kappa"] == pytest.approx(math.log(read[p["arm"], p["seed"]])) for p in found["points"])
    kappa = found["accounts"][KAPPA_ACCOUNT]
    assert kappa["reading"] == CONSISTENT, kappa["words"]
    assert kappa["slope"]["estimate"] == pytest.approx(-0.5, abs=0.05)


def test_an_angle_world_reads_consistent_with_the_angle_and_inconsistent_with_conditioning(tmp_path):
    """S follows the angle per step (S = angle^0.75), kappa varied independently of it: the cell's headline
    reads the effective-learning-rate account consistent from every arm's measured angle, gpt-orth's
    included (its label pattern, gpt-angle and ngpt-angle alone, would read it too here)."""
    kappas = {**KAPPAS, "gpt-angle": 1500.0}  # gpt-angle keeps gpt's conditioning
    speedups = {arm: a ** 0.75 for arm, a in ANGLES.items()}
    doc = planted_cell(tmp_path, kappas, ANGLES, speedups)
    found = doc["dose_response"]
    kappa, angle = found["accounts"][KAPPA_ACCOUNT], found["accounts"][ANGLE_ACCOUNT]
    assert angle["reading"] == CONSISTENT, angle["words"]
    assert angle["slope"]["interval"][0] > 0 and angle["slope"]["estimate"] == pytest.approx(0.75, abs=0.08)
    assert angle["fitted_arms"] == sorted(a for a in ARMS if a != "gpt")  # gpt-orth's angle among them
    assert kappa["reading"] == INCONSISTENT and statuses(kappa)["gpt-angle"] == DEPARTS
    assert "gpt-angle x" in kappa["words"]
    accounts = doc["reading"]["accounts"]
    assert accounts[ANGLE_ACCOUNT]["source"] == "measured"
    assert accounts[ANGLE_ACCOUNT]["reading"] == EFFECTIVE_LR.consistent
    assert accounts[KAPPA_ACCOUNT]["reading"] == CONDITIONING.inconsistent


def test_the_conditioning_square_alone_reads_the_angle_account_from_measured_angles_and_drops_the_clause(
        tmp_path):
    """Without the angle arms, the effective-learning-rate account is read from the four arms' measured
    angles, gpt-orth's included (no label pattern predicts gpt-orth by its name), and the confound clause,
    which stood in for it, is not said."""
    square = ARMS[:4]
    speedups = {arm: a ** 0.75 for arm, a in ANGLES.items() if arm in square}
    doc = planted_cell(tmp_path, KAPPAS, ANGLES, speedups, arms=square)
    angle, reading = doc["dose_response"]["accounts"][ANGLE_ACCOUNT], doc["reading"]
    assert sorted(angle["arms"]) == sorted(square) and angle["slope"]["estimate"] is not None
    entry = reading["accounts"][ANGLE_ACCOUNT]
    assert entry["source"] == "measured" and entry["reading"] == EFFECTIVE_LR.sentence(
        EFFECTIVE_LR.measured(angle)) and entry["words"] == angle["words"]
    assert doc["rivals"]["primary"]["verdict"] is not None  # the rates were there: the clause had a verdict
    assert reading["effective_lr_clause"] is None and "effective learning rate:" not in reading["reading"]
    assert entry["reading"] in reading["reading"] or EFFECTIVE_LR.sentence(entry["reading"]) in \
        reading["reading"]


def test_kappa_and_angle_moving_together_cannot_tell_the_accounts_apart(tmp_path):
    """Every arm's angle per step is a power of its kappa (ln angle = -0.5 ln(kappa / gpt's)), S follows
    both: each line fits, and neither says more than the other."""
    kappas = {**KAPPAS, "gpt-angle": 400.0, "ngpt-angle": 600.0}
    angles = {arm: (k / GPT_KAPPA) ** -0.5 for arm, k in kappas.items()}
    found = planted_cell(tmp_path, kappas, angles, on_kappa_line(kappas, -0.25))["dose_response"]
    apart = found["distinguishable"]
    assert apart["verdict"] is False and apart["r"] < -0.95
    assert "move together" in apart["reason"] and "gpt-orth (" in apart["reason"]
    for name in (KAPPA_ACCOUNT, ANGLE_ACCOUNT):
        account = found["accounts"][name]
        assert account["reading"] == CANNOT_TELL, account["words"]
        assert account["words"].startswith(CANNOT_TELL) and "would have to move by more than x" in \
            account["words"]


def test_a_slow_gpt_orth_at_kappa_one_reads_as_capacity_and_the_line_is_fitted_without_it(tmp_path):
    kappas = {**KAPPAS, "gpt-orth": 1.0}
    speedups = {**on_kappa_line(kappas), "gpt-orth": 1.0}  # as slow as gpt: the line predicts x42
    found = planted_cell(tmp_path, kappas, ANGLES, speedups)["dose_response"]
    kappa = found["accounts"][KAPPA_ACCOUNT]
    assert statuses(kappa)["gpt-orth"] == CAPACITY
    assert "gpt-orth" not in kappa["fitted_arms"]
    assert kappa["excluded"][0]["arm"] == "gpt-orth" and "fitted without it" in kappa["excluded"][0]["reason"]
    assert kappa["reading"] == CONSISTENT, kappa["words"]
    assert kappa["slope"]["estimate"] == pytest.approx(-0.5, abs=0.05)


def test_an_angle_arm_slowed_by_multiplier_one_off_its_optimum_is_left_out_of_the_kappa_line(tmp_path):
    """gpt-angle conditioned like gpt (S 1 at its own best learning rate) but with its optimum at half gpt's:
    at multiplier 1 (ngpt's chosen learning rate) it runs slower than its kappa predicts, for a reason the
    conditioning account does not speak to, and its tuned multiplier shows it."""
    kappas = {**KAPPAS, "gpt-angle": GPT_KAPPA}
    doc = planted_cell(tmp_path, kappas, ANGLES, on_kappa_line(kappas),
                       lr_laws=(("gpt-angle", LrLaw(optimum=0.5)),))
    tuned = doc["arms"]["gpt-angle"]["tuned_multiplier"]["multiplier"]
    assert tuned < 1
    kappa = doc["dose_response"]["accounts"][KAPPA_ACCOUNT]
    assert statuses(kappa)["gpt-angle"] == OFF_OPTIMUM, kappa["words"]
    assert kappa["arms"]["gpt-angle"]["residual"]["interval"][1] < -math.log(1.25)  # well below the line
    assert "gpt-angle" not in kappa["fitted_arms"]
    reason = next(e["reason"] for e in kappa["excluded"] if e["arm"] == "gpt-angle")
    assert reason.startswith(OFF_OPTIMUM) and f"(x{tuned:g})" in reason
    assert kappa["reading"] == CONSISTENT, kappa["words"]
    # on the angle line multiplier 1 is the manipulation itself: there gpt-angle departs (it turns like ngpt
    # and runs slower than gpt)
    angle = doc["dose_response"]["accounts"][ANGLE_ACCOUNT]
    assert statuses(angle)["gpt-angle"] == DEPARTS and angle["reading"] == INCONSISTENT


def test_a_handicap_of_fact_leaves_an_arm_out_where_not_shown_on_the_line_one_of_claim_where_shown_below():
    """Planted points, an arm straddling the band's lower edge (x0.8 of the kappa line, margin x1.25): an
    angle arm off its optimum is left out (its handicap is a fact); gpt-orth stays in, not resolved (its
    capacity cost is a claim its interval does not carry); an off-optimum arm above the line departs."""
    rng = np.random.default_rng(0)
    # gpt-orth and gpt-angle near gpt's kappa: little leverage on the line, so their residual is their shift
    kappas = {"gpt": GPT_KAPPA, "ngpt": 220.0, "gpt-pc4": 300.0, "gpt-orth": 900.0, "gpt-angle": 900.0}
    shift = {"gpt-orth": math.log(0.8), "gpt-angle": math.log(0.8)}

    def pts(shift: dict[str, float]) -> list[dict]:
        return [{"arm": arm, "seed": s, "x_kappa": math.log(k) + rng.normal(0, 0.02), "x_angle": None,
                 "y": 0.0 if arm == "gpt" else -0.5 * math.log(k / GPT_KAPPA) + shift.get(arm, 0.0)
                 + rng.normal(0, 0.08)} for arm, k in kappas.items() for s in range(4)]

    fits, _ = read_points(pts(shift), "gpt", 1.25, off_optimum={"gpt-angle": 0.5})
    kappa = fits[KAPPA_ACCOUNT]
    assert statuses(kappa)["gpt-angle"] == OFF_OPTIMUM and "gpt-angle" not in kappa["fitted_arms"]
    reason = kappa["excluded"][0]["reason"]
    assert "is not shown on or above" in reason and "(x0.5)" in reason
    lo, hi = (float(x) for x in reason.split("[")[1].split("]")[0].split(", "))
    assert lo < 1 / 1.25 < hi  # its interval against the others' line reaches across the lower edge
    lo, hi = kappa["arms"]["gpt-orth"]["residual"]["interval"]
    assert lo < -math.log(1.25) < hi
    assert statuses(kappa)["gpt-orth"] == NOT_RESOLVED and "gpt-orth" in kappa["fitted_arms"]
    assert kappa["reading"] == NOT_RESOLVED
    fits, _ = read_points(pts({"gpt-angle": math.log(1.6)}), "gpt", 1.25, off_optimum={"gpt-angle": 0.5})
    assert statuses(fits[KAPPA_ACCOUNT])["gpt-angle"] == DEPARTS  # a handicap cannot make an arm faster
    assert fits[KAPPA_ACCOUNT]["reading"] == INCONSISTENT


def test_fewer_than_three_arms_give_no_fit(tmp_path):
    found = planted_cell(tmp_path, KAPPAS, ANGLES, on_kappa_line(KAPPAS), arms=["gpt", "ngpt"],
                         seeds=(0, 1))["dose_response"]
    for name in (KAPPA_ACCOUNT, ANGLE_ACCOUNT):
        account = found["accounts"][name]
        assert account["reading"] == NO_FIT and account["slope"]["estimate"] is None
        assert "2 arm(s)" in account["words"]


def test_the_intervals_cover_a_planted_line_about_as_stated():
    """200 planted cells of a pure line ln S = -0.5 (ln kappa - ln kappa_gpt), 5 arms x 4 seeds, ln kappa
    measured with sd 0.15 and ln S with sd 0.1 per seed: the slope's 95% interval covers -0.5 in 0.96 of
    them, ngpt's residual interval 0 in 0.905 (the module docstring's figures)."""
    rng = np.random.default_rng(1)
    true = {"gpt": GPT_KAPPA, "gpt-rownorm": 900.0, "ngpt": 220.0, "gpt-angle": 250.0, "ngpt-angle": 600.0}
    slope_hits = residual_hits = 0
    for draw in range(200):
        pts = [{"arm": arm, "seed": s, "x_kappa": math.log(k) + rng.normal(0, 0.15), "x_angle": None,
                "y": 0.0 if arm == "gpt" else -0.5 * math.log(k / GPT_KAPPA) + rng.normal(0, 0.1)}
               for arm, k in true.items() for s in range(4)]
        fit = fit_account(pts, PREDICTORS[0], "gpt", 1.25, seed=draw)
        lo, hi = fit["slope"]["interval"]
        slope_hits += lo <= -0.5 <= hi
        lo, hi = fit["arms"]["ngpt"]["residual"]["interval"]
        residual_hits += lo <= 0 <= hi
    assert 0.93 <= slope_hits / 200 <= 0.99
    assert 0.87 <= residual_hits / 200 <= 0.95


def test_the_report_draws_each_cells_dose_response_and_tables_the_slopes(tmp_path):
    """The report's section on a planted conditioning world: a figure per cell (both predictors, every arm,
    ngpt ringed, the lines and their bands), the slopes' table with each account's reading."""
    planted_cell(tmp_path, KAPPAS, ANGLES, on_kappa_line(KAPPAS))
    path = tmp_path / "params.yaml"
    grid = yaml.safe_load(path.read_text())
    grid["report"]["min_budget_for_claims"] = BUDGETS[0]  # the tiny grid may be read: the readings are shown
    path.write_text(yaml.safe_dump(grid, sort_keys=False))
    with plot.capture() as figures:
        rendered = render_report(load_params(path), tmp_path, path)
    write_report(rendered, tmp_path / "reports")
    figure = next(f for f in rendered.document.figures if f.id == f"dose_response_{CELL}")
    svg = figure.svg.decode()
    assert "ngpt (ringed)" in svg and all(f">{arm}<" in svg for arm in ARMS)
    drawn = next(f for f in figures if any("ln kappa" in ax.get_xlabel() for ax in f.axes))
    kappa_ax = next(ax for ax in drawn.axes if "ln kappa" in ax.get_xlabel())
    assert kappa_ax.get_title() == f"{KAPPA_ACCOUNT}\n{CONSISTENT}" and kappa_ax.collections  # the band
    table = (tmp_path / "reports" / "tables" / "dose_response.csv").read_text()
    assert table.count(CELL) >= 2 and "consistent with the account that conditioning" in table
    report = (tmp_path / "reports" / "report.md").read_text()
    assert "The accounts as dose-responses" in report
    assert f"{CELL}: consistent with the account that conditioning explains" in report


def planted_document(context: int, ngpt_x: float = -2.0, level: float = 0.95) -> SpeedupDocument:
    """A speed-up document whose kappa account has gpt at the origin and ngpt at ngpt_x (ln kappa against
    gpt's), and an angle account beside it: enough for the figure."""

    def entry(x: float, y: float) -> dict:
        return {"x": {"mean": x, "interval": [x - 0.1, x + 0.1]},
                "y": {"mean": y, "interval": [y - 0.1, y + 0.1]}}

    arms = {"gpt": entry(0.0, 0.0), "gpt-rownorm": entry(-0.5, 0.3), "ngpt": entry(ngpt_x, 1.1)}
    accounts = {p.account: {"account": p.account, "reading": CONSISTENT, "words": CONSISTENT,
                            "predictor": p.label, "predicted_sign": "negative",
                            "slope": {"estimate": -0.55, "interval": [-0.7, -0.4]},
                            "fitted_arms": ["gpt-rownorm", "ngpt"], "excluded": [], "arms": arms}
                for p in PREDICTORS}
    found = {"level": level, "accounts": accounts, "distinguishable": {"verdict": True, "reason": None}}
    return SpeedupDocument.from_dict({"cell": "planted", "context": context, "baseline": "gpt",
                                      "arms_order": list(arms), "dose_response": found})


def test_the_papers_claim_is_drawn_as_a_line_through_gpt_and_ngpts_kappa_at_a_context_the_paper_reports():
    """At 4k the paper's x10 over gpt, if conditioning explains it, is the line through gpt's (0, 0) and
    (ngpt's ln kappa, ln 10): slope ln 10 / -2, dashed in the ln kappa panel only, labelled and captioned;
    at a context the paper gives no figure for (64), no such line."""
    doc = planted_document(4096)
    kappa = doc.dose_response["accounts"][KAPPA_ACCOUNT]
    x0, y0, slope, label = paper_line(doc, kappa)
    assert (x0, y0) == (0.0, 0.0) and slope == pytest.approx(math.log(10) / -2.0)
    assert label == "paper: x10 at 4k context, through ngpt's kappa"
    with plot.capture() as figures:
        figure = dose_figure("planted", doc)
    dashed = {ax.get_xlabel(): [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
              for ax in figures[0].axes if ax.get_xlabel()}
    (kappa_lines,) = (v for k, v in dashed.items() if "ln kappa" in k)
    assert [ln.get_label() for ln in kappa_lines] == [label]
    assert not any(v for k, v in dashed.items() if "ln kappa" not in k)  # not in the angle panel
    (xs, ys) = kappa_lines[0].get_data()
    assert (ys[-1] - ys[0]) / (xs[-1] - xs[0]) == pytest.approx(math.log(10) / -2.0)
    assert label in figure.svg.decode() and "paper: x10 at 4k context" in figure.caption
    at8k = planted_document(8192, ngpt_x=-3.0)
    _, _, slope8k, _ = paper_line(at8k, at8k.dose_response["accounts"][KAPPA_ACCOUNT])
    assert slope8k == pytest.approx(math.log(20) / -3.0)
    # no figure in the paper for this context: no line, no word of it
    bare = planted_document(64)
    assert paper_line(bare, bare.dose_response["accounts"][KAPPA_ACCOUNT]) is None
    with plot.capture() as figures:
        figure = dose_figure("planted", bare)
    assert not any(ln.get_linestyle() == "--" for ax in figures[0].axes for ln in ax.get_lines())
    assert "paper:" not in figure.caption


def test_the_table_and_figure_state_the_level_the_file_states(tmp_path):
    """A document at level 0.9: the slopes table's note and the figure's caption say 90%, not 95%."""
    params = load_params(params_file(tmp_path, "crossing"))
    doc = planted_document(4096, level=0.9)
    results = Results(tmp_path, params, None, {}, {"planted": doc}, None)
    note = slopes_table(results).note
    assert "its level in the file: 90%" in note and "95%" not in note
    with plot.capture():
        caption = dose_figure("planted", doc).caption
    assert "90% percentile bootstrap" in caption and "95%" not in caption
