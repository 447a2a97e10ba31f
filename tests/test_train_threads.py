"""A run computes on the threads it sets itself (train/threads.py): trained as the workflow launches it
(workflow/scripts/launch.sh) and by hand with another OMP_NUM_THREADS, it ends with the same bytes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch
from support.train import (
    REPO,
    cli_env,
    make_params,
    run_dir,
    run_name,
    summary,
    write_params,
    write_shards,
)

from ngptlab.grid.enumeration import find_run
from ngptlab.settings import Params
from ngptlab.train.loop import train_run
from ngptlab.train.threads import THREADS_PER_PROCESS

BUDGET = 2048  # 4 steps
NAME = run_name("gpt", BUDGET)


def test_a_run_by_hand_ends_with_the_bytes_of_the_same_run_launched_by_the_workflow(tmp_path):
    roots = {}
    for how in ("launch", "by-hand"):
        root = roots[how] = tmp_path / how
        write_shards(root)
        write_params(root, make_params(budgets=[BUDGET]))
        args = ["train", "--params", str(root / "params.yaml"), "--root", str(root), "--no-progress", NAME]
        env = {**cli_env(), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
        if how == "launch":  # the train rule's command for a one-process run
            env.pop("OMP_NUM_THREADS")
            command = ["bash", str(REPO / "workflow/scripts/launch.sh"), "1", "1", "0", *args]
        else:  # torch would take this many threads
            env["OMP_NUM_THREADS"] = "2"
            command = [sys.executable, "-m", "ngptlab.cli", *args]
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        assert summary(root, NAME)["threads"] == THREADS_PER_PROCESS == 1
    launched, by_hand = ((run_dir(roots[how], NAME) / "model.safetensors").read_bytes()
                         for how in ("launch", "by-hand"))
    assert launched == by_hand


def test_the_thread_count_is_the_summarys_last_key_and_the_callers_is_restored(tmp_path):
    write_shards(tmp_path)
    params = make_params(budgets=[BUDGET])
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        settings = Params.of(params)
        assert train_run(find_run(settings, NAME), settings.train, root=tmp_path, progress=False) == 0
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    s = summary(tmp_path, NAME)
    assert list(s)[-3:] == ["attention_backend", "nonfinite_retries", "threads"] and s["threads"] == 1
