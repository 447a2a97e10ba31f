"""One run over two nodes, launched as the train rule launches it (workflow/scripts/launch.sh): two torchrun
agents (`--nnodes 2`, one process each) meeting at a c10d rendezvous on 127.0.0.1, gloo between them, the
way each Slurm node starts one. Real processes throughout.

- The two agents train exactly what two processes on one node train (same weights, bit for bit), and what
  one process trains with the same global batch (up to float summation order).
- A process killed mid-run: with a restart allowed (train.max_restarts), torchrun restarts both agents'
  processes, which resume from the last checkpoint and end where the uninterrupted run ends; without one,
  both agents fail, naming the dead rank, and rerunning them resumes to the same end.
- A resume reads the checkpoint on rank 0 alone, which broadcasts it: two processes on one node stopped by
  SIGTERM on one rank both checkpoint at the same step, and the rerun ends with the uninterrupted weights.
  Each rank logs its host and the GPUs it sees.
- SIGTERM to the agent and every worker at once (as slurmstepd sends it): exit 75 with a checkpoint, and the
  retry ends with the uninterrupted weights.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from safetensors import safe_open
from safetensors.torch import load_file
from support.train import (
    cli_env,
    make_params,
    metrics,
    results_dir,
    run_dir,
    run_name,
    summary,
    write_params,
    write_shards,
)

ARM = "ngpt"  # its post-step renormalisation must stay in step across nodes too
BUDGET = 16 * 512  # 16 steps of 16 sequences x 32 tokens; a checkpoint every 8 steps
NAME = run_name(ARM, BUDGET)
# 16 sequences per step: one process does 2 micro-batches of 8; each of 2 processes (1 or 2 nodes) one.
PARAMS = {"budgets": [BUDGET], "batch_sequences": 16, "micro_batch_tokens": 256,
          "checkpoint_every_tokens": 4096, "eval_every_tokens": 4096}
TIMEOUT = 240
LAUNCH = Path(__file__).resolve().parents[1] / "workflow" / "scripts" / "launch.sh"


def fresh_root(base: Path, name: str) -> Path:
    root = base / name
    write_shards(root)
    write_params(root, make_params(**PARAMS))
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(root: Path, nodes: int, processes: int, max_restarts: int = 0,
           endpoint: str | None = None) -> subprocess.Popen:
    command = ["bash", str(LAUNCH), str(nodes), str(processes), str(max_restarts), "train", "--params",
               str(root / "params.yaml"), "--root", str(root), "--no-progress", NAME]
    env = {**cli_env(), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    if endpoint:
        env.update(NGPTLAB_RDZV_ENDPOINT=endpoint, NGPTLAB_RDZV_ID=f"test-{endpoint}")
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def start_agents(root: Path, max_restarts: int = 0) -> list[subprocess.Popen]:
    """Two nodes' agents on this machine (launch.sh execs torchrun, so each is the agent's process)."""
    endpoint = f"127.0.0.1:{free_port()}"
    return [launch(root, 2, 1, max_restarts, endpoint) for _ in range(2)]


def finish(agents: list[subprocess.Popen]) -> list[tuple[int, str]]:
    out = []
    for agent in agents:
        _, err = agent.communicate(timeout=TIMEOUT)
        out.append((agent.returncode, err))
    return out


def run_agents(root: Path, max_restarts: int = 0) -> list[tuple[int, str]]:
    return finish(start_agents(root, max_restarts))


def checkpoint_step(root: Path) -> int:
    try:
        return json.loads((run_dir(root, NAME) / "state" / "latest.json").read_text())["step"]
    except (FileNotFoundError, json.JSONDecodeError):
        return -1


def kill_rank_after_checkpoint(agents: list[subprocess.Popen], root: Path, rank: int,
                               sig: int = signal.SIGKILL) -> int:
    """Signal (SIGKILL) the training process of global rank `rank` once a checkpoint exists; returns the
    checkpoint's step."""
    deadline = time.monotonic() + TIMEOUT
    while checkpoint_step(root) < 8:
        assert all(a.poll() is None for a in agents), "an agent ended before the kill"
        assert time.monotonic() < deadline
        time.sleep(0.002)
    for agent in agents:
        for child in psutil.Process(agent.pid).children(recursive=True):
            if child.environ().get("RANK") == str(rank):
                child.send_signal(sig)
                return checkpoint_step(root)
    raise AssertionError(f"no process of rank {rank} found")


def weights(root: Path) -> dict:
    return load_file(str(run_dir(root, NAME) / "model.safetensors"))


def tensors_sha256(root: Path) -> str:
    """The final model's tensor hash, from its header."""
    with safe_open(str(run_dir(root, NAME) / "model.safetensors"), framework="pt") as f:
        return f.metadata()["tensors_sha256"]


def same_metrics(root: Path, reference: Path) -> bool:
    """The two runs' metrics logs are the same bytes."""
    path = results_dir(Path(), NAME) / "metrics.jsonl"
    return (root / path).read_bytes() == (reference / path).read_bytes()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The run on one process, on two processes of one node, and on two nodes of one process each."""
    base = tmp_path_factory.mktemp("nodes")
    roots = {key: fresh_root(base, key) for key in ("single", "one-node", "two-nodes")}
    for key, processes in (("single", 1), ("one-node", 2)):
        [(code, err)] = finish([launch(roots[key], 1, processes)])
        assert code == 0, err[-3000:]
    for code, err in run_agents(roots["two-nodes"]):
        assert code == 0, err[-3000:]
    return roots


def test_two_nodes_train_what_one_node_and_one_process_train(reference):
    single, one_node, two_nodes = (reference[k] for k in ("single", "one-node", "two-nodes"))
    s1, s2, sn = summary(single, NAME), summary(one_node, NAME), summary(two_nodes, NAME)
    assert (s1["params"]["world_size"], s1["params"]["grad_accum_steps"]) == (1, 2)
    assert (sn["params"]["world_size"], sn["params"]["grad_accum_steps"]) == (2, 1)
    assert sn["status"] == s1["status"] == "completed" and sn["tokens"] == s1["tokens"] == BUDGET
    assert sn["resumed_from"] == []
    # Two nodes and one node of two processes: the same computation, the same bytes.
    assert sn["checkpoint_sha256"] == s2["checkpoint_sha256"]
    assert metrics(two_nodes, NAME) == metrics(one_node, NAME)
    # One process with gradient accumulation: the same steps up to float summation order.
    assert sn["final_val_loss"] == pytest.approx(s1["final_val_loss"], abs=1e-5)
    rows_n, rows_1 = metrics(two_nodes, NAME), metrics(single, NAME)
    assert [r["step"] for r in rows_n] == [r["step"] for r in rows_1]
    for a, b in zip(rows_n, rows_1, strict=True):
        assert a["train_loss"] == pytest.approx(b["train_loss"], abs=1e-5)
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-4)
    assert sn["eval_windows_sha256"] == s1["eval_windows_sha256"]
    w_n, w_1 = weights(two_nodes), weights(single)
    assert w_n.keys() == w_1.keys()
    for key in w_n:
        assert (w_n[key] - w_1[key]).abs().max().item() < 1e-4, key


def test_a_killed_process_is_restarted_by_torchrun_and_resumes(reference, tmp_path):
    root = fresh_root(tmp_path, "restarted")
    agents = start_agents(root, max_restarts=1)
    killed_at = kill_rank_after_checkpoint(agents, root, rank=1)
    ended = finish(agents)
    for code, err in ended:
        assert code == 0, err[-3000:]
    here, uninterrupted = summary(root, NAME), summary(reference["two-nodes"], NAME)
    assert here["resumed_from"] and here["resumed_from"][0] >= killed_at >= 8
    # the restarted processes: rank 0 (on the first node) alone read the checkpoint, for both nodes
    logs, resumed = "".join(err for _, err in ended), here["resumed_from"][0]
    assert logs.count("read checkpoint") == 1 and f"read checkpoint step {resumed} (" in logs
    assert f"all 2 ranks start at step {resumed}" in logs
    assert here["final_val_loss"] == uninterrupted["final_val_loss"]
    assert here["checkpoint_sha256"] == uninterrupted["checkpoint_sha256"]
    assert same_metrics(root, reference["two-nodes"])


def test_a_killed_process_ends_both_nodes_and_the_retry_resumes(reference, tmp_path):
    root = fresh_root(tmp_path, "retried")
    agents = start_agents(root, max_restarts=0)
    killed_at = kill_rank_after_checkpoint(agents, root, rank=1)
    ended = finish(agents)
    assert all(code != 0 for code, _ in ended)  # neither node goes on alone
    logs = "".join(err for _, err in ended)
    assert "ChildFailedError" in logs and "rank      : 1" in logs and "Signal 9 (SIGKILL)" in logs
    assert not (results_dir(root, NAME) / "summary.json").exists()

    for code, err in run_agents(root):  # the workflow's retry: the same launch again
        assert code == 0, err[-3000:]
    here, uninterrupted = summary(root, NAME), summary(reference["two-nodes"], NAME)
    assert here["resumed_from"] and here["resumed_from"][0] >= killed_at >= 8
    assert here["final_val_loss"] == uninterrupted["final_val_loss"]
    assert here["checkpoint_sha256"] == uninterrupted["checkpoint_sha256"]
    assert same_metrics(root, reference["two-nodes"])


def test_rank_0_alone_reads_the_checkpoint_of_an_interrupted_run_and_every_rank_resumes_there(reference,
                                                                                              tmp_path):
    """Two processes on one node, SIGTERM to rank 1 after a checkpoint: both stop at the same step with a
    checkpoint; the rerun resumes with rank 0 alone reading it and broadcasting it, and ends with the
    uninterrupted run's weights. Each rank logs which GPUs it sees."""
    root = fresh_root(tmp_path, "sigterm")
    agent = launch(root, 1, 2)
    kill_rank_after_checkpoint([agent], root, rank=1, sig=signal.SIGTERM)
    [(_, err)] = finish([agent])
    stopped = checkpoint_step(root)
    assert f"interrupted at step {stopped}/16 (a stop asked on another rank); checkpoint saved" in err, \
        err[-3000:]
    assert 8 < stopped
    assert not (results_dir(root, NAME) / "summary.json").exists()

    [(code, err)] = finish([launch(root, 1, 2)])  # the workflow's retry
    assert code == 0, err[-3000:]
    assert err.count("read checkpoint") == 1
    state_dir = run_dir(root, NAME) / "state"
    assert f"rank 0 read checkpoint step {stopped} ({state_dir}); broadcast to 2 ranks" in err
    assert f"all 2 ranks start at step {stopped}" in err
    for rank in (0, 1):
        line = rf"ngptlab train: host \S+ rank {rank}/2 local rank {rank}: CUDA_VISIBLE_DEVICES=\S+, "
        assert re.search(line + r"(no GPU|\d+ GPUs? visible), on cpu; ", err), err[:2000]
    here, uninterrupted = summary(root, NAME), summary(reference["one-node"], NAME)
    assert here["resumed_from"] == [stopped]
    assert tensors_sha256(root) == tensors_sha256(reference["one-node"])
    assert here["checkpoint_sha256"] == uninterrupted["checkpoint_sha256"]
    # every row, the angular interval the checkpoint fell in included (rank 0 kept where it started)
    assert same_metrics(root, reference["one-node"])


def test_sigterm_to_the_agent_and_every_worker_at_once_checkpoints_and_resumes_to_the_same_bytes(reference,
                                                                                                 tmp_path):
    """Slurm signals every process of a job step at once (preemption, scancel, the --signal lead), and
    torchrun's agent forwards its own SIGTERM to the workers a moment later: a worker sees SIGTERM twice. The
    repeat is ignored while the checkpoint is written, so the job exits 75 (the rule's retry code) with a
    checkpoint, and the retry ends with the uninterrupted run's bytes."""
    root = fresh_root(tmp_path, "sigterm-all")
    agent = launch(root, 1, 2)
    deadline = time.monotonic() + TIMEOUT
    while checkpoint_step(root) < 8:
        assert agent.poll() is None and time.monotonic() < deadline, "the run ended before the signal"
        time.sleep(0.002)
    for process in [psutil.Process(agent.pid), *psutil.Process(agent.pid).children(recursive=True)]:
        process.send_signal(signal.SIGTERM)
    [(code, err)] = finish([agent])
    stopped = checkpoint_step(root)
    assert code == 75, err[-3000:]
    assert f"interrupted at step {stopped}/16" in err and 8 < stopped

    [(code, err)] = finish([launch(root, 1, 2)])
    assert code == 0, err[-3000:]
    assert summary(root, NAME)["resumed_from"] == [stopped]
    assert tensors_sha256(root) == tensors_sha256(reference["one-node"])
    assert same_metrics(root, reference["one-node"])


def test_a_run_over_nodes_outside_slurm_says_how_to_start_it(tmp_path):
    env = {k: v for k, v in cli_env().items() if not k.startswith(("SLURM_", "NGPTLAB_RDZV_"))}
    result = subprocess.run(["bash", str(LAUNCH), "2", "1", "0", "train", "--params", "params.yaml", NAME],
                            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "a run over 2 nodes runs inside a Slurm allocation of 2 nodes" in result.stderr
    assert "NGPTLAB_RDZV_ENDPOINT" in result.stderr and list(tmp_path.iterdir()) == []
