"""The report stage on synthetic results (tests/support/synthetic.py): a complete grid and one with holes.

The synthetic tree is written by the real condition analysis (planted spectra) and the real speed-up stage,
so the report reads exactly the files the pipeline writes. No checkpoint exists anywhere in these trees:
rendering from results/ alone is part of what is tested.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from support import synthetic
from support.figures import check_figure, labels_overlap
from support.synthetic import settings_of

from ngptlab import layout, paper
from ngptlab.cli import main
from ngptlab.condition.reference import gaussian_condition
from ngptlab.config.load import load_params
from ngptlab.errors import ResultsError
from ngptlab.grid.enumeration import enumerate_cells, enumerate_runs
from ngptlab.grid.resources import run_shape
from ngptlab.models.size import causal_flops_per_token
from ngptlab.report.command import Rendered, render_report, write_report
from ngptlab.report.kit import plot
from ngptlab.report.kit.crossarm import arm_table, cross_arm_table
from ngptlab.report.kit.load import load_results
from ngptlab.report.kit.render import inline_html
from ngptlab.report.kit.table import fmt_num, fmt_sig
from ngptlab.report.sections import conditioning, loss
from ngptlab.report.sections.settle import compare_to_baseline
from ngptlab.report.sections.settle_evidence import SETTLE_METRICS, settle_figure
from ngptlab.results import train_dir
from ngptlab.speedup.arm_records import Speedup
from ngptlab.speedup.document import read_document

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py



SECTIONS = ["what-was-run", "speedup", "loss-curves", "conditioning", "conditioning-embeddings",
            "conditioning-layers", "conditioning-references", "conditioning-layers34",
            "conditioning-renormalization", "rivals", "settle-it", "caveats", "provenance"]
REVISION = "test-revision"
PEAK_TFLOPS = 0.05  # the complete grid's timings: a declared peak, so every run has an MFU


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def complete_render(tmp_path_factory) -> tuple[Path, dict, Path, Rendered]:
    """One cell at context 1024 (where the paper has a number), 2 seeds, claims allowed; rendered once."""
    root = tmp_path_factory.mktemp("complete")
    params = synthetic.synthetic_params(seeds=(0, 1), min_budget_for_claims=1000)
    params["train"]["contexts"] = [1024]
    params_path = synthetic.write_results(root, params, peak_tflops=PEAK_TFLOPS)
    rendered = render_report(settings_of(params), root, params_path, code_revision=REVISION)
    write_report(rendered, root / "reports")
    return root, params, params_path, rendered


@pytest.fixture(scope="module")
def complete(complete_render) -> tuple[Path, dict, Path]:
    return complete_render[:3]


@pytest.fixture(scope="module")
def holes(tmp_path_factory) -> tuple[Path, dict, Path]:
    """Two cells, one seed, default (large) claims threshold; missing, diverged and unanalysed runs."""
    root = tmp_path_factory.mktemp("holes")
    params = synthetic.synthetic_params(seeds=(0,), budgets=(16384, 65536))
    names = {s.name for s in enumerate_runs(settings_of(params))}
    missing = ("cpu-4l-ctx64-gpt-orth-t65536-lr0.003-s0",)
    diverged = ("cpu-4l-ctx128-ngpt-t65536-lr0.01-s0", "cpu-4l-ctx128-gpt-t16384-lr0.01-s0")
    no_cond = ("cpu-4l-ctx128-gpt-lrm-t65536-lr0.003-s0",)
    # runs trained before timing files existed: every run of ctx64, and one of ctx128; no peak (no MFU)
    no_timing = (*sorted(name for name in names if "-ctx64-" in name), "cpu-4l-ctx128-gpt-t65536-lr0.003-s0")
    assert set(missing + diverged + no_cond + no_timing) <= names
    params_path = synthetic.write_results(root, params, missing=missing, diverged=diverged,
                                          no_conditioning=no_cond, no_timing=no_timing, meta=False)
    rendered = render_report(settings_of(params), root, params_path, code_revision=REVISION)
    write_report(rendered, root / "reports")
    return root, params, params_path


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# ----------------------------------------------------------------------------------------------------------
# Complete grid


def test_outputs_sections_in_order_and_self_contained(complete):
    root, _, _ = complete
    out = root / "reports"
    html = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    for text, pattern in ((html, r'<h[23] id="([a-z0-9-]+)"'), (md, r'<a id="([a-z0-9-]+)"></a>\n\n#')):
        found = [a for a in re.findall(pattern, text) if a in SECTIONS]
        assert found == SECTIONS
    # Self-contained: every figure inlined, nothing fetched, no script.
    figures = sorted(p.stem for p in (out / "figures").glob("*.svg"))
    # final loss, loss curves, 5 conditioning, rivals, settle, dose-response (one cell)
    assert len(figures) == 10
    assert len(re.findall(r'<img src="data:image/svg\+xml;base64,', html)) == len(figures)
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert "<script" not in html and "<link" not in html
    # The markdown links its figures and tables by relative path, and they exist.
    for link in re.findall(r"\]\(((?:figures|tables)/[^)]+)\)", md):
        assert (out / link).is_file(), link
    assert "Too small to conclude" not in md


def test_speedup_table_is_the_speedup_stage_beside_the_paper(complete):
    root, params, _ = complete
    doc = json.loads((root / "results" / "speedup" / "cpu-4l-ctx1024.json").read_text())
    rows = {r["arm"]: r for r in read_csv(root / "reports" / "tables" / "speedup.csv")}
    assert set(rows) == set(params["train"]["arms"])
    for arm, entry in doc["arms"].items():
        s = entry["speedup"]
        if s["value"] is None:
            assert rows[arm]["speedup"] == ""
            continue
        assert float(rows[arm]["speedup"]) == pytest.approx(float(s["value"]), rel=0, abs=0)
        assert rows[arm]["bound"] == (s["bound"] or "")
        if arm == doc["baseline"]:
            assert rows[arm]["display"] == "1 (baseline)"
        elif s["interval"]:
            assert float(rows[arm]["interval_lo"]) == s["interval"][0]
            assert rows[arm]["display"].startswith(f"{fmt_sig(s['value'])} [")  # the table's precision
    # The planted speed-ups come back (log-interpolation between budgets: within 10 %).
    for arm in ("ngpt", "gpt-orth", "gpt-lrm"):
        assert float(rows[arm]["speedup"]) == pytest.approx(synthetic.planted_speedup(arm), rel=0.1)
    # gpt-nowd is slower than gpt: against gpt's loss at the middle reference (65,536 tokens, measurable
    # 0.25 to 4) a number below 1, not the bound "<1" the largest budget as reference gives.
    assert rows["gpt-nowd"]["bound"] == "" and "(bound)" not in rows["gpt-nowd"]["display"]
    assert float(rows["gpt-nowd"]["speedup"]) == pytest.approx(synthetic.planted_speedup("gpt-nowd"), rel=0.1)
    # Whether each arm's learning rate was tuned: the synthetic sweeps end at the planted best (3e-3).
    assert rows["gpt"]["tuned"].startswith("no: best lr at the sweep's bottom at 16,384")
    assert rows["gpt-orth"]["tuned"].startswith("no: best lr at the sweep's top at 16,384")  # one lr: both
    # The paper's 4x at context 1024, with its source, on the nGPT row only.
    ref = paper.paper_speedup(1024)
    assert ref["factor"] == 4
    assert rows["ngpt"]["paper"] == "~4x" and "Fig. 2" in rows["ngpt"]["paper_where"]
    assert all(rows[a]["paper"] == "" for a in rows if a != "ngpt")
    pivot = read_csv(root / "reports" / "tables" / "speedup_by_cell.csv")
    assert pivot[0]["paper_ngpt"].startswith("~4x at 1,024")


def test_conditioning_tables_follow_the_condition_stage(complete):
    root, _, _ = complete
    rows = {r["arm"]: r for r in read_csv(root / "reports" / "tables" / "conditioning_effective.csv")}
    for arm, (_, kappa) in synthetic.PLANTED.items():
        cond = json.loads((root / "results" / "conditioning" / f"{rows[arm]['run']}.json").read_text())
        headline = cond["headline"]["effective"]
        assert float(rows[arm]["attn_condition_median"]) == headline["attn_condition_median"]
        assert float(rows[arm]["attn_condition_median"]) == pytest.approx(kappa, rel=1e-6)  # planted
        assert rows[arm]["run"].endswith("-t262144-lr0.003-s0")  # best lr, largest budget, smallest seed
    layers = read_csv(root / "reports" / "tables" / "layers34.csv")
    paper_rows = [r for r in layers if r["source"].startswith("paper")]
    quoted = {(r["source"], r["arm"], float(r["layer3_q_condition"]), float(r["layer3_k_condition"]),
               float(r["layer4_q_condition"]), float(r["layer4_k_condition"])) for r in paper_rows}
    assert quoted == {  # the legends of the paper's Figs. 11 (layer 3) and 12 (layer 4)
        ("paper (0.5B)", "gpt", 1625822.6972, 1878718.0663, 1500.1872, 1378.6081),
        ("paper (0.5B)", "ngpt", 3.7593, 4.4978, 3.043, 2.8612),
        ("paper (1B)", "gpt", 171580.2367, 122846.4196, 807005.0369, 722934.6929),
        ("paper (1B)", "ngpt", 13.0955, 9.8658, 4.1919, 3.8907)}
    renorm = read_csv(root / "reports" / "tables" / "renormalization.csv")
    variants = {r["variant"] for r in renorm if r["arm"] == "gpt-scalar"}
    assert variants == {"effective", "renormalized", "underlying"}
    assert {r["variant"] for r in renorm if r["arm"] == "gpt"} == {"effective", "renormalized", "underlying"}


def test_figures_mirror_the_papers_per_head_spectra_and_fig4_panels(complete):
    root, _, _ = complete
    figs = root / "reports" / "figures"
    layers34 = (figs / "layers34_cpu-4l-ctx1024.svg").read_text()
    for layer in (3, 4):
        for kind in "QK":
            assert f"layer {layer}, {kind}: sorted singular values per head" in layers34
    # per arm, the median head's line and the band of its heads, in each of the 4 panels
    assert layers34.count('<path d="M') >= 2 * 4 * len(synthetic.PLANTED)
    embeddings = (figs / "embeddings_cpu-4l-ctx1024.svg").read_text()
    for name in ("input", "output"):
        for panel in ("row norms", "covariance eigenvalues", "pairwise dot products"):
            assert f"{name} embeddings: {panel}" in embeddings


def test_every_headline_kappa_has_its_init_and_gaussian_reference_beside_it(complete):
    root, _, _ = complete
    refs = read_csv(root / "reports" / "tables" / "references.csv")
    assert {r["arm"] for r in refs} == set(synthetic.PLANTED)
    metrics = {r["metric"] for r in refs}
    assert "κ attention (whole matrices), median" in metrics and "κ layer 4 K, median over heads" in metrics
    assert all(r["trained"] and r["init"] and r["gaussian"] for r in refs)
    gpt = {r["metric"]: r for r in refs if r["arm"] == "gpt"}
    whole = gpt["κ attention (whole matrices), median"]
    cond = json.loads((root / "results" / "conditioning" / f"{whole['run']}.json").read_text())
    assert float(whole["trained"]) == pytest.approx(synthetic.PLANTED["gpt"][1], rel=1e-6)
    assert float(whole["init"]) == pytest.approx(synthetic.INIT_KAPPA, rel=1e-6)  # planted at init
    assert float(whole["gaussian"]) == cond["reference"]["gaussian"]["headline"]["attn_condition_median"]
    assert float(whole["gaussian"]) == gaussian_condition("sv", 64, 64)  # d_model 64 at cpu-4l
    head = gpt["κ attention, median over heads"]
    assert float(head["gaussian"]) == gaussian_condition("sv", 16, 64)  # one head: 16 rows of 64


def test_verdict_is_drawn_only_from_resolved_comparisons(complete):
    root, _, _ = complete
    md = (root / "reports" / "report.md").read_text()
    comparisons = {r["arm"]: r for r in read_csv(root / "reports" / "tables" / "comparisons.csv")}
    # Planted: gpt-orth 2.2x and gpt-rownorm 1.3x, both with seed intervals above ln 1.25, the margin an
    # arm's verdict must clear (the symmetric rule)
    faster = "faster by more than x1.25"
    assert comparisons["gpt-orth"]["verdict"] == comparisons["gpt-rownorm"]["verdict"] == faster
    # Against nGPT (3x) both fall short beyond the margin (paired contrasts, the symmetric rule).
    contrasts = {r["label"]: r for r in read_csv(root / "reports" / "tables" / "contrasts.csv")}
    short = "falls short by more than x1.25"
    assert contrasts["gpt-orth vs ngpt"]["verdict"] == contrasts["gpt-rownorm vs ngpt"]["verdict"] == short
    # The primary effect is the headline, with its interval, method and level; the reading is the account's
    # pattern, each prediction's status named: gpt-orth short of ngpt is shown, so the account fails.
    doc = json.loads((root / "results" / "speedup" / "cpu-4l-ctx1024.json").read_text())
    r = doc["reading"]
    verdict = md.split("**What the data show.**")[1].split("\n")[0]
    assert f"{r['verdict']}; the account's predictions: " in verdict and f"; so {r['reading']}" in verdict
    assert "gpt-orth vs ngpt shown not to hold" in verdict and "95% paired t on ln S over seeds" in verdict
    assert r["pattern_reading"].startswith("inconsistent")
    assert "2 seeds: every interval is a t-interval on ln S with 1 degree of freedom" in md


def test_compare_to_baseline_needs_the_whole_interval_on_one_side():
    def verdict(value, bound=None, interval=None):
        return compare_to_baseline(Speedup(value, bound, interval=interval))

    assert verdict(2.0, interval=(1.5, 2.5)) == "faster"
    assert verdict(0.5, interval=(0.4, 0.6)) == "slower"
    unresolved = "not distinguishable from 1"
    assert verdict(1.2, interval=(0.9, 1.5)) == unresolved
    # a bound alone is never a verdict, whichever side of 1 it lies
    for value, bound in [(3.0, ">"), (4.0, "<"), (0.8, "<"), (1.0, "<"), (1.0, ">"), (0.5, ">")]:
        assert verdict(value, bound) == "not resolved (a bound)"
    assert verdict(1.0, interval=(1.0, 1.3)) == unresolved
    assert verdict(0.9, interval=(0.7, 1.0)) == unresolved
    assert verdict(2.0) == "not resolved (one seed: no interval)"
    assert verdict(None) == "no estimate"


def test_provenance_traces_every_number_to_runs_and_hashes(complete_render):
    root, params, params_path, rendered = complete_render
    prov = json.loads((root / "reports" / "provenance.json").read_text())
    assert prov["report"]["code_revision"] == REVISION
    assert prov["report"]["params_sha256"] == sha256(params_path)
    # Every input named with its true sha256; every run with its summary's checkpoint and data hashes.
    for rel, digest in prov["inputs"].items():
        assert sha256(root / rel) == digest, rel
    meta = json.loads((root / "data" / "tokens" / params["train"]["source"] / "meta.json").read_text())
    assert prov["data"]["splits"]["train"]["sha256"] == meta["splits"]["train"]["sha256"]
    for spec in enumerate_runs(settings_of(params)):
        summary = json.loads((train_dir(root, spec) / "summary.json").read_text())
        run = prov["runs"][spec.name]
        assert run["checkpoint_sha256"] == summary["checkpoint_sha256"]
        assert run["data"]["train_sha256"] == meta["splits"]["train"]["sha256"]
        assert run["params"] == summary["params"] and run["code_revision"] == summary["code_revision"]
    # Every number in every table is a provenance number (same value, same runs), and is in the CSV.
    numbers = {n["id"]: n for n in prov["numbers"]}
    assert len(numbers) == len(prov["numbers"])  # ids are unique
    counted = 0
    for table in rendered.document.tables:
        rows = read_csv(root / "reports" / prov["tables"][table.id]["csv"])
        assert len(rows) == len(table.rows)
        for i, (row, csv_row) in enumerate(zip(table.rows, rows, strict=True)):
            for column, value in zip(table.columns, row, strict=True):
                if column in table.key or isinstance(value, bool) or not isinstance(value, int | float):
                    continue
                number = numbers[f"{table.id}/{table.row_key(i)}/{column}"]
                if math.isnan(value):
                    assert number["value"] is None and csv_row[column] == ""
                else:
                    assert float(csv_row[column]) == value
                    assert number["value"] == ("inf" if math.isinf(value) else value)
                assert number["runs"] == csv_row["runs"].split() == table.runs[i]
                assert set(number["runs"]) <= set(prov["runs"])
                counted += 1
    assert counted == len(numbers) > 500
    # A speed-up rests on the arm's best runs at every budget and on the baseline's target run.
    doc = json.loads((root / "results" / "speedup" / "cpu-4l-ctx1024.json").read_text())
    ngpt = numbers["speedup/cpu-4l-ctx1024/ngpt/speedup"]
    expected = {b["run"] for p in doc["arms"]["ngpt"]["per_seed"] for b in p["best"]}
    expected |= {r["run"] for t in doc["targets"] for r in t["runs"]}
    assert set(ngpt["runs"]) == expected
    assert set(prov["figures"]) == {p.stem for p in (root / "reports" / "figures").glob("*.svg")}


def test_render_is_deterministic_and_replaces_stale_files(complete, tmp_path):
    root, params, params_path = complete
    first = render_report(settings_of(params), root, params_path, code_revision=REVISION)
    out = root / "reports"
    assert {p: (out / p).read_bytes() for p in first.files} == first.files  # same as the fixture's render
    for svg in (out / "figures").glob("*.svg"):
        text = svg.read_text()
        assert "<dc:date>" not in text and "Date" not in text
    # A figure from an earlier render that this one does not produce is removed; nothing else is touched.
    (out / "figures" / "old_cell.svg").write_text("<svg/>")
    write_report(first, out)
    assert not (out / "figures" / "old_cell.svg").exists()
    assert sorted(p.name for p in out.rglob("*") if p.is_file()) == sorted(Path(p).name for p in first.files)


def test_cli_in_another_process_renders_the_same_bytes(complete, tmp_path):
    """`ngptlab report` in a fresh interpreter with another hash seed: byte for byte the fixture's report,
    once the code revision (the one input that differs: git here, a fixed string there) is aligned."""
    root, _, params_path = complete
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    cmd = [sys.executable, "-m", "ngptlab.cli", "report", "--params", str(params_path), "--root", str(root),
           "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    assert re.search(r"report\.html \(\d+ KiB, self-contained\).* in [0-9.]+ s", done.stdout)
    assert (out / "report.md").stat().st_mode & 0o044  # readable by others, not mkstemp's 0600
    revision = json.loads((out / "provenance.json").read_text())["report"]["code_revision"]
    assert revision != REVISION
    expected = {p.relative_to(root / "reports") for p in (root / "reports").rglob("*") if p.is_file()}
    assert {p.relative_to(out) for p in out.rglob("*") if p.is_file()} == expected
    for rel in expected:
        got = (out / rel).read_bytes().replace(revision.encode(), REVISION.encode())
        assert got == (root / "reports" / rel).read_bytes(), rel


def test_corrupt_input_is_a_clear_error_and_keeps_the_old_report(complete, tmp_path):
    root, params, params_path = complete
    out = tmp_path / "out"
    shutil.copytree(root / "reports", out)  # an earlier report, which a failed render must leave alone
    before = (out / "report.html").read_bytes()
    summary = train_dir(root, enumerate_runs(settings_of(params))[3]) / "summary.json"
    good = summary.read_text()
    try:
        summary.write_text(good[: len(good) // 2])
        with pytest.raises(ResultsError, match=re.escape(str(summary))):
            render_report(settings_of(params), root, params_path)
        assert main(["report", "--params", str(params_path), "--root", str(root), "--out", str(out)]) == 2
    finally:
        summary.write_text(good)
    assert (out / "report.html").read_bytes() == before


# ----------------------------------------------------------------------------------------------------------
# Holes: missing, diverged and unanalysed runs, a cell without speed-up, no meta.json, too small to conclude


def test_holes_are_shown_as_such(holes):
    root, _, _ = holes
    md = (root / "reports" / "report.md").read_text()
    assert "1 run is missing (failed, killed or not run" in md
    assert "`cpu-4l-ctx64-gpt-orth-t65536-lr0.003-s0`" in md
    assert "2 runs diverged" in md and "`cpu-4l-ctx128-ngpt-t65536-lr0.01-s0`" in md
    runs = {r["run"]: r for r in read_csv(root / "reports" / "tables" / "runs.csv")}
    assert runs["cpu-4l-ctx64-gpt-orth-t65536-lr0.003-s0"]["status"] == "missing"
    assert runs["cpu-4l-ctx128-ngpt-t65536-lr0.01-s0"]["status"] == "diverged"
    assert runs["cpu-4l-ctx128-gpt-lrm-t65536-lr0.003-s0"]["conditioning"] == "missing"
    # The cell with a missing run has no speed-up file: shown as missing, not invented.
    speedups = read_csv(root / "reports" / "tables" / "speedup.csv")
    ctx64 = [r for r in speedups if r["cell"] == "cpu-4l-ctx64"]
    assert len(ctx64) == 1 and ctx64[0]["display"] == "missing" and ctx64[0]["speedup"] == ""
    assert {r["arm"] for r in speedups if r["cell"] == "cpu-4l-ctx128"} == set(synthetic.PLANTED)
    # The arm without a run at the largest budget is named under the conditioning figures.
    assert "cpu-4l-ctx64: not shown: gpt-orth (no completed run at 65,536 tokens (missing))" in md
    assert "gpt-lrm (no conditioning result for `cpu-4l-ctx128-gpt-lrm-t65536-lr0.003-s0`)" in md
    data = {r["item"]: r["value"] for r in read_csv(root / "reports" / "tables" / "data.csv")}
    assert data["meta.json"] == "missing: data/tokens/shakespeare-news/meta.json"
    # ngpt's lr 0.01 diverged at the largest budget: the speed-up uses the learning rate that did not.
    best = json.loads((root / "results" / "speedup" / "cpu-4l-ctx128.json").read_text())
    top = [b for p in best["arms"]["ngpt"]["per_seed"] for b in p["best"] if b["budget"] == 65536]
    assert top and all(b["lr"] == 0.003 for b in top)


def test_compute_table_shows_each_cells_median_speed_from_the_timing_files(complete):
    root, params, _ = complete
    (row,) = [r for r in read_csv(root / "reports" / "tables" / "compute.csv") if r["cell"] != "all"]
    timings = [json.loads(p.read_text()) for p in sorted((root / "results" / "timing").glob("*/*.json"))]
    assert len(timings) == int(row["completed"]) and len({t["tokens_per_s"] for t in timings}) > 2
    tokens_per_s = statistics.median(t["tokens_per_s"] for t in timings)
    assert float(row["tokens_per_s"]) == tokens_per_s
    # MFU = tokens/s x FLOPs per token / peak, so its median sits at the median tokens/s
    mfu = tokens_per_s * timings[0]["flops_per_token"] / (PEAK_TFLOPS * 1e12)
    assert float(row["mfu"]) == pytest.approx(mfu, rel=1e-12)
    # beside it the causal MFU: the attention term counted half (6 N + 6 L d T), every run of the cell alike
    full = timings[0]["flops_per_token"]
    causal = mfu * causal_flops_per_token(full, run_shape(settings_of(params).train, "cpu-4l"), 1024) / full
    assert row["cell"] == "cpu-4l-ctx1024" and float(row["mfu_causal"]) == pytest.approx(causal, rel=1e-12)
    assert causal < mfu
    md = (root / "reports" / "report.md").read_text()
    assert "| tokens/s (median) | MFU (median) | causal MFU (median) |" in md
    assert f"| {int(tokens_per_s):,} | {mfu:.1%} | {causal:.1%} |" in md


def test_the_report_says_which_timing_files_it_read_and_that_they_are_no_result(complete):
    """Measured speed is no stage's input in either tool (a run trained again rewrites its timing file and
    reruns nothing), so the report names the timing files its speeds come from: their number and digest, in
    the compute table's note and provenance.json, and says so. A rewritten timing file changes both."""
    root, params, params_path = complete
    paths = sorted((root / "results" / "timing").rglob("*.json"))
    lines = "".join(f"{p.relative_to(root).as_posix()} {hashlib.sha256(p.read_bytes()).hexdigest()}\n"
                    for p in paths)
    digest = hashlib.sha256(lines.encode()).hexdigest()
    provenance = json.loads((root / "reports" / "provenance.json").read_text())
    assert (provenance["timing"]["files"], provenance["timing"]["sha256"]) == (len(paths), digest)
    md = (root / "reports" / "report.md").read_text()
    assert f"Measured speeds are not part of the results' lineage: read from {len(paths)} timing files " \
           f"(sha256 of their paths and hashes {digest[:12]};" in md
    assert "a run trained again rewrites its timing file and reruns nothing" in md

    kept = paths[0].read_text()
    try:  # a run trained again: its speed differs
        paths[0].write_text(json.dumps({**json.loads(kept), "tokens_per_s": 1.0}))
        again = render_report(settings_of(params), root, params_path, code_revision=REVISION)
    finally:
        paths[0].write_text(kept)
    changed = json.loads(again.files["provenance.json"])["timing"]["sha256"]
    assert changed != digest and f"hashes {changed[:12]};" in again.files["report.md"].decode()


def test_compute_table_tolerates_runs_without_timing_and_devices_without_a_peak(holes):
    root, _, _ = holes
    compute = {r["cell"]: r for r in read_csv(root / "reports" / "tables" / "compute.csv")}
    # no timing file in the cell: no speed (not a zero); no peak anywhere: no MFU, shown as n/a
    assert compute["cpu-4l-ctx64"]["tokens_per_s"] == "" and {r["mfu"] for r in compute.values()} == {""}
    timed = [json.loads(p.read_text())["tokens_per_s"]
             for p in sorted((root / "results" / "timing").glob("cpu-4l-ctx128/*.json"))]
    ctx128 = compute["cpu-4l-ctx128"]
    assert len(timed) == int(ctx128["completed"]) + int(ctx128["diverged"]) - 1  # diverged runs are timed too
    assert float(ctx128["tokens_per_s"]) == statistics.median(timed)
    md = (root / "reports" / "report.md").read_text()
    assert "| cpu-4l-ctx64 | 17 | 0 | 1 | 671,744 | 4.98e11 | — | n/a |" in md


def test_a_run_too_small_says_so_and_claims_nothing(holes):
    root, params, _ = holes
    md = (root / "reports" / "report.md").read_text()
    assert params["report"]["min_budget_for_claims"] > max(params["train"]["budgets"])
    assert "**Too small to conclude anything.**" in md
    assert "**What the data show.** Nothing, by design" in md
    assert "consistent with the conditioning account" not in md
    assert "against the conditioning account" not in md
    comparisons = read_csv(root / "reports" / "tables" / "comparisons.csv")
    assert comparisons and all(r["verdict"] not in ("faster", "slower") for r in comparisons)  # one seed


def test_a_moved_target_is_shown_with_a_note(tmp_path):
    """Every baseline run at the largest budget diverged, so the reference budget between the two (32,768
    tokens) has no loss: the target moves to the budget below, and the report shows the target (value,
    arm, budget, lr) with a visible note."""
    params = synthetic.synthetic_params(seeds=(0,), budgets=(16384, 65536))
    params["train"]["arms"], params["train"]["contexts"] = ["gpt", "ngpt"], [64]
    diverged = tuple(s.name for s in enumerate_runs(settings_of(params))
                     if s.arm == "gpt" and s.budget == 65536)
    params_path = synthetic.write_results(tmp_path, params, diverged=diverged)
    write_report(render_report(settings_of(params), tmp_path, params_path, code_revision=REVISION),
                 tmp_path / "reports")
    md = (tmp_path / "reports" / "report.md").read_text()
    note = ("the gpt runs do not give the loss at the reference budget (32,768 tokens): no completed run at "
            "65,536; the target is its best loss at 16,384, its largest budget with a completed run")
    assert f"cpu-4l-ctx64, seed 0: {note}. Its speed-ups measure against a different baseline loss." in md
    (target,) = read_csv(tmp_path / "reports" / "tables" / "speedup_target.csv")
    doc = json.loads((tmp_path / "results" / "speedup" / "cpu-4l-ctx64.json").read_text())
    assert (target["arm"], target["reference_budget"], target["measurable"]) == ("gpt", "16384", "0.25 to 1")
    assert float(target["loss"]) == doc["targets"][0]["loss"]
    assert target["budgets"] == "16,384"
    assert float(target["lrs"]) == pytest.approx(doc["targets"][0]["runs"][0]["lr"], rel=1e-6)
    assert target["note"] == note
    (cell,) = read_csv(tmp_path / "reports" / "tables" / "speedup_by_cell.csv")
    assert cell["measurable"] == "0.25 to 1" and cell["ngpt"] == ">1 (bound)"  # beyond the range


def test_the_target_is_shown_at_the_reference_budget_without_a_note(complete):
    root, _, _ = complete
    rows = read_csv(root / "reports" / "tables" / "speedup_target.csv")
    # middle: the geometric mean of 16,384 and 262,144 is 65,536, a budget that ran
    assert [(r["seed"], r["arm"], r["reference"], r["reference_budget"], r["note"]) for r in rows] == [
        ("0", "gpt", "middle", "65536", ""), ("1", "gpt", "middle", "65536", "")]
    assert {r["measurable"] for r in rows} == {"0.25 to 4"}
    md = (root / "reports" / "report.md").read_text()
    assert "its largest budget with a completed run" not in md


# ----------------------------------------------------------------------------------------------------------
# Small pieces


def test_paper_numbers_file_has_every_number_with_its_source():
    numbers = paper.paper_numbers()
    assert [(e["context"], e["factor"]) for e in numbers["speedup"]] == [(1024, 4), (4096, 10), (8192, 20)]
    for entry in numbers["speedup"] + numbers["condition"]:
        assert paper.where(entry) and entry["checked"]
    assert paper.paper_speedup(64) is None
    # the legends of Fig. 11 (layer 3) and Fig. 12 (layer 4), both scales; speed-up Sec. 3.1, conditioning 3.2
    assert len(numbers["condition"]) == 8
    assert paper.paper_condition("ngpt", 3)["q"] == 3.7593
    assert paper.paper_condition("gpt", 3)["k"] == 1878718.0663
    assert paper.paper_condition("gpt", 4)["q"] == 1500.1872
    assert paper.paper_condition("ngpt", 4)["k"] == 2.8612
    assert paper.paper_condition("gpt", 4, "1B")["q"] == 807005.0369
    assert paper.paper_condition("ngpt", 3, "1B")["k"] == 9.8658
    assert paper.where(paper.paper_condition("gpt", 4)) == "Sec. 3.2, Fig. 12, p. 17"
    assert paper.where(paper.paper_condition("ngpt", 3, "1B")) == "Sec. 3.2, Fig. 11, p. 16"
    assert paper.where(paper.paper_speedup(1024)) == "Sec. 3.1, Fig. 2, p. 6"
    downstream = numbers["downstream"]
    assert downstream["values"]["accuracy_percent"]["average"] == 54.44
    assert paper.where(downstream) == "Sec. A.8, Fig. 3, 8, 9, Table 6, p. 19"
    assert paper.paper_figure("renormalized")["figure"] == "10"


def test_number_formatting():
    assert fmt_num(1.6e6) == "1.6e6" and fmt_num(4.5e-5) == "4.5e-5" and fmt_num(3.76) == "3.76"
    assert fmt_num(math.inf) == "∞" and fmt_num(None) == "—" and fmt_num(math.nan) == "—"
    assert fmt_num("inf") == "∞" and fmt_num(12345) == "12,345"


def test_inline_markup_is_escaped():
    assert inline_html("a <b> & **bold** `x<y` [t](#a)") == (
        'a &lt;b&gt; &amp; <strong>bold</strong> <code>x&lt;y</code> <a href="#a">t</a>')


def test_synthetic_params_are_valid_params(complete):
    _, params, params_path = complete
    assert load_params(params_path) == settings_of(params)


def test_grid_table_states_the_protocol(complete):
    root, params, _ = complete
    grid = {r["item"]: r["value"] for r in read_csv(root / "reports" / "tables" / "grid.csv")}
    train = params["train"]
    assert grid["batch (sequences, at every context)"] == f"{train['batch_sequences']:,}"
    assert grid["warmup (steps, arms that warm up)"] == (
        f"{train['warmup_steps']:,}, at most {train['warmup_max_fraction']:.0%} of a run's steps")
    assert grid["learning rates (cpu-4l, context 1024)"].startswith("gpt 0.003, 0.01")
    assert grid["schedule"] == "cosine (the paper's): each budget its own run"
    md = (root / "reports" / "report.md").read_text()
    assert "Each token budget is its own run with its own cosine schedule (the paper's Fig. 2 method)." in md
    assert "## Calibration" not in md  # no calibration runs without WSD


def finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def test_runs_trained_on_other_shards_are_named_in_a_warning_and_the_headline_metrics_are_written(complete):
    root, params, params_path = complete
    rendered = render_report(settings_of(params), root, params_path, code_revision=REVISION)
    assert "Trained on other data" not in rendered.files["report.md"].decode()
    # DVC's metrics: one flat file of numbers per cell and arm, the speed-up's the speedup stage's
    cells = enumerate_cells(settings_of(params))
    arms = params["train"]["arms"]
    headline = {path: json.loads(body) for path, body in rendered.files.items()
                if path.startswith("metrics/")}
    assert set(headline) == {f"metrics/{cell}/{arm}.json" for cell in cells for arm in arms}
    for cell in cells:
        doc = read_document(root / layout.speedup_file(cell))
        for arm in arms:
            numbers = headline[f"metrics/{cell}/{arm}.json"]
            assert set(numbers) <= {"best_val_loss", "speedup", "speedup_low", "speedup_high"}, numbers
            assert all(type(value) is float for value in numbers.values()), numbers
            assert "best_val_loss" in numbers, (cell, arm)
            speedup = doc.arms[arm].speedup
            low, high = speedup.interval or (None, None)
            assert numbers.get("speedup") == finite(speedup.value), (cell, arm)
            assert (numbers.get("speedup_low"), numbers.get("speedup_high")) == (finite(low), finite(high))
    assert any("speedup_low" in numbers for numbers in headline.values())

    run = enumerate_runs(settings_of(params))[2]
    summary = train_dir(root, run) / "summary.json"
    good = summary.read_text()
    try:  # a run trained before prepare wrote new shards
        record = json.loads(good)
        record["data"]["train_sha256"] = "0" * 64
        summary.write_text(json.dumps(record))
        text = render_report(settings_of(params), root, params_path,
                             code_revision=REVISION).files["report.md"].decode()
    finally:
        summary.write_text(good)
    warning = next(line for line in text.splitlines() if "Trained on other data" in line)
    assert f"1 of {len(enumerate_runs(settings_of(params)))} runs" in warning and run.name in warning


def test_the_figures_show_the_baseline_the_grid_and_their_labels(complete):
    """The report's figures as matplotlib drew them (support/figures.py): the baseline black and on top, no
    bar on a log axis, integer ticks on index axes, the grid's budgets as ticks, the target and the reference
    budget in the final-loss legend, and the settle figure's labels apart under distinct titles. A figure of
    each kind, one cell: the rest share their kit (test_report_figures.py)."""
    root, params, _ = complete
    settings = settings_of(params)
    results = load_results(settings, root)
    cell = results.cells[0]
    with plot.capture() as figures:
        loss.final_loss_vs_budget(results)
        loss.loss_curves(results, cell)
        conditioning.references(results, cell)
        settle_figure(results, arm_table(cross_arm_table(settings, root, allow_missing=True)), SETTLE_METRICS)
    assert len(figures) == 4
    for fig in figures:
        check_figure(fig, settings.speedup.baselines[0], budgets=list(settings.train.budgets))
        assert fig.get_size_inches()[0] >= plot.MIN_WIDTH
    legend = [t.get_text() for lg in figures[0].legends for t in lg.get_texts()]
    assert any(t.startswith("target: ") for t in legend) and any(t.startswith("reference budget: ") for t in
                                                                  legend), legend
    settle = figures[-1]
    titles = [ax.get_title() for ax in settle.axes if ax.get_visible()]
    assert len(set(titles)) == len(titles) > 1
    for ax in settle.axes:
        assert [t for t in ax.texts if t.get_text()] and labels_overlap(settle, ax) == [], ax.get_title()

