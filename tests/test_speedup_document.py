"""The one typed reader of results/speedup/<cell>.json (speedup/document.py), on a document the speed-up stage
wrote, and the Holm adjustment across cells that reads through it (speedup/across_cells.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from support.synthetic import settings_of
from test_speedup_rivals import CELL, CONDITIONED_FAST, grid, planted_results

from ngptlab.errors import ResultsError
from ngptlab.results import write_json
from ngptlab.speedup.across_cells import primary_across_cells
from ngptlab.speedup.arm_records import Speedup
from ngptlab.speedup.cell import analyse_cell
from ngptlab.speedup.document import SpeedupDocument, read_document
from ngptlab.speedup.equivalence import verdict_from_p_values
from ngptlab.speedup.inference import SIZE_KEYS
from ngptlab.speedup.multiplicity import holm_claims
from ngptlab.speedup.reading import (
    CANNOT_TELL,
    CAPACITY,
    CONDITIONING,
    CONSISTENT,
    family_words,
    reading_words,
    short,
)


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[dict, Path]:
    """A cell's document as the speed-up stage writes it (the 2x2, three seeds, rates logged); its path."""
    path = tmp_path_factory.mktemp("document") / f"{CELL}.json"
    write_json(path, analyse_cell(settings_of(grid()), CELL, planted_results(CONDITIONED_FAST)))
    return json.loads(path.read_text()), path


def test_the_reader_gives_each_arms_speedup_with_its_interval_bound_verdict_and_seeds(written):
    raw, path = written
    doc = read_document(path)
    assert (doc.cell, doc.baseline, doc.arms_order) == (CELL, "gpt", tuple(raw["arms_order"]))
    assert doc.seeds == tuple(raw["seeds"]) and doc.equivalence_margin == raw["equivalence_margin"]
    for arm, entry in raw["arms"].items():
        s, typed = entry["speedup"], doc.arms[arm].speedup
        assert (typed.value, typed.bound, typed.display) == (s["value"], s["bound"], s["display"])
        assert typed.verdict == s["verdict"]
        assert typed.interval == (tuple(s["interval"]) if s["interval"] else None)
        assert typed.log_sd == (s["log"] or {}).get("sd") and typed.method == s["method"]
        assert {key: n.count for key, n in typed.seeds_needed.items()} == {key: s[key] for key in SIZE_KEYS}
        assert [(p.seed, p.speedup.value) for p in doc.arms[arm].per_seed] == [
            (p["seed"], p["speedup"]["value"]) for p in entry["per_seed"]]
        assert doc.arms[arm].cheap.display == entry["cheap"]["speedup"]["display"]
    assert [r.run for r in doc.runs if r.best_lr_for_budget] == [
        r["run"] for r in raw["runs"] if r["best_lr_for_budget"]]


def test_the_reader_gives_the_contrasts_factorial_reading_and_rivals(written):
    raw, path = written
    doc = read_document(path)
    for c, typed in zip(raw["contrasts"], doc.contrasts, strict=True):
        assert (typed.a, typed.b, typed.ratio, typed.verdict) == (c["a"], c["b"], c["ratio"], c["verdict"])
        assert typed.log_interval == tuple(c["difference_log"]["interval"])
        assert typed.interval == tuple(c["interval"]) and typed.log_sd == c["difference_log"]["sd"]
    for name, e in raw["factorial"]["effects"].items():
        typed = doc.factorial.effects[name]
        assert (typed.ratio, typed.log_estimate) == (e["estimate"]["ratio"], e["estimate"]["ln"])
        assert typed.verdict == e["verdict"]
        assert typed.p_values == e["p_values"] and typed.log_interval == tuple(e["log_interval"])
    r = raw["reading"]
    assert (doc.reading.primary, doc.reading.words) == ("conditioning", r["reading"])
    assert doc.reading.effect.p_values == r["p_values"] and doc.reading.confounded_by_effective_lr is True
    # every arm's angle measured: the angle line reads the effective learning rate, no clause beside it
    assert doc.reading.effective_lr_clause is None
    assert "by the effective learning rate:" not in doc.reading.words
    accounts = doc.reading.accounts
    assert accounts["effective learning rate"]["source"] == "measured"
    assert doc.reading.pattern_words == r["pattern_reading"] == accounts["conditioning"]["reading"]
    assert doc.rivals.primary.verdict == "confounded"
    assert doc.rivals.angular_rates == {arm: e["angular_rate"] for arm, e in raw["rivals"]["arms"].items()}
    assert SpeedupDocument.from_dict(raw) == doc  # a document in memory reads as its file does


def test_inf_reads_back_as_a_number_and_a_further_baseline_has_its_own_speedups():
    s = Speedup.from_dict({"value": "inf", "bound": ">", "display": ">inf", "interval": [2.0, "inf"]})
    assert s.value == math.inf and s.interval == (2.0, math.inf)
    arms = {"gpt": {"speedup": {"value": 1.0}}, "ngpt": {"speedup": {"value": 3.0}}}
    further = {"targets": [], "contrasts": [],
               "arms": {"gpt": {"speedup": {"value": 0.5}}, "ngpt": {"speedup": {"value": 1.5}}}}
    doc = SpeedupDocument.from_dict({"cell": "c", "baseline": "gpt", "arms": arms,
                                     "by_baseline": {"gpt-qknorm": further}})
    assert doc.against("gpt") is doc and doc.against("gpt-qknorm").baseline == "gpt-qknorm"
    assert doc.against("gpt-qknorm").arms["ngpt"].speedup.value == 1.5
    assert doc.arms["ngpt"].speedup.value == 3.0


def test_a_file_that_is_not_a_speedup_document_is_one_error_naming_it(tmp_path):
    path = tmp_path / "c.json"
    with pytest.raises(ResultsError, match=f"{path}: speed-up not found"):
        read_document(path)
    path.write_text(json.dumps({"cell": "c", "arms": {"gpt": {"per_seed": [{"speedup": {}}]}}}))
    with pytest.raises(ResultsError, match=f"{path}: not a speed-up document \\(KeyError"):
        read_document(path)
    with pytest.raises(ResultsError, match=f"{path}: missing key 'targets'"):
        read_document(path, required=("arms", "targets"))


def reading(p_values: dict | None) -> dict:
    return {"primary": "conditioning", "predicted": "exceeds", "margin": 1.25, "level": 0.95, "n_seeds": 3,
            "estimate": {"ln": 0.5, "ratio": math.exp(0.5)}, "p_values": p_values, "reading": "not resolved"}


def test_holm_across_cells_adjusts_the_cells_with_an_interval_and_reads_again():
    p = {"a": {"exceeds": 0.01, "falls_short": 0.99, "equivalent": 0.9},
         "b": {"exceeds": 0.02, "falls_short": 0.98, "equivalent": 0.8}}
    documents = {cell: SpeedupDocument.from_dict({"cell": cell, "reading": reading(p[cell])}) for cell in p}
    documents["no interval"] = SpeedupDocument.from_dict({"cell": "no interval", "reading": reading(None)})
    documents["older"] = SpeedupDocument.from_dict({"cell": "older"})  # no reading: in no family
    documents["missing"] = None
    rows = primary_across_cells(documents)
    assert [row.cell for row in rows] == ["a", "b", "no interval"] and {row.n_cells for row in rows} == {2}
    adjusted = holm_claims(p)
    for row in rows[:2]:
        assert row.holm_p == adjusted[row.cell] and row.holm_p["exceeds"] == pytest.approx(0.02)
        assert row.holm_verdict == verdict_from_p_values(adjusted[row.cell], 1.25)
        assert row.holm_verdict == "exceeds by more than x1.25"
        assert row.holm_reading == reading_words("conditioning", adjusted[row.cell])
    assert rows[2].holm_p is None and rows[2].holm_reading == "not resolved"


def test_the_family_reading_compares_the_short_reading_whatever_the_words_add():
    """A measured reading may say more than "consistent" (the capacity cost): across cells it stays
    consistent only where the primary effect's adjusted claim is the predicted one, by its short word."""
    words = f"{CONSISTENT} ({CAPACITY})"
    assert family_words(words, "conditioning", {"exceeds": 0.001, "falls_short": 0.9, "equivalent": 0.9}) \
        == words
    assert family_words(words, "conditioning", {"exceeds": 0.2, "falls_short": 0.9, "equivalent": 0.9}) \
        == "not resolved"
    cannot = CONDITIONING.cannot_tell
    assert short(cannot) == CANNOT_TELL and family_words(cannot, "conditioning", None) == cannot
