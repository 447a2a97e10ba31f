"""The rendered report.html opened in a real browser (Debian's headless Chromium).

A harness page loads the untouched report in an iframe (file:// pages may read each other with
--allow-file-access-from-files), checks it in the browser and writes the verdict into its own DOM, which
Chromium prints with --dump-dom. Checked: every figure decoded (naturalWidth > 0), every in-page link has its
anchor, every relative link names a file that exists, nothing is fetched from the network, every table has
rows, a header and no ragged row, and is laid out with a height. Every figure is laid out at least 600 px
wide and is cut out of the full-page screenshot on its own (tests/artifacts/figures/<id>.png), where it must
have ink: not blank, and dark strokes (text, ticks, the baseline). Screenshots and the report itself are kept
under tests/artifacts/ (git-ignored). CI installs Chromium (.ci/setup-chromium.sh); without it the test is
skipped, saying so.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image
from support import synthetic
from support.synthetic import settings_of

from ngptlab.report.command import render_report, write_report

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.skipif(  # fixture: tests/conftest.py
    not CHROMIUM.exists(), reason="/usr/bin/chromium not installed (CI installs it: .ci/setup-chromium.sh)")]

HARNESS = """<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>
<pre id="result">pending</pre>
<iframe id="report" src="REPORT_URL" style="width:1280px;height:900px"></iframe>
<script>
document.getElementById("report").addEventListener("load", function () {
  var out = {};
  try {
    var d = this.contentDocument;
    out.title = d.title;
    out.height = d.documentElement.scrollHeight;
    var imgs = Array.from(d.querySelectorAll("figure img"));
    out.figures = imgs.length;
    out.broken = imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); })
                     .map(function (i) { return i.alt; });
    out.widths = imgs.map(function (i) { return i.naturalWidth; });
    var top = d.documentElement.scrollTop;
    out.rects = imgs.map(function (i) {
      var r = i.getBoundingClientRect();
      return {id: i.closest("figure").id, x: r.left, y: r.top + top, w: r.width, h: r.height}; });
    var ids = new Set(Array.from(d.querySelectorAll("[id]")).map(function (e) { return e.id; }));
    var hrefs = Array.from(d.querySelectorAll("a[href]"))
                     .map(function (a) { return a.getAttribute("href"); });
    out.anchor_links = hrefs.filter(function (h) { return h.charAt(0) === "#"; }).length;
    out.missing_anchors = hrefs.filter(function (h) {
      return h.charAt(0) === "#" && !ids.has(decodeURIComponent(h.slice(1))); });
    out.other_links = Array.from(new Set(hrefs.filter(function (h) { return h.charAt(0) !== "#"; })));
    out.sources = Array.from(d.querySelectorAll("[src]")).map(function (e) {
      return e.getAttribute("src").slice(0, 30); });
    out.tables = Array.from(d.querySelectorAll("table")).map(function (t) {
      var cols = t.tHead ? t.tHead.rows[0].cells.length : 0;
      var rows = Array.from(t.tBodies[0].rows);
      return {id: t.parentElement.id, rows: rows.length, cols: cols,
              height: t.getBoundingClientRect().height,
              ragged: rows.filter(function (r) { return r.cells.length !== cols; }).length};
    });
  } catch (e) { out.error = String(e); }
  document.getElementById("result").textContent = JSON.stringify(out);
});
</script></body></html>
"""


def chromium(tmp_path: Path, *args: str, timeout: int = 180) -> subprocess.CompletedProcess:
    profile = tmp_path / f"chromium-profile-{len(list(tmp_path.glob('chromium-profile-*')))}"
    profile.mkdir()
    cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", "--hide-scrollbars", "--virtual-time-budget=20000", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """A two-cell report with a missing and a diverged run (the holes a --keep-going run leaves)."""
    root = tmp_path_factory.mktemp("browser")
    params = synthetic.synthetic_params(seeds=(0,), budgets=(16384, 65536))
    params_path = synthetic.write_results(root, params, missing=("cpu-4l-ctx64-ngpt-t65536-lr0.01-s0",),
                                          diverged=("cpu-4l-ctx128-gpt-orth-t65536-lr0.003-s0",))
    rendered = render_report(settings_of(params), root, params_path)
    write_report(rendered, root / "reports")
    return root / "reports" / "report.html"


def test_report_in_headless_chromium(report, tmp_path):
    harness = tmp_path / "harness.html"
    harness.write_text(HARNESS.replace("REPORT_URL", report.as_uri()))
    done = chromium(tmp_path, "--allow-file-access-from-files", "--dump-dom", harness.as_uri())
    match = re.search(r'<pre id="result">(.*?)</pre>', done.stdout, re.S)
    assert match, f"no result from Chromium (rc {done.returncode}): {done.stderr[-2000:]}"
    result = json.loads(match.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))
    assert "error" not in result, result.get("error")
    html = report.read_text()

    # Every figure loads: as many decoded images as the report has figures (all inlined as data: URIs).
    n_figures = len(list((report.parent / "figures").glob("*.svg")))
    assert result["figures"] == n_figures == html.count("<figure ") > 0
    assert result["broken"] == [] and min(result["widths"]) > 100
    assert all(src.startswith("data:image/svg+xml;base64,") for src in result["sources"])

    # No broken links: in-page anchors exist (table rows link to their runs), relative files exist.
    assert result["anchor_links"] > 100 and result["missing_anchors"] == []
    for href in result["other_links"]:
        assert not re.match(r"[a-z]+:", href), f"the report links outside itself: {href}"
        assert (report.parent / href).is_file(), href

    # Tables render: one per CSV, each with a header, rows, no ragged row, and laid out.
    tables = {t["id"]: t for t in result["tables"]}
    assert set(tables) == {f"table-{p.stem}" for p in (report.parent / "tables").glob("*.csv")}
    for t in tables.values():
        assert t["rows"] > 0 and t["cols"] > 1 and t["ragged"] == 0 and t["height"] > 20, t

    # Screenshots for people, kept as test artifacts: the top of the report, and all of it.
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(report, ARTIFACTS / "report.html")
    for name, height in (("report-top.png", 2600), ("report-full.png", result["height"])):
        shot = ARTIFACTS / name
        shot.unlink(missing_ok=True)
        done = chromium(tmp_path, f"--window-size=1280,{height}", f"--screenshot={shot}", report.as_uri())
        assert shot.is_file() and shot.stat().st_size > 50_000, done.stderr[-2000:]

    # Each figure on its own, cut from the full page as the browser laid it out (the harness's iframe is
    # as wide as the screenshot's window), for people to look at one by one.
    figures = ARTIFACTS / "figures"
    shutil.rmtree(figures, ignore_errors=True)
    figures.mkdir()
    with Image.open(ARTIFACTS / "report-full.png") as page:
        for rect in result["rects"]:
            assert rect["w"] >= 600, f"{rect['id']} is laid out {rect['w']:.0f} px wide: too narrow to read"
            x, y = rect["x"], rect["y"]
            crop = page.crop((round(x), round(y), round(x + rect["w"]), round(y + rect["h"])))
            crop.save(figures / f"{rect['id']}.png")
            histogram = crop.convert("L").histogram()
            pixels = crop.width * crop.height
            assert sum(histogram[:250]) > 0.02 * pixels, f"{rect['id']}: blank where the figure should be"
            assert sum(histogram[:60]) > 0.001 * pixels, f"{rect['id']}: no dark strokes (text, ticks)"
