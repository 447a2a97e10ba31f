"""One run's first contact with a real Slurm cluster, through `snakemake --profile slurm`: a run longer than
train.max_job_minutes completes over several Slurm jobs, each stopping itself before its limit; a job sent
its early signal (what sbatch --signal delivers), a requeued job (`scontrol requeue`) and a cancelled one
are all resumed, Snakemake does not hang on any of them, and the run ends with the bytes of a run that went
through in one process: its weights and its whole metrics log.

The reference trains in the background from the module's start, while the signals test waits on Slurm (most
of its time: Snakemake's status checks); the run over several jobs comes after, alone, since the work each
of its jobs gets done before its own clock stops it shrinks with every process beside it.

Needs the cluster that `.ci/setup-slurm.sh` starts (CI runs it before the tests).
"""

from __future__ import annotations

import functools
import json
import subprocess
import time
from pathlib import Path

import pytest
from support.workflow import (
    BIN,
    E2E_BUDGETS,
    REPO,
    SLURM_MARKS,
    SLURM_PROFILE,
    copy_tokens,
    e2e_params,
    environment,
    make_workdir,
    run,
    snakemake,
)

from ngptlab import layout
from ngptlab.grid.enumeration import enumerate_runs
from ngptlab.settings import Params

pytestmark = SLURM_MARKS
SLURM = SLURM_PROFILE
BUDGET = 4 * max(E2E_BUDGETS)  # 64 steps of 512 tokens: ~20 s of training on one Slurm CPU here


def one_run_params(**train) -> dict:
    """The end-to-end grid cut to one longer gpt run, checkpointing every 8 steps."""
    params = e2e_params()
    scale = params["train"]["scales"][0]
    params["train"].update(arms=["gpt"], budgets=[BUDGET], learning_rates={scale: {"gpt": [3.0e-3]}},
                           eval_every_tokens=BUDGET // 4, checkpoint_every_tokens=8 * 512, **train)
    params["speedup"]["baseline"] = "gpt"
    return params


def workdir(base: Path, name: str, base_temp: Path, **train) -> tuple[Path, str, str]:
    params = one_run_params(**train)
    [spec] = enumerate_runs(Params.of(params))
    work = make_workdir(base / name, params)
    copy_tokens(base_temp, work)
    return work, spec.name, f"{layout.run_dir(spec.cell, spec.name)}/model.safetensors"


def state_step(work: Path, model: str) -> int:
    try:
        return json.loads((work / Path(model).parent / "state" / "latest.json").read_text())["step"]
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return -1


def slurm_logs(work: Path) -> list[Path]:
    """The sbatch logs of the train rule's jobs, in submission order (the profile keeps one per job)."""
    return sorted((work / "logs" / "slurm" / "rule_train").rglob("*.log"), key=lambda p: int(p.stem))


def train_jobs(work: Path) -> list[str]:
    """The Slurm job ids of the train rule's jobs, in submission order."""
    return [log.stem for log in slurm_logs(work)]


def job_field(job: str, field: str) -> str:
    out = run(["scontrol", "show", "job", job], Path("."), check=False).stdout
    return next((word.split("=", 1)[1] for word in out.split() if word.startswith(f"{field}=")), "")


def wait_for(condition, what: str, proc: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"snakemake ended (exit {proc.returncode}) while waiting for {what}:\n"
                                 f"{proc.stderr.read()[-4000:]}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def run_bytes(work: Path) -> dict[str, bytes]:
    """The run's weights and metrics log (every row, the angular update rate of each evaluation included)."""
    found = [*work.glob("runs/*/*/model.safetensors"), *work.glob("results/train/*/*/metrics.jsonl")]
    assert len(found) == 2, found
    return {path.name: path.read_bytes() for path in found}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The bytes of the run trained through in one process, without Slurm and without a job limit: started
    with the module, read when a test first compares against it (`reference()`)."""
    work, name, _ = workdir(tmp_path_factory.mktemp("reference"), "work", tmp_path_factory.getbasetemp())
    log = work.parent / "train.log"
    with open(log, "w") as out:  # a file: a pipe nobody reads would fill and stall it
        proc = subprocess.Popen(["bash", str(REPO / "workflow/scripts/launch.sh"), "1", "1", "0", "train",
                                 "--params", "params.yaml", "--no-progress", name],
                                cwd=work, env=environment(), stdout=out, stderr=subprocess.STDOUT)

    @functools.cache
    def finished() -> dict[str, bytes]:
        returncode = proc.wait(timeout=600)
        assert returncode == 0, f"the reference exited {returncode}:\n{log.read_text()[-6000:]}"
        return run_bytes(work)

    yield finished
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_an_early_signal_a_requeue_and_a_cancel_are_all_resumed(reference, tmp_path, tmp_path_factory):
    work, name, model = workdir(tmp_path, "signals", tmp_path_factory.getbasetemp())
    proc = subprocess.Popen([str(BIN / "snakemake"), model, "--cores", "2", *SLURM, "--retries", "2"],
                            cwd=work, env=environment(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        # 1. The early signal: SIGTERM to every process of the job, as sbatch --signal=TERM@lead sends it.
        wait_for(lambda: state_step(work, model) >= 8, "a first checkpoint", proc)
        [first] = train_jobs(work)
        run(["scancel", "--signal=TERM", first], work)
        wait_for(lambda: len(train_jobs(work)) == 2, "the next attempt after the signal", proc)
        second = train_jobs(work)[1]
        signalled_at = state_step(work, model)
        # 2. A requeue: the same job again (Slurm holds a requeued job back for a while; release it now).
        wait_for(lambda: job_field(second, "JobState") == "RUNNING"
                 and state_step(work, model) > signalled_at, "the second job's progress", proc)
        run(["scontrol", "requeue", second], work)
        wait_for(lambda: job_field(second, "JobState") == "PENDING", "the requeued job to be pending", proc)
        run(["scontrol", "update", f"JobId={second}", "StartTime=now"], work)
        requeued_at = state_step(work, model)
        wait_for(lambda: job_field(second, "Restarts") == "1" and job_field(second, "JobState") == "RUNNING"
                 and state_step(work, model) > requeued_at, "the requeued job's progress", proc)
        # 3. A cancel: the job fails, and the rule's retry resumes the run.
        run(["scancel", second], work)
        assert proc.wait(timeout=600) == 0, proc.stderr.read()[-4000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert len(train_jobs(work)) == 3 and job_field(first, "JobState") == "FAILED"
    assert job_field(second, "JobState") == "CANCELLED"
    summary = json.loads(next((work / "results" / "train").rglob("summary.json")).read_text())
    assert len(summary["resumed_from"]) >= 3 and summary["status"] == "completed"
    assert run_bytes(work) == reference()


def test_a_run_longer_than_its_partition_limit_completes_over_several_slurm_jobs(reference, tmp_path,
                                                                              tmp_path_factory):
    work, name, model = workdir(tmp_path, "split", tmp_path_factory.getbasetemp(), max_job_minutes=0.45)
    dry = snakemake(work, model, "--cores", "2", *SLURM, "--dry-run").stdout
    # 27 s jobs ask Slurm for a minute, without an early signal (which Slurm may send up to a minute early)
    assert "runtime=1," in dry and "--signal" not in dry

    snakemake(work, model, "--cores", "2", *SLURM, timeout=900)

    jobs = train_jobs(work)
    assert len(jobs) >= 2  # each stopped itself (exit 75) and the rule's next attempt resumed the run
    *stopped, last = [log.read_text() for log in slurm_logs(work)]
    # each job stopped itself, and its job step did not try again inside it (the next attempt is a new job)
    assert all("Error in rule train" in text and "Trying to restart" not in text for text in stopped)
    assert "Finished jobid" in last
    summary = json.loads(next((work / "results" / "train").rglob("summary.json")).read_text())
    assert len(summary["resumed_from"]) == len(jobs) - 1
    log = (work / layout.train_log(name.split("-gpt-")[0], name)).read_text()  # the last job's
    assert f"(Slurm job {jobs[-1]}, restart 0)" in log and "resumed from step" in log
    assert run_bytes(work) == reference()
