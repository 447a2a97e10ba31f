"""What the presets' headers and the docs say of the presets, held to the code: the GPU-hours they quote are
`ngptlab plan`'s (the runs listed at first, or the whole protocol's projection), and a grid with angle arms
waits for their measured angle instead of training them at the prior and again."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from ngptlab.bench.workflow import TARGET_JOBS, TARGETS_S, grid_jobs, lineage_jobs, target_s
from ngptlab.config.load import load_params
from ngptlab.models.arms import table, turns_like
from ngptlab.plan.estimate import MFU, PEAK_TFLOPS, estimate_plan
from ngptlab.plan.printout import projection
from ngptlab.plan.protocol import projection_bound

REPO = Path(__file__).resolve().parents[1]
PRESETS = {p.stem: p for p in sorted((REPO / "workflow" / "presets").glob("*.yaml"))}
PROSE = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")), *PRESETS.values()]
# A cost quoted: "N GPU-hours" (not the end of a range "a-N", which `ngptlab design` prices per planted
# truth), or a table cell's "N for the runs listed at first" / "at most N over the whole protocol".
QUOTE = re.compile(r"(?<![\d,.\-–])(\d[\d,]*(?:\.\d+)?)(?= GPU-hours| for the runs| over the whole protocol)")
NAMED = re.compile(rf"(?<![\w-])({'|'.join(map(re.escape, PRESETS))})(?![\w'-])")
SENTENCE_END = re.compile(r"\.\s|\n\s*\n|\n(?=\|)")  # a sentence, a paragraph, a table's row


@cache
def costs(preset: str) -> tuple[float, ...]:
    """The preset's GPU-hours as `ngptlab plan` prints them: the runs listed at first, and the whole
    protocol's projection where it has one."""
    params = load_params(PRESETS[preset])
    listed = estimate_plan(params, MFU, PEAK_TFLOPS)["total_gpu_hours"]
    projected = projection(params, mfu=MFU, peak_tflops=PEAK_TFLOPS)
    return (listed,) if projected is None else (listed, projected["total_gpu_hours"])


def text_of(path: Path) -> str:
    """The prose of a file: a preset's comments (their '#' dropped), a page whole."""
    if path.suffix != ".yaml":
        return path.read_text()
    return "\n".join(re.sub(r"^\s*# ?", "", line) if line.lstrip().startswith("#") else ""
                     for line in path.read_text().splitlines())


def quotes(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, number as written, the preset it is about) of every cost quoted in the file: the preset named
    last before it in its sentence, else the preset whose header it is."""
    text, found = text_of(path), []
    for m in QUOTE.finditer(text):
        starts = [e.end() for e in SENTENCE_END.finditer(text, 0, m.start())]
        named = NAMED.findall(text, starts[-1] if starts else 0, m.start())
        preset = named[-1] if named else PRESETS.get(path.stem) and path.stem
        found.append((text.count("\n", 0, m.start()) + 1, m.group(1), preset))
    return found


def matches(written: str, value: float) -> bool:
    """Whether `value` rounds to the number as written (to its last non-zero digit: "about 1,022,000")."""
    number = written.replace(",", "")
    if "." in number:
        step = 10.0 ** -len(number.split(".")[1])
    else:
        step = 10.0 ** (len(number) - len(number.rstrip("0")))
    return abs(float(number) - value) <= step / 2


def test_every_quoted_preset_cost_is_the_plans():
    wrong = []
    for path in PROSE:
        for line, written, preset in quotes(path):
            where = f"{path.relative_to(REPO)}:{line}"
            if preset is None:
                wrong.append(f"{where}: {written} GPU-hours of no preset named in its sentence")
            elif not any(matches(written, value) for value in costs(preset)):
                stated = " or ".join(f"{v:,.4g}" if v < 1000 else f"{v:,.0f}" for v in costs(preset))
                wrong.append(f"{where}: {written} GPU-hours for {preset}; `ngptlab plan` gives {stated}")
    assert not wrong, ("edit these to `ngptlab plan --params workflow/presets/<preset>.yaml`:\n"
                       + "\n".join(wrong))


def test_the_check_finds_the_quotes_and_their_presets(tmp_path):
    page = tmp_path / "page.md"
    page.write_text('The preset "settle" costs at most 11,330 GPU-hours. On pilot (and trains 1,552 '
                    "GPU-hours),\n-0.14 on settle (9,999 GPU-hours); worlds: 7,018-8,741 GPU-hours.\n\n"
                    "| `paper` | about 1,022,000 |\n| `settle` | 1,450 for the runs listed at first |\n")
    assert quotes(page) == [(1, "11,330", "settle"), (1, "1,552", "pilot"), (2, "9,999", "settle"),
                            (5, "1,450", "settle")]
    assert matches("1,022,000", 1_022_425) and matches("0.068", 0.0679) and not matches("11,330", 13_093)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_a_preset_with_angle_arms_waits_for_their_measured_angle(preset):
    """An angle arm trained at the prior trains again at the measured angle (docs/pipeline/grow.md)."""
    train = load_params(PRESETS[preset]).train
    if set(train.arms) & set(turns_like()):
        assert train.protocol.match_angles, (f"workflow/presets/{preset}.yaml: add train.protocol."
                                             "match_angles: true, so the angle arms train once, at the "
                                             "measured angle")


def test_matching_the_angles_alone_is_priced_exactly():
    assert projection_bound(load_params(PRESETS["paper"])) == ""
    assert "at most" in projection_bound(load_params(PRESETS["settle"]))


def test_the_workflows_cost_in_jobs_is_the_paper_grids():
    """docs/provenance.md's jobs and targets for `snakemake -n` on the paper preset, from its grid and
    `ngptlab bench workflow`'s own count; the seconds measured are the machine's, so the page states none."""
    jobs = grid_jobs(load_params(PRESETS["paper"]))
    text = " ".join((REPO / "docs" / "provenance.md").read_text().split())
    stated = {
        r"the paper preset plans ([\d,]+) jobs where it would plan ([\d,]+) without them":
            (jobs + lineage_jobs(jobs), jobs),
        r"their targets: (\d+) s and (\d+) s for ([\d,]+) jobs":
            (*map(round, TARGETS_S.values()), TARGET_JOBS),
        r"scaled to its ([\d,]+) jobs now \(([\d.]+) s and ([\d.]+) s":
            (jobs, *(round(target_s(command, jobs), 1) for command in TARGETS_S)),
    }
    for pattern, numbers in stated.items():
        found = re.search(pattern, text)
        assert found, f"docs/provenance.md: no sentence matching {pattern!r}: state {numbers} so"
        assert tuple(float(n.replace(",", "")) for n in found.groups()) == numbers, (
            f"docs/provenance.md: '{found.group(0)}' should say {numbers} (`ngptlab bench workflow`)")
    assert "7.5 s" not in text and not re.search(r"takes [\d.]+ s for them", text)


def header_of(path: Path) -> str:
    """A preset's header: its leading comment lines, '#' dropped, whitespace run together."""
    lines = []
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            break
        lines.append(line.lstrip("#"))
    return " ".join(" ".join(lines).split())


# "every arm" as which arms a grid runs, not "for every arm" (each arm of the grid) nor "every arm's"
EVERY_ARM = re.compile(r"(?<!for )\bevery arm(?!'s)\b")


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_a_presets_header_names_only_its_arms_and_every_arm_only_with_all_of_them(preset):
    header, arms = header_of(PRESETS[preset]), set(load_params(PRESETS[preset]).train.arms)
    named = {arm for arm in table() if re.search(rf"(?<![\w-]){re.escape(arm)}(?![\w-])", header)}
    where = f"workflow/presets/{preset}.yaml's header"
    assert named <= arms, f"{where} names {sorted(named - arms)}, not its arms"
    if EVERY_ARM.search(header):
        assert arms == set(table()), f"{where} says 'every arm' but lacks {sorted(set(table()) - arms)}"


def test_every_arm_is_read_as_the_grids_arms_only_where_it_names_them():
    assert EVERY_ARM.search("contexts 1k and 4k, every arm, three budgets")
    assert not EVERY_ARM.search("the same for every arm") and not EVERY_ARM.search("every arm's runs")
