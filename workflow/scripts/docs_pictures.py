"""The guide's pictures of the report (`make docs-pictures`): from a rendered report (reports/, after `make`),
the figures the guide shows, under names without their cell, and a screenshot of the report's top in
headless Chromium. Run it after a change to the report; the pictures are committed under docs/images/.

usage: docs_pictures.py REPORTS_DIR IMAGES_DIR
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# the figures the guide shows, by stem without their cell
FIGURES = ("final_loss_vs_budget", "loss", "references", "rivals", "settle", "angles")
CHROMIUM = Path("/usr/bin/chromium")
# Flags for a machine without network (each background service would try to connect), as the browser test
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars")


def copy_figures(reports: Path, images: Path) -> list[Path]:
    """The first figure of each FIGURES stem (the first cell's), as images/report-<stem>.svg."""
    written = []
    for stem in FIGURES:
        found = sorted(p for p in (reports / "figures").glob("*.svg")
                       if re.fullmatch(rf"{stem}(_.+)?", p.stem))
        if not found:
            print(f"docs_pictures: no figure {stem}*.svg in {reports / 'figures'}", file=sys.stderr)
            continue
        target = images / f"report-{stem}.svg"
        shutil.copyfile(found[0], target)
        written.append(target)
    return written


def screenshot_top(reports: Path, images: Path) -> Path | None:
    """report.html's first 1280 x 1100 px as images/report-top.png; None without Chromium."""
    if not CHROMIUM.exists():
        print(f"docs_pictures: {CHROMIUM} not installed: no screenshot", file=sys.stderr)
        return None
    target = images / "report-top.png"
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([str(CHROMIUM), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                        "--window-size=1280,1100", f"--screenshot={target}",
                        (reports / "report.html").resolve().as_uri()],
                       check=True, capture_output=True, timeout=180)
    return target


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    reports, images = Path(argv[0]), Path(argv[1])
    if not (reports / "report.html").is_file():
        print(f"docs_pictures: {reports / 'report.html'} not found: run `make` first", file=sys.stderr)
        return 1
    images.mkdir(parents=True, exist_ok=True)
    written = [*copy_figures(reports, images), screenshot_top(reports, images)]
    for path in filter(None, written):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
