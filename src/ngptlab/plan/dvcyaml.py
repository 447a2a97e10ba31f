"""The report stage's per-run inputs in dvc.yaml, written from the grid with results/plan.json.

`dvc repro --pull --allow-missing` pulls a missing dependency of a stage it runs by the dependency's own path,
and only where that path is some stage's output: a directory that merely holds outputs (results/conditioning/,
the condition stages' JSON results, in git, and spectra tables, in the DVC cache) is never pulled, and the
report's Snakemake rule then stops on the missing tables. So the report stage names each run's conditioning
files one by one, the same files as Snakemake's report rule. DVC's templating fills one value per `${...}`
and cannot expand a list of paths, so `ngptlab plan --write` writes the list between two marker lines of
dvc.yaml (`write_report_inputs`), and `ngptlab plan --check`, which every stage runs first, refuses a list
that is not the grid's (`check_report_inputs`).
"""

from __future__ import annotations

from pathlib import Path

from ngptlab import layout
from ngptlab.errors import ParamsError
from ngptlab.files import write_text_atomic
from ngptlab.grid.enumeration import enumerate_runs
from ngptlab.settings import Params

DVC_YAML = "dvc.yaml"
PLAN_FILE = "results/plan.json"  # the plan dvc.yaml reads (its `vars`)
BEGIN = "# >>> every run's conditioning files: written by `ngptlab plan --write` from the grid, do not edit"
END = "# <<< every run's conditioning files"


def report_inputs(params: Params) -> list[str]:
    """Every run's conditioning result and spectra table, in grid order."""
    return [path for run in enumerate_runs(params) for path in layout.conditioning_files(run.name).values()]


def _dvc_yaml(plan: str | Path, root: str | Path) -> Path | None:
    """Root's dvc.yaml where `plan` is the plan it reads (a plan written elsewhere is no concern of it)."""
    path = Path(root) / DVC_YAML
    reads = Path(plan).resolve() == (Path(root) / PLAN_FILE).resolve()
    return path if reads and path.is_file() else None


def _parts(text: str, path: Path) -> tuple[list[str], list[str], list[str]]:
    """dvc.yaml's lines up to BEGIN, the listed ones, and from END on."""
    lines = text.splitlines(keepends=True)
    begins = [i for i, line in enumerate(lines) if line.strip() == BEGIN]
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise ParamsError(f"{path}: the report stage's deps need the marker lines '{BEGIN}' and '{END}' once "
                          "each, in that order, around the runs' conditioning files")
    return lines[:begins[0] + 1], lines[begins[0] + 1:ends[0]], lines[ends[0]:]


def _listed(params: Params, begin: str) -> list[str]:
    indent = begin[:len(begin) - len(begin.lstrip())]
    return [f"{indent}- {path}\n" for path in report_inputs(params)]


def write_report_inputs(params: Params, plan: str | Path, root: str | Path = ".") -> bool:
    """List the grid's conditioning files in the dvc.yaml that reads `plan` (none: nothing to do); True if it
    changed."""
    path = _dvc_yaml(plan, root)
    if path is None:
        return False
    text = path.read_text()
    head, _, tail = _parts(text, path)
    new = "".join([*head, *_listed(params, head[-1]), *tail])
    if new == text:
        return False
    write_text_atomic(path, new)
    return True


def check_report_inputs(params: Params, plan: str | Path, root: str | Path, fix: str) -> None:
    """Refuse the dvc.yaml that reads `plan` where its list is not the grid's conditioning files (`fix` says
    how to mend it)."""
    path = _dvc_yaml(plan, root)
    if path is None:
        return
    head, listed, _ = _parts(path.read_text(), path)
    expected = _listed(params, head[-1])
    if listed != expected:
        raise ParamsError(f"{path}: the report stage's conditioning files are not the grid's ({len(listed)} "
                          f"listed, {len(expected)} expected: a result and a spectra table per run); {fix}")
