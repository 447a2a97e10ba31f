"""docs/cluster.md, run as written: every command of its fenced `bash` blocks, in the page's order, in one
shell, on the rehearsal preset (settle in miniature), on the real Slurm `.ci/setup-slurm.sh` starts and with a
DVC remote on the real SSH server `.ci/setup-sshd.sh` starts. Only the placeholders are substituted (the
partition and account, the remote, the cache directory, the repository's address, the preset's name).

On the way the test checks what the page promises: the corpus exported and read as `kind: local`; settle's
protocol (the conditioning square, the angle arms at their matched angle, the tuning check, the pruning, an
added seed) trained through Slurm; one two-process training job preempted mid-run (`scontrol requeue`: SIGTERM
to every process of the job, then the job again) ending with the bytes of an uninterrupted run; a fresh clone
that pulls the spectra tables alone and re-renders the report byte for byte; `dvc repro --pull
--allow-missing` after a change rerunning the report alone; and nothing left to do for Snakemake after a full
`dvc pull`. A block the recipe does not run must be named in NOT_RUN with the test that covers it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from safetensors import safe_open
from support.workflow import DOWNLOAD_CACHE, REPO, SLURM_MARKS, SSH_ENV, environment, on_server, run, tree

from ngptlab import layout
from ngptlab.checkpoint import HASH_KEY
from ngptlab.config.load import load_params
from ngptlab.grid.enumeration import enumerate_runs

PAGE = REPO / "docs" / "cluster.md"

ON_THE_CLUSTER = [
    pytest.mark.recipe,  # not in `make test`: an hour or more of Slurm jobs on two cores (docs/tests.md)
    *SLURM_MARKS,
    pytest.mark.ssh,
    pytest.mark.skipif(not SSH_ENV.is_file(),
                       reason=f"no SSH server here (no {SSH_ENV}); `bash .ci/setup-sshd.sh` starts one"),
]

# Blocks the recipe leaves to other tests, by the heading they stand under: each such block's commands must
# be run elsewhere on this page (the same command, another preset) or by the test named here.
NOT_RUN = {
    "OpenWebText": "needs the Hugging Face Hub (this machine has no internet); the rehearsal's corpus is "
                   "exported and read the same way (`kind: local` parquet, its footers checked)",
    "Step 1: first-light": "a GPU machine's step; `ngptlab bench gpu` is rehearsed on CPU by "
                           "tests/test_bench_gpu.py, and its other commands are settle's below",
    "Step 2: pilot": "settle's commands without the angle arms and the pruning (the rehearsal runs "
                     "settle's); `ngptlab design` on the presets is tests/test_design.py's",
}
ELSEWHERE = {"ngptlab bench gpu": "tests/test_bench_gpu.py", "ngptlab design": "tests/test_design.py",
             "snakemake --cores": "tests/test_workflow.py",  # a local run of the whole DAG
             "hf download": None}  # None: runs nowhere here (no internet), said in NOT_RUN


def verb(command: str) -> str:
    """A command's program and subcommand, `make preset NAME=pilot` -> `make preset`."""
    return " ".join(command.split()[:2])


@dataclass(frozen=True)
class Block:
    heading: str
    commands: tuple[str, ...]


def page_blocks(text: str) -> list[Block]:
    """The page's fenced bash blocks, each as its commands (continued lines joined, comments dropped)."""
    blocks, heading = [], ""
    for match in re.finditer(r"^(#{2,3}) ([^\n]+)$|^```bash\n(.*?)^```$", text, re.M | re.S):
        if match.group(2):
            heading = match.group(2).strip()
            continue
        joined = match.group(3).replace("\\\n", " ")
        commands = []
        for line in joined.splitlines():
            command = strip_comment(line).strip()
            if command:
                commands.append(command)
        blocks.append(Block(heading, tuple(commands)))
    return blocks


def strip_comment(line: str) -> str:
    """The line without a trailing `# comment` (a `#` inside quotes stays)."""
    quoted, out = None, []
    for char in line:
        if quoted:
            quoted = None if char == quoted else quoted
        elif char in "'\"":
            quoted = char
        elif char == "#":
            break
        out.append(char)
    return "".join(out)


class Shell:
    """One shell session, a command at a time: exported variables and the directory carry over."""

    def __init__(self, cwd: Path, state: Path, substitutions: dict[str, str]) -> None:
        self.cwd, self.state, self.substitutions = cwd, state, substitutions
        state.write_text("")

    def script(self, command: str) -> str:
        for placeholder, value in self.substitutions.items():
            command = command.replace(placeholder, value)
        return (f"set -eo pipefail\nsource {self.state}\ncd {shlex.quote(str(self.cwd))}\n{command}\n"
                f"status=$?\nexport -p > {self.state}.next\npwd > {self.state}.cwd\nexit $status\n")

    def start(self, command: str) -> subprocess.Popen:
        return subprocess.Popen(["bash", "-c", self.script(command)], env=environment(), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def finish(self, command: str, proc: subprocess.Popen, timeout: float) -> str:
        out, _ = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, f"`{command}` exited {proc.returncode} in {self.cwd}:\n{out[-8000:]}"
        next_state = Path(f"{self.state}.next")
        self.state.write_text(next_state.read_text())
        self.cwd = Path(Path(f"{self.state}.cwd").read_text().strip())
        return out

    def __call__(self, command: str, timeout: float = 1800) -> str:
        return self.finish(command, self.start(command), timeout)


def tensors_sha256(path: Path) -> str:
    with safe_open(str(path), "pt") as f:
        return f.metadata()[HASH_KEY]


def a_clone_of_this_repository(dest: Path) -> Path:
    """What `git clone` gives, from the working tree (its tracked and new files), with the venv and the
    download cache of this machine in place: `make .venv/.installed` then finds the venv up to date."""
    files = run(["git", "ls-files", "-co", "--exclude-standard"], REPO).stdout.split("\n")
    for name in filter(None, files):
        source = REPO / name
        if source.is_file() and not source.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
        elif source.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).symlink_to(source.readlink())
    (dest / ".venv").symlink_to(Path(sys.prefix))
    (dest / "data" / "cache").parent.mkdir(parents=True, exist_ok=True)
    (dest / "data" / "cache").symlink_to(DOWNLOAD_CACHE)
    installed = Path(sys.prefix) / ".installed"
    if installed.exists():  # the lock and the metadata older than the install, as in the clone it came from
        stamp = installed.stat().st_mtime - 1
        for name in ("requirements.lock", "pyproject.toml"):
            os.utime(dest / name, (stamp, stamp))
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "the repository"]):
        run(["git", *args], dest)
    return dest


class Preemption:
    """Requeues (preempts) the Slurm job of one two-process run once it has checkpointed: Slurm sends SIGTERM
    to every process of the job, and starts the job again, which resumes the run."""

    def __init__(self, work: Path, run_name: str, cell: str) -> None:
        self.work, self.run, self.cell = work, run_name, cell
        self.job: str | None = None
        self.step: int | None = None
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.done = threading.Event()

    def _state_step(self) -> int:
        try:
            path = self.work / layout.run_dir(self.cell, self.run) / "state" / "latest.json"
            return json.loads(path.read_text())["step"]
        except (FileNotFoundError, json.JSONDecodeError, KeyError):
            return -1

    def _job(self) -> str | None:
        logs = [p for p in (self.work / "logs" / "slurm" / "rule_train").rglob("*.log")
                if p.parent.name.endswith(f"_{self.run}")]  # not its WSD namesake, <run>-wsd
        return max(logs, key=lambda p: int(p.stem)).stem if logs else None

    def _watch(self) -> None:
        while not self.done.is_set():
            step = self._state_step()
            if step > 0 and (job := self._job()):
                subprocess.run(["scontrol", "requeue", job], check=True, capture_output=True)
                self.job, self.step = job, step
                deadline = time.monotonic() + 120  # a requeued job waits; let it start again now
                while time.monotonic() < deadline:
                    state = subprocess.run(["scontrol", "show", "job", job], capture_output=True,
                                           text=True).stdout
                    if "JobState=PENDING" in state:
                        subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"],
                                       capture_output=True)
                        return
                    time.sleep(0.2)
                return
            time.sleep(0.02)


def test_every_command_of_the_page_runs_in_a_test():
    """The recipe below runs every block but those NOT_RUN names; theirs must run there too (the same program
    and subcommand, another preset) or in the test ELSEWHERE names."""
    blocks = page_blocks(PAGE.read_text())
    assert {b.heading for b in blocks} >= set(NOT_RUN), "NOT_RUN names a heading docs/cluster.md lacks"
    ran = {verb(c) for b in blocks if b.heading not in NOT_RUN for c in b.commands}
    for block in blocks:
        for command in block.commands if block.heading in NOT_RUN else ():
            covering = next((test for prefix, test in ELSEWHERE.items() if command.startswith(prefix)), "")
            assert verb(command) in ran or covering is None or (covering and (REPO / covering).is_file()), \
                f"docs/cluster.md, {block.heading}: `{command}` runs in no test"


def on_the_cluster(test):
    """Slurm's and the SSH server's marks, for the one test that needs them."""
    for mark in ON_THE_CLUSTER:
        test = mark(test)
    return test


@on_the_cluster
def test_the_cluster_page_runs_as_written_on_the_rehearsal(tmp_path):
    ssh = dict(line.split("=", 1) for line in SSH_ENV.read_text().split())
    remote = f"{ssh['NGPTLAB_SSH_ROOT']}/{uuid.uuid4().hex}"
    origin = a_clone_of_this_repository(tmp_path / "ngptlab")
    fast_polling = "--slurm-init-seconds-before-status-checks 1 --max-status-checks-per-second 10"
    substitutions = {
        "slurm_partition=gpu slurm_account=myproject": f"slurm_partition=multi slurm_account=rehearsal "
                                                       f"{fast_polling}",
        "ssh://user@host:2222/srv/dvc/ngptlab": f"ssh://{ssh['NGPTLAB_SSH_USER']}@{ssh['NGPTLAB_SSH_HOST']}:"
                                                f"{ssh['NGPTLAB_SSH_PORT']}{remote}",
        "~/.ssh/id_ed25519": ssh["NGPTLAB_SSH_KEY"],
        "/scratch/$USER/ngptlab-dvc-cache": str(tmp_path / "dvc-cache"),
        "git@github.com:mygroup/ngptlab.git": str(origin),
        "export PRESET=settle": "export PRESET=rehearsal",
    }
    blocks = page_blocks(PAGE.read_text())
    shell = Shell(origin, tmp_path / "shell.env", substitutions)
    preempted, started = None, time.monotonic()
    try:
        for block in blocks:
            if block.heading in NOT_RUN:
                continue
            protocol = "$PRESET" in " ".join(block.commands)  # settle's steps
            for command in block.commands:
                trains = protocol and "snakemake --profile slurm" in command  # alone or in the tuning loop
                before, began = results_of_runs(origin), time.monotonic()
                if trains and preempted is None:  # the first: `snakemake --profile slurm $SLURM_ARGS`
                    preempted = preempt_during(shell, command, origin)
                    continue
                out = shell(command)
                if trains:  # a grown grid trains its new runs only
                    after = results_of_runs(origin)
                    assert {k: after.get(k) for k in before} == before, f"`{command}` retrained a run"
                check_after(command, out, shell.cwd, origin)
                print(f"{time.monotonic() - began:6.0f} s  {command[:100]}", flush=True)
    finally:
        on_server(ssh, f"rm -rf {remote}", check=False)
    print(f"the cluster recipe on the rehearsal: {time.monotonic() - started:.0f} s")

    # Settle's protocol, through Slurm: every run of the grown grid trained (or diverged) in a Slurm job.
    params = load_params(origin / "params.yaml")
    runs = enumerate_runs(params)
    assert {r.arm for r in runs} == set(params.train.arms) and max(r.seed for r in runs) == 1
    for spec in runs:
        summary = json.loads((origin / layout.train_results_dir(spec.cell, spec.name) / "summary.json")
                             .read_text())
        assert summary["status"] in ("completed", "diverged"), spec.name
    for rule in ("prepare", "trunk", "train", "condition", "speedup", "evaluate", "report"):
        logs = list((origin / "logs" / "slurm" / f"rule_{rule}").rglob("*.log"))
        assert logs, f"no {rule} job ran through Slurm"
    assert len(list((origin / "logs" / "slurm" / "rule_train").rglob("*.log"))) >= len(runs)

    # The preempted run: resumed from its checkpoint, with the bytes of the same run trained through.
    assert preempted is not None and preempted.job, "no training job was preempted"
    spec = next(r for r in runs if r.name == preempted.run)
    summary_path = origin / layout.train_results_dir(spec.cell, spec.name) / "summary.json"
    summary = json.loads(summary_path.read_text())
    assert summary["resumed_from"], f"{spec.name} was requeued at step {preempted.step} but did not resume"
    reference = tmp_path / "uninterrupted"
    (reference / "data").mkdir(parents=True)
    shutil.copytree(origin / "data" / "tokens", reference / "data" / "tokens")
    shutil.copy2(origin / "params.yaml", reference / "params.yaml")
    run(["bash", str(origin / "workflow" / "scripts" / "launch.sh"), "1", "2", "0", "train", "--params",
         "params.yaml", "--root", str(reference), "--no-progress", spec.name], reference)
    model = layout.run_dir(spec.cell, spec.name) / "model.safetensors"
    assert tensors_sha256(origin / model) == tensors_sha256(reference / model)
    metrics = layout.train_results_dir(spec.cell, spec.name) / "metrics.jsonl"
    assert (origin / metrics).read_bytes() == (reference / metrics).read_bytes()


def results_of_runs(work: Path) -> dict[str, bytes]:
    """Every trained run's summary (its final loss, tokens and checkpoint hash), by path."""
    return {str(p.relative_to(work)): p.read_bytes() for p in work.glob("results/train/*/*/summary.json")}


def check_after(command: str, out: str, here: Path, origin: Path) -> None:
    """What the page promises of a command, checked right after it ran."""
    if command.startswith("dvc repro --force --single-item report"):
        assert tree(here / "reports") == tree(origin / "reports"), \
            "a fresh clone's re-render must be byte-identical to the pushed report"
        assert not (here / "runs").exists(), "re-rendering the report pulled a checkpoint"
    if command.startswith("dvc repro --pull --allow-missing"):
        ran = set(re.findall(r"Running stage '([a-z]+)", out))
        assert "report" in ran and ran <= {"plan", "report"}, out[-3000:]
    if command == "snakemake -n":
        assert "Nothing to be done" in out, out[-3000:]


def preempt_during(shell: Shell, command: str, work: Path) -> Preemption:
    """Run the first training command of settle's steps, preempting one two-process calibration run (a cosine
    run from step 0, so an uninterrupted run of it needs nothing but the shards) once it checkpointed."""
    params = load_params(work / "params.yaml")
    calibration = next(r for r in enumerate_runs(params) if r.schedule == "cosine")
    preemption = Preemption(work, calibration.name, calibration.cell)
    proc = shell.start(command)
    preemption.thread.start()
    try:
        shell.finish(command, proc, timeout=3600)
    finally:
        preemption.done.set()
        preemption.thread.join()
    return preemption
