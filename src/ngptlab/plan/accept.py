"""`ngptlab plan --accept-code [--against REV]`: an edit meant to change no number (a refactor), accepted as
such only where it provably changes none, so that no job reruns for it.

The jobs it touches are the run stages (trunk, train, condition) whose code fingerprint per arm (plan/
closure.py) differs between REV's tree and the working tree, each side read with its own record of accepted
refactors. For every arm among them, golden traces (plan/golden.py) are trained from REV's code and from the
working tree's; only where every trace of every such arm is bit-identical is each changed (stage, arm)
recorded in results/accepted-code.json (closure.ACCEPTED): its new fingerprint, accepted as REV's, with the
revision and the sha256 of each trace. The fingerprints of the lineage keys then map the new code to the
old, so neither Snakemake nor DVC reruns a job; results/plan.json is rewritten and, in a DVC repository,
`dvc commit --force plan` records the plan stage's changed code as up to date. Otherwise it refuses in one
line naming the arm, the path and the first thing that differs, and records nothing.

The stages after the runs (speedup, evaluate, report) are cheap and have no golden traces: their jobs rerun.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ngptlab.config.load import read_mapping
from ngptlab.errors import NgptlabError, ParamsError
from ngptlab.files import write_json_atomic
from ngptlab.plan.closure import (
    ACCEPTED,
    PACKAGE_DIR,
    FactsCache,
    accepted_entries,
    arm_rows,
    stage_code,
    stage_fingerprints,
)
from ngptlab.plan.dvclock import commit_plan_stage
from ngptlab.plan.golden import golden_params, json_sha256, trace_trees
from ngptlab.plan.grid import write_grid_file
from ngptlab.settings import Params
from ngptlab.settings.roles import PER_RUN

RUNNER = f"{PACKAGE_DIR}/plan/golden.py"  # what REV must hold to be traced
PLAN_FILE = "results/plan.json"
GENERATED_BY = ("`ngptlab plan --accept-code`: code accepted as equivalent to the code it replaces, on "
                "bit-identical golden traces; read by plan/closure.py. Keep it in git.")


class NotAccepted(NgptlabError):
    """The edit cannot be accepted as one that changes no number."""


@dataclass(frozen=True)
class Change:
    """A run stage of one arm whose code changed: REV's canonical fingerprint, the working tree's raw one."""
    stage: str
    arm: str
    was: str
    now: str


def _git(root: Path, *args: str) -> bytes:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True)
    if done.returncode:
        why = (done.stderr.decode(errors="replace").strip().splitlines() or ["failed"])[-1]
        raise ParamsError(f"git {args[0]} in {root}: {why}")
    return done.stdout


def revision(root: Path, against: str) -> str:
    """The full sha of the commit REV names in root's repository."""
    return _git(root, "rev-parse", "--verify", f"{against}^{{commit}}").decode().strip()


def extract(root: Path, sha: str, into: Path) -> None:
    """REV's src/ and its record of accepted refactors (where it has one) under `into`."""
    has_record = subprocess.run(["git", "-C", str(root), "cat-file", "-e", f"{sha}:./{ACCEPTED}"],
                                capture_output=True).returncode == 0
    data = _git(root, "archive", "--format=tar", sha, "src", *([ACCEPTED] if has_record else []))
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")


def changes(root: Path, before_root: Path,
            arms: tuple[str, ...]) -> tuple[list[Change], list[str], list[str]]:
    """The run stages per arm whose canonical fingerprints differ between the two trees, the other stages that
    differ, and the arms the earlier tree does not have (new: nothing of theirs to keep)."""
    known = arm_rows(before_root / "src")
    kept = tuple(arm for arm in arms if arm in known)
    before, now = stage_fingerprints(before_root, kept), stage_fingerprints(root, arms)
    cache = FactsCache()
    changed = [Change(stage, arm, before[stage][arm], stage_code(stage, root, cache, (arm,)).fingerprint)
               for stage in PER_RUN for arm in kept if now[stage][arm] != before[stage][arm]]
    others = [stage for stage in now if stage not in PER_RUN and now[stage] != before[stage]]
    return changed, others, [arm for arm in arms if arm not in known]


def first_difference(before: dict, after: dict, label: str) -> str | None:
    """Where two sets of traces ({arm: {path: trace}}) first differ, in words; None where they are equal."""
    for arm in sorted(before.keys() | after.keys()):
        paths_a, paths_b = before.get(arm, {}), after.get(arm, {})
        for path in sorted(paths_a.keys() | paths_b.keys()):
            if path not in paths_a or path not in paths_b:
                return f"arm {arm}, path {path}: traced {'now' if path in paths_b else label} only"
            found = _trace_difference(paths_a[path], paths_b[path], label)
            if found:
                return f"arm {arm}, path {path}: {found}"
    return None


def _trace_difference(a: dict, b: dict, label: str) -> str | None:
    for (step, x), (_, y) in zip(a["losses"], b["losses"], strict=False):
        if x != y:
            values = [repr(float.fromhex(v)) if v else "none" for v in (x, y)]
            return f"the loss of step {step} differs: {values[0]} {label}, {values[1]} now"
    if len(a["losses"]) != len(b["losses"]):
        return f"{len(a['losses'])} steps {label}, {len(b['losses'])} now"
    for name in sorted(a["tensors"].keys() | b["tensors"].keys()):
        if a["tensors"].get(name) != b["tensors"].get(name):
            return f"tensor {name} of the final checkpoint differs"
    for key, what in (("metrics", "the metrics rows"), ("trunk", "a trunk segment's record"),
                      ("summary", "the run's summary"), ("condition", "the condition result"),
                      ("spectra", "the condition result's spectra")):
        if a.get(key) != b.get(key):
            return f"{what} differ" if what.endswith("s") else f"{what} differs"
    return None if a == b else "the traces differ"


def record(root: Path, entries: list[dict]) -> Path:
    """Append the entries to the record (one of the same stage and fingerprint replaced), atomically."""
    path = root / ACCEPTED
    earlier = accepted_entries(root)  # a record that cannot be read stops here, naming the file
    new = {(entry["stage"], entry["fingerprint"]) for entry in entries}
    kept = [entry for entry in earlier if (entry["stage"], entry["fingerprint"]) not in new]
    write_json_atomic(path, {"generated_by": GENERATED_BY, "accepted": kept + entries})
    return path


def accept_code(params: Params, params_file: str | Path, root: str | Path = ".",
                against: str = "HEAD") -> int:
    """Accept the working tree's code under root as equivalent to REV's, or refuse (NotAccepted)."""
    root = Path(root)
    sha = revision(root, against)
    label = f"at {against} ({sha[:12]})"
    arms = tuple(params.train.arms)
    with tempfile.TemporaryDirectory(prefix="ngptlab-accept-") as tmp:
        before_root = Path(tmp) / "rev"
        extract(root, sha, before_root)
        changed, others, new_arms = changes(root, before_root, arms)
        if new_arms:
            print(f"{', '.join(new_arms)}: no such arm {label}; its jobs are new, nothing to accept")
        if others:
            print(f"{', '.join(others)}: code changed since {against}; no golden traces cover these stages, "
                  "so their jobs rerun (they are cheap)")
        if not changed:
            print(f"no trunk, train or condition code of the grid's arms changed since {against} "
                  f"({sha[:12]}): nothing to accept")
            return 0
        if not (before_root / RUNNER).is_file():
            raise NotAccepted(f"{against} ({sha[:12]}) predates golden traces (it has no {RUNNER}): accept "
                              "against a later revision (--against REV)")
        affected = sorted({change.arm for change in changed})
        grid = read_mapping(params_file)
        spec = {"arms": {arm: golden_params(grid, params, arm) for arm in affected}}
        print(f"training the golden traces of {', '.join(affected)} {label} and in the working tree",
              flush=True)
        traces = trace_trees({label: before_root, "in the working tree": root}, spec, Path(tmp))
    before, now = traces[label], traces["in the working tree"]
    differs = first_difference(before, now, label)
    if differs:
        raise NotAccepted(f"not accepted, nothing recorded: {differs}")
    return accepted(params, root, changed, now, sha, label)


def accepted(params: Params, root: Path, changed: list[Change], traces: dict, sha: str, label: str) -> int:
    """Record the changed (stage, arm)s as accepted on these traces (the working tree's), rewrite the plan and
    commit DVC's plan stage."""
    arms = tuple(params.train.arms)
    at = datetime.now(UTC).isoformat(timespec="seconds")
    entries = [{"stage": c.stage, "arm": c.arm, "fingerprint": c.now, "accepted_as": c.was, "revision": sha,
                "traces": {path: json_sha256(trace) for path, trace in sorted(traces[c.arm].items())},
                "accepted_at": at} for c in changed]
    path = record(root, entries)
    after = stage_fingerprints(root, arms)
    moved = [f"{c.stage} ({c.arm})" for c in changed if after[c.stage][c.arm] != c.was]
    if moved:
        raise NgptlabError(f"{path}: written, yet the code of {', '.join(moved)} still reads as changed")
    affected = sorted({c.arm for c in changed})
    paths = sum(len(traces[arm]) for arm in affected)
    stages = ", ".join(f"{stage} ({', '.join(c.arm for c in changed if c.stage == stage)})"
                       for stage in PER_RUN if any(c.stage == stage for c in changed))
    print(f"accepted: {paths} golden trace(s) of {', '.join(affected)} are bit-identical {label} and in the "
          f"working tree; recorded {stages} in {path}, whose lineage keys stay as they were")
    plan_file = root / PLAN_FILE
    if plan_file.is_file():
        write_grid_file(params, plan_file, root)
        print(f"rewrote {plan_file}")
    if commit_plan_stage(root, "the record"):
        print("ran `dvc commit --force plan`: dvc.lock records the plan stage's new code")
    return 0
