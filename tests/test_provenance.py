"""Provenance that survives change: Snakemake and DVC name the same work after a grid change, an edited grid
without a rewritten plan is never up to date, file times alone never rerun anything, and artifacts are
byte-stable (same inputs, same bytes; the code revision is the code's).

The workflow tests run the real tools in a scratch copy whose outputs are placeholders recorded with
`dvc commit`: neither tool reads an artifact to decide what to run, so no training is needed to compare plans.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from dvc.repo import Repo
from safetensors.numpy import save_file
from support import new_arm
from support.workflow import (
    BIN,
    REPO,
    copy_tokens,
    default_params,
    dvc,
    git,
    make_workdir,
    planned_jobs,
    snakemake,
    write_params,
)
from support.workflow import run as run_command

from ngptlab import layout
from ngptlab.grid.enumeration import enumerate_cells, enumerate_runs
from ngptlab.plan.grid import cell_key
from ngptlab.settings import Params


def dvc_stage_of_output(work) -> dict[str, str]:
    with Repo(str(work)) as repo:
        return {out.def_path: stage.name for stage in repo.index.stages for out in stage.outs}


def snakemake_work(work) -> set[str]:
    """The DVC stages of the jobs `snakemake -n` plans (every job but `all`; a lineage job's stage is the one
    whose output is the folder of its key file)."""
    by_output = dvc_stage_of_output(work)
    jobs = planned_jobs(snakemake(work, "--dry-run").stdout)
    return {by_output[job.outputs[0].rsplit("/", 1)[0] if job.rule == "lineage" else job.outputs[0]]
            for job in jobs if job.rule != "all"}


def dvc_work(work) -> set[str]:
    return set(json.loads(dvc(work, "status", "--json").stdout or "{}"))


# The arms these tests name (the baseline, gpt-nowd's per-context sweep, gpt-angle's module) and ngpt, whose
# angle gpt-angle turns at: every kind of job and dependency of the whole grid, in a quarter of its stages
# (each `snakemake -n` and `dvc status` here reads every stage).
ARMS = ("gpt", "gpt-nowd", "ngpt", "gpt-angle")


def two_cell_params() -> dict:
    """The default grid's ARMS at two contexts (two cells), gpt-nowd's sweep given per context."""
    params = default_params()
    train = params["train"]
    train.update(arms=list(ARMS), contexts=[128, 64])
    sweeps = train["learning_rates"]["cpu-4l"] = {arm: train["learning_rates"]["cpu-4l"][arm] for arm in ARMS}
    sweeps["gpt-nowd"] = {"ctx128": list(sweeps["gpt-nowd"]), "ctx64": list(sweeps["gpt-nowd"])}
    return params


# What the report writes per cell and arm under reports/metrics/ (report/metrics.py), as placeholders.
HEADLINE = {"best_val_loss": 3.25, "speedup": 1.5, "speedup_low": 1.25, "speedup_high": 1.75}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A scratch clone of a two-cell grid in which every output exists and is recorded in dvc.lock, and every
    run's timing file (which training writes beside its outputs) exists too."""
    params = two_cell_params()
    work = make_workdir(tmp_path_factory.mktemp("provenance") / "repo", params)
    git(work, "init", "-q")
    for job in planned_jobs(snakemake(work, "--dry-run", "--forceall", "--nolock").stdout):
        for output in job.outputs:
            path = work / output
            if output.startswith("reports/") and not path.suffix:  # directory outputs
                path.mkdir(parents=True, exist_ok=True)
                path = path / "placeholder"
            path.parent.mkdir(parents=True, exist_ok=True)
            if output.endswith(".safetensors"):  # a whole one: the workflow refuses a truncated checkpoint
                save_file({"placeholder": np.zeros(4, dtype=np.float32)}, str(path))
                continue
            path.write_text(json.dumps({"file": output, "final_val_loss": 3.25}) if output.endswith(".json")
                            else output)
    (work / "reports" / "figures" / "loss.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"/>')
    if (work / "reports" / "metrics").is_dir():
        (work / "reports" / "metrics" / "placeholder").unlink()
        for cell in enumerate_cells(Params.of(params)):
            for arm in params["train"]["arms"]:
                (work / "reports" / "metrics" / cell).mkdir(parents=True, exist_ok=True)
                (work / "reports" / "metrics" / cell / f"{arm}.json").write_text(json.dumps(HEADLINE))
    for run in enumerate_runs(Params.of(params)):
        timing = work / layout.timing_file(run.cell, run.name)
        timing.parent.mkdir(parents=True, exist_ok=True)
        timing.write_text(json.dumps({"run": run.name, "tokens_per_s": 336.0, "mfu": None}))
    dvc(work, "commit", "--force")
    return work


def test_after_make_both_tools_have_nothing_to_do(recorded):
    """`make` runs the pipeline through Snakemake and then, in a git repository with DVC, records it in
    dvc.lock (`dvc commit --force`), so `dvc status`, like `snakemake -n`, names nothing: here its recipe on
    a grid whose every job is done, from a dvc.lock that does not exist yet (a first `make`)."""
    lock = recorded / "dvc.lock"
    kept = lock.read_bytes()
    lock.unlink()
    venv = BIN.parent
    try:
        run_command(["make", "--no-print-directory", "-f", str(REPO / "Makefile"), f"VENV={venv}", "-o",
             f"{venv}/.installed", "SNAKEMAKE_FILTER=cat", "CORES=1", "pipeline"], recorded)
        assert lock.is_file(), "make left no dvc.lock"
        assert dvc_work(recorded) == set() and snakemake_work(recorded) == set()
    finally:
        lock.write_bytes(kept)


def test_after_dvc_commit_and_new_file_times_both_tools_have_nothing_to_do(recorded):
    assert dvc_work(recorded) == set() and snakemake_work(recorded) == set()
    # What `dvc checkout` / `dvc pull` do to the times: inputs newer than the outputs made from them.
    later = time.time() + 3600
    for path in [*recorded.glob("data/tokens/*/*"), *recorded.glob("runs/*/*/*"),
                 *recorded.glob("results/train/*/*/*")]:
        os.utime(path, (later, later))
    assert snakemake_work(recorded) == set()
    assert dvc_work(recorded) == set()


def test_a_runs_new_timing_makes_nothing_stale_in_either_tool(recorded):
    """Measured speed is no result: training a run again rewrites its timing file (tokens/s, MFU differ from
    one identical training to the next), which is an input or output of no stage in either tool, so neither
    names any work for it (the report records which timing files it read: test_report)."""
    run = next(iter(enumerate_runs(Params.of(two_cell_params()))))
    timing = recorded / layout.timing_file(run.cell, run.name)
    kept = timing.read_bytes()
    timing.write_text(json.dumps({"run": run.name, "tokens_per_s": 367.0, "mfu": None}))
    try:
        assert dvc_work(recorded) == set()
        assert snakemake_work(recorded) == set()
    finally:
        timing.write_bytes(kept)


def test_edited_stage_code_without_a_new_plan_is_changed_and_refused_then_reruns_that_stage(recorded):
    """lr_policy.py decides which learning rate every speed-up reads: the speedup stage imports it, so an
    edit reruns the speed-ups (and the evaluations and report after them), and no train job."""
    params = two_cell_params()
    cells = sorted({run.cell for run in enumerate_runs(Params.of(params))})
    code = recorded / "src" / "ngptlab" / "speedup" / "lr_policy.py"
    original = code.read_text()
    code.write_text(original + "\n_EDITED = True  # a line of code in the speedup stage's import closure\n")
    try:
        # The plan stage depends on all the code (README, "Why Snakemake and DVC agree") ...
        assert dvc_work(recorded) == {"plan"}
        # ... and a stage run on its own refuses the stale plan (the committed output is kept).
        committed = recorded / layout.speedup_file(cells[0])
        kept = committed.read_bytes()
        out = dvc(recorded, "repro", "--force", "--single-item", f"speedup@{cell_key(cells[0])}", check=False)
        assert out.returncode != 0
        assert "results/plan.json: stale, the code of speedup, report changed" in out.stdout + out.stderr
        # `ngptlab plan --write` (what `make` runs first): the plan takes the code's new fingerprints, and DVC
        # records its plan stage as done, so both tools name the same stages
        write_params(recorded, params)
        expected = {*(f"{stage}@{cell_key(cell)}" for cell in cells for stage in ("speedup", "evaluate")),
                    "report"}
        assert dvc_work(recorded) == expected
        assert snakemake_work(recorded) == expected
    finally:
        code.write_text(original)
        write_params(recorded, params)
    dvc(recorded, "checkout", f"speedup@{cell_key(cells[0])}")  # the key file DVC removed before the refusal
    committed.write_bytes(kept)
    assert dvc_work(recorded) == set() and snakemake_work(recorded) == set()


def runs_of(params: dict, arms: set[str] | None = None) -> set[str]:
    return {run.name for run in enumerate_runs(Params.of(params)) if arms is None or run.arm in arms}


@pytest.mark.parametrize("edit, rerun_arms, stages", [
    # a new arm: its module and its row, which the grid does not name
    ({f"models/{new_arm.MODULE}": lambda _: new_arm.SOURCE,
      "models/arms.yaml": lambda text: text + new_arm.ROW}, set(), ()),
    ({"models/gpt_angle.py": lambda text: text + "\n_EDITED = 1\n"}, {"gpt-angle"}, ("train", "condition")),
    ({"train/loop.py": lambda text: text + "\n_EDITED = 1\n"}, None, ("train", "condition")),
    # a metric of the condition stage: its code and its headline number
    ({"condition/metrics.py": lambda text: text + "\n\ndef entropy(sv):\n    return float(sv.sum())\n",
      "observe/headline.py": lambda text: text + "\n_EDITED = 1\n"}, None, ("condition",)),
], ids=["new-arm", "gpt-angle", "train-loop", "condition-metric"])
def test_a_code_edit_reruns_exactly_the_jobs_whose_code_it_changes(recorded, edit, rerun_arms, stages):
    """In both tools, after the plan takes the code's fingerprints: a run's job holds its own arm's module
    and row (plan/closure.py), so a new arm reruns nothing, an arm's module its runs, a shared module every
    run, and the condition stage's own code no train job."""
    params = two_cell_params()
    paths = {recorded / "src" / "ngptlab" / name: change for name, change in edit.items()}
    originals = {path: path.read_text() if path.is_file() else None for path in paths}
    plan = (recorded / "results" / "plan.json").read_bytes()
    try:
        for path, change in paths.items():
            path.write_text(change(originals[path] or ""))
        write_params(recorded, params)
        runs = runs_of(params, rerun_arms) if stages else set()
        expected = {f"{stage}@{run}" for run in runs for stage in stages}
        if "train" in stages:  # the cells holding the runs
            cells = {run.cell for run in enumerate_runs(Params.of(params)) if run.name in runs}
            expected |= {f"{stage}@{cell_key(cell)}" for cell in cells for stage in ("speedup", "evaluate")}
        expected |= {"report"} if expected else set()
        assert snakemake_work(recorded) == expected
        assert dvc_work(recorded) == expected  # `ngptlab plan --write` recorded DVC's plan stage
    finally:
        for path, text in originals.items():
            path.unlink() if text is None else path.write_text(text)
        write_params(recorded, params)
    assert (recorded / "results" / "plan.json").read_bytes() == plan  # every key as it was: nothing to do


def test_an_edited_grid_without_a_new_plan_is_changed_and_refused_then_a_new_lr_adds_only_its_work(recorded):
    params = two_cell_params()
    old_runs = {run.name for run in enumerate_runs(Params.of(params))}
    params["train"]["learning_rates"]["cpu-4l"]["gpt-nowd"]["ctx64"].append(4.0e-2)  # one cell's sweep
    (recorded / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))  # plan.json not rewritten

    # The plan stage reads all of params.yaml: never "up to date". DVC resolved the stages from the old
    # plan, so its plan stage rewrites the plan and stops, naming the second pass.
    assert dvc_work(recorded) == {"plan"}
    out = dvc(recorded, "repro", check=False)
    assert out.returncode != 0
    assert "the grid changed (2 runs added)" in out.stdout + out.stderr
    assert "run `dvc repro` (or `dvc exp run`) once more" in out.stdout + out.stderr

    new_runs = {run.name for run in enumerate_runs(Params.of(params))} - old_runs
    assert len(new_runs) == len(params["train"]["budgets"]) and all("-ctx64-" in run for run in new_runs)
    # The new runs, their cell's speed-up and evaluation (not the other cell's), and the report.
    cell = next(cell for cell in enumerate_cells(Params.of(params)) if cell.endswith("-ctx64"))
    expected = {*(f"{stage}@{run}" for run in new_runs for stage in ("train", "condition")),
                f"speedup@{cell}", f"evaluate@{cell}", "report"}
    assert dvc_work(recorded) == {"plan", *expected}
    assert snakemake_work(recorded) == expected
    # `dvc repro --dry` lists the new trainings and no other (it stops where a new checkpoint is needed).
    out = dvc(recorded, "repro", "--dry", check=False)
    running = set(re.findall(r"Running stage '([^']+)'", out.stdout))
    assert running == {"plan", *(f"train@{run}" for run in new_runs)}


# ----------------------------------------------------------------------------------------------------------
# Byte-stable artifacts

SAVE = """
import sys, torch
from ngptlab.checkpoint import atomic_save_tensors
tensors = {"w": torch.arange(12, dtype=torch.float32).reshape(3, 4), "b": torch.ones(5)}
meta = {f"key{i}": f"value {i}" for i in range(12)}
atomic_save_tensors(sys.argv[1], tensors, meta)
"""


def test_the_same_tensors_and_metadata_give_the_same_checkpoint_bytes_in_every_process(tmp_path):
    # safetensors orders the header metadata per process; each process here would shuffle it differently.
    paths = [tmp_path / f"{i}.safetensors" for i in range(4)]
    for path in paths:
        subprocess.run([sys.executable, "-c", SAVE, str(path)], check=True, env={**os.environ})
    contents = {path.read_bytes() for path in paths}
    assert len(contents) == 1

    from safetensors import safe_open

    with safe_open(str(paths[0]), framework="pt") as f:
        assert f.metadata() == {f"key{i}": f"value {i}" for i in range(12)}
        assert f.get_tensor("w")[2, 3].item() == 11.0


def test_code_revision_is_the_code_not_the_commit(tmp_path):
    from ngptlab.revision import code_revision

    git(tmp_path, "init", "-q")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "stage.py").write_text("x = 1\n")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "a.json").write_text("{}\n")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "code and results")
    before = code_revision(tmp_path)
    assert before.startswith("code:") and len(before) == len("code:") + 16

    (tmp_path / "results" / "a.json").write_text('{"loss": 3.2}\n')  # results change, then get committed
    assert code_revision(tmp_path) == before
    git(tmp_path, "commit", "-q", "-am", "results")
    assert code_revision(tmp_path) == before

    (tmp_path / "src" / "stage.py").write_text("x = 2\n")  # a code edit: new revision, committed or not
    edited = code_revision(tmp_path)
    assert edited != before
    git(tmp_path, "commit", "-q", "-am", "code")
    assert code_revision(tmp_path) == edited


def test_the_same_run_trained_twice_gives_the_same_bytes_and_readable_log_lines(tmp_path):
    from support.train import (
        make_params,
        results_dir,
        run_dir,
        run_name,
        run_train,
        timing_file,
        write_shards,
    )
    from support.train import write_params as write_train_params

    params = make_params(budgets=[4096], arms=["gpt"], learning_rates={"cpu-4l": {"gpt": [3e-3]}})
    name = run_name("gpt", 4096)
    roots = [tmp_path / "first", tmp_path / "second"]
    logs = []
    for root in roots:
        write_shards(root)
        write_train_params(root, params)
        proc = run_train(root, name)
        assert proc.returncode == 0, proc.stderr[-3000:]
        logs.append(proc.stderr)
    outputs = [run_dir(Path(), name) / "model.safetensors", run_dir(Path(), name) / "config.json",
               results_dir(Path(), name) / "summary.json", results_dir(Path(), name) / "metrics.jsonl"]
    for output in outputs:
        assert (roots[0] / output).read_bytes() == (roots[1] / output).read_bytes(), output
    assert timing_file(roots[0], name).is_file()

    # Without a progress bar (--no-progress, as in every rule), the log still says what happens.
    lines = [line for line in logs[0].splitlines() if line.startswith("ngptlab train: ")]
    assert re.match(r"ngptlab train: host \S+ rank 0/1 local rank 0: CUDA_VISIBLE_DEVICES=", lines[0])
    assert lines[1].startswith(f"ngptlab train: start {name}: from step 0 of 8 (4,096 tokens")
    evals = [line for line in lines if " step " in line and " ETA " in line]
    assert len(evals) == 2  # eval_every_tokens 2048 of 4096
    assert re.search(r"step 4/8 tokens 2,048/4,096 \(50%\) train loss \d+\.\d{4} val loss \d+\.\d{4} "
                     r"tok/s [\d,]+ MFU n/a ETA \d\d:\d\d:\d\d$", evals[0])
    assert lines[-1].startswith(f"ngptlab train: end {name}: completed 8 steps, final val loss ")


NUMBER = re.compile(r"^-?\d+(\.\d+)?(e[+-]?\d+)?$")


def test_dvc_metrics_show_one_short_row_of_numbers_per_cell_and_arm_and_the_figures_dvc_plots(recorded,
                                                                                                tmp_path):
    """`dvc metrics show` reads the report's flat metrics, one file per cell and arm (the best final loss, the
    speed-up and its interval's bounds): one row each, numbers only, lines a terminal shows whole; every other
    result is a plain output."""
    params = two_cell_params()
    cells = enumerate_cells(Params.of(params))
    lines = dvc(recorded, "metrics", "show").stdout.splitlines()
    header, rows = lines[0].split(), [line.split() for line in lines[1:] if line.strip()]
    assert max(len(line) for line in lines) < 200, max(len(line) for line in lines)
    assert header == ["Path", *sorted(HEADLINE)]
    assert sorted(row[0] for row in rows) == sorted(f"reports/metrics/{cell}/{arm}.json" for cell in cells
                                                    for arm in params["train"]["arms"])
    assert all(NUMBER.match(value) for row in rows for value in row[1:]), rows

    git(recorded, "add", "-A")
    git(recorded, "commit", "-q", "-m", "recorded")
    headline = f"reports/metrics/{cells[0]}/gpt.json"
    (recorded / headline).write_text(json.dumps({**HEADLINE, "speedup": 1.25}))
    try:
        diff = json.loads(dvc(recorded, "metrics", "diff", "HEAD", "--json").stdout)
        assert set(diff) == {headline}
        change = diff[headline]["speedup"]
        assert (change["old"], change["new"]) == (1.5, 1.25)
    finally:
        (recorded / headline).write_text(json.dumps(HEADLINE))

    out = dvc(recorded, "plots", "diff", "HEAD", "--out", str(tmp_path / "plots")).stdout
    assert (tmp_path / "plots" / "index.html").is_file(), out
    assert "loss.svg" in (tmp_path / "plots" / "index.html").read_text()


# ----------------------------------------------------------------------------------------------------------
# Interrupts (runs the pipeline: slow)


@pytest.mark.slow
def test_an_interrupted_snakemake_is_resumed_by_a_plain_snakemake(tmp_path, tmp_path_factory):
    """After SIGINT (Ctrl-C, `kill -INT`) to Snakemake, and again after SIGTERM (a scheduler, `kill`) to the
    next one, a plain `snakemake` goes on (no IncompleteFilesException: the workflow profile reruns incomplete
    jobs), completes the grid and then has nothing to do. A training the signals stopped resumed from its
    checkpoint to the metrics log of a training that went through, byte for byte (tests/test_train_resume.py:
    more)."""
    from support.workflow import e2e_params, environment

    from ngptlab.train.loop import train_run

    params = e2e_params()
    train = params["train"]
    scale = train["scales"][0]
    train.update(budgets=[4096], eval_every_tokens=1024, checkpoint_every_tokens=1024)
    train["learning_rates"] = {scale: {arm: [3.0e-3] for arm in train["arms"]}}
    work = make_workdir(tmp_path / "repo", params)
    copy_tokens(tmp_path_factory.getbasetemp(), work)
    settings = Params.of(params)

    for sig in (signal.SIGINT, signal.SIGTERM):
        shutil.rmtree(work / "logs" / "train", ignore_errors=True)  # count this Snakemake's evaluations only
        with open(tmp_path / f"{sig.name}.log", "w") as log:
            # The default SIGINT action even where this test runs in a background job (which ignores SIGINT).
            default_sigint = lambda: signal.signal(signal.SIGINT, signal.default_int_handler)  # noqa: E731
            proc = subprocess.Popen([str(BIN / "snakemake"), "--cores", "1"], cwd=work, env=environment(),
                                    stdout=log, stderr=subprocess.STDOUT, preexec_fn=default_sigint)
            deadline = time.monotonic() + 900
            # An evaluation logged: a training is under way.
            while not any(" ETA " in p.read_text() for p in work.glob("logs/train/*/*.log")):
                assert proc.poll() is None and time.monotonic() < deadline, \
                    (tmp_path / f"{sig.name}.log").read_text()
                time.sleep(1)
            proc.send_signal(sig)
            assert proc.wait(timeout=600) != 0
        assert len(list(work.glob("results/train/*/*/summary.json"))) < len(enumerate_runs(settings))

    snakemake(work, "--cores", "1", timeout=1800)  # plain: no --rerun-incomplete on the command line
    assert (work / "reports" / "report.md").is_file()
    out = snakemake(work, "--dry-run")
    assert "Nothing to be done" in out.stdout + out.stderr

    through = tmp_path / "through"
    copy_tokens(tmp_path_factory.getbasetemp(), through)
    for run in enumerate_runs(settings):
        results = Path(layout.train_results_dir(run.cell, run.name))
        if json.loads((work / results / "summary.json").read_text())["resumed_from"]:
            assert train_run(run, settings.train, root=through, progress=False,
                             condition=settings.condition) == 0
            assert (work / results / "metrics.jsonl").read_bytes() == \
                (through / results / "metrics.jsonl").read_bytes(), run.name


@pytest.mark.slow
def test_after_keep_going_with_a_failed_run_the_report_renders_naming_it_and_its_log(tmp_path,
                                                                                   tmp_path_factory):
    import fcntl

    from support.workflow import e2e_params

    params = e2e_params()
    train = params["train"]
    scale = train["scales"][0]
    train.update(budgets=[2048])
    train["learning_rates"] = {scale: {arm: [3.0e-3] for arm in train["arms"]}}
    work = make_workdir(tmp_path / "repo", params)
    copy_tokens(tmp_path_factory.getbasetemp(), work)
    failing = next(run for run in enumerate_runs(Params.of(params)) if run.arm == "ngpt")
    state = work / layout.run_dir(failing.cell, failing.name) / "state"
    state.mkdir(parents=True)
    with open(state / ".lock", "w") as lock:  # another process "trains" it: this run fails at once
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        out = snakemake(work, "--cores", "1", "--keep-going", check=False, timeout=1800)
    assert out.returncode != 0
    log = (work / layout.train_log(failing.cell, failing.name)).read_text()
    assert "already being trained by another process" in log
    report = (work / "reports" / "report.md").read_text()
    assert failing.name in report and "logs/train/<cell>/<run>.log" in report

    # An edit to a per-run stage's code reruns its jobs (its fingerprint is in the stage's lineage key).
    def planned() -> set[tuple[str, str]]:
        return {(job.rule, job.outputs[0]) for job in planned_jobs(snakemake(work, "--dry-run").stdout)
                if job.rule != "all"}

    before = planned()
    code = work / "src" / "ngptlab" / "condition" / "analyse.py"
    code.write_text(code.read_text() + "\n_EDITED = True  # a line of the condition stage's code\n")
    completed = [run for run in enumerate_runs(Params.of(params)) if run != failing]
    added = planned() - before
    assert {job for job in added if job[0] != "lineage"} == \
        {("condition", f"results/conditioning/{run.name}.json") for run in completed}
    # ... through their new lineage keys, which the report's key includes
    assert {output.split("/")[2] for rule, output in added if rule == "lineage"} == {"condition", "report"}
