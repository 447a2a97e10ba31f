"""Shared helpers for the train and checkpoint tests (no tests here): tiny token shards and params files.

The shards hold a learnable synthetic language over a small vocabulary (so the CPU tests are fast): each
next token is a fixed function of the previous one 80% of the time, uniform noise otherwise. meta.json has
the layout `ngptlab prepare` writes (vocab_size, splits.{train,val}.{file,tokens,bytes,sha256}).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml

from ngptlab import layout
from support import fixture_params

REPO = Path(__file__).resolve().parents[2]
SOURCE = "synthetic"
VOCAB = 256
CONTEXT = 32


def write_shards(root: Path, vocab: int = VOCAB, train_tokens: int = 60_000, val_tokens: int = 8_000,
                 seed: int = 0) -> Path:
    out = root / "data" / "tokens" / SOURCE
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    splits = {}
    for split, n in (("train", train_tokens), ("val", val_tokens)):
        tokens = np.empty(n, dtype=np.int64)
        tokens[0] = rng.integers(vocab)
        noise = rng.random(n) < 0.2
        random_tokens = rng.integers(0, vocab, n)
        for i in range(1, n):
            tokens[i] = random_tokens[i] if noise[i] else (tokens[i - 1] * 7 + 3) % vocab
        data = tokens.astype("<u2").tobytes()
        (out / f"{split}.bin").write_bytes(data)
        splits[split] = {"file": f"{split}.bin", "tokens": n, "documents": 1, "bytes": len(data),
                         "sha256": hashlib.sha256(data).hexdigest()}
    (out / "meta.json").write_text(json.dumps({"vocab_size": vocab, "splits": splits}, indent=2))
    return out


def make_params(**train_overrides) -> dict:
    """The tests' own params (TEST_PARAMS) with a tiny train grid over the synthetic source."""
    params = fixture_params()
    params["prepare"]["source"] = {"kind": "local", "name": SOURCE, "files": ["none.txt"], "format": "text"}
    train = params["train"]
    train.update(source=SOURCE, scales=["cpu-4l"], contexts=[CONTEXT], arms=["gpt", "ngpt"], budgets=[8192],
                 seeds=[0], learning_rates={"cpu-4l": {"gpt": [3e-3], "ngpt": [3e-3]}}, batch_sequences=16,
                 micro_batch_tokens=256, warmup_steps=2, warmup_max_fraction=0.5, grad_clip=1.0,
                 eval_every_tokens=2048, eval_windows=8, eval_seed=0, final_eval_tokens="all",
                 diverge_loss=20.0, device="cpu", compile=False, checkpoint_every_tokens=4096)
    train.update(train_overrides)
    params["speedup"]["baseline"] = "gpt"
    return params


def write_params(root: Path, params: dict) -> Path:
    path = root / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


def run_name(arm: str = "gpt", budget: int = 8192, lr: float = 3e-3, seed: int = 0) -> str:
    from ngptlab.grid.runs import RunSpec

    return RunSpec("cpu-4l", CONTEXT, arm, budget, lr, seed).name


def cli_env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def train_command(root: Path, run: str, nproc: int = 1) -> list[str]:
    """`ngptlab train` for `run`; with nproc > 1 under torchrun."""
    args = ["train", "--params", str(root / "params.yaml"), "--root", str(root), "--no-progress", run]
    if nproc == 1:
        return [sys.executable, "-m", "ngptlab.cli", *args]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc),
            "-m", "ngptlab.cli", *args]


def run_train(root: Path, run: str, nproc: int = 1, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(train_command(root, run, nproc), env=cli_env(), capture_output=True, text=True,
                          timeout=timeout)


def cell_of(run: str) -> str:
    """The cell of a run named by these helpers: the name up to "-ctx<context>" and its dtype's "-bf16"."""
    return re.match(r"(.*-ctx\d+(?:-bf16)?)-", run)[1]


def run_dir(root: Path, run: str) -> Path:
    return root / layout.run_dir(cell_of(run), run)


def results_dir(root: Path, run: str) -> Path:
    return root / layout.train_results_dir(cell_of(run), run)


def timing_file(root: Path, run: str) -> Path:
    return root / layout.timing_file(cell_of(run), run)


def summary(root: Path, run: str) -> dict:
    return json.loads((results_dir(root, run) / "summary.json").read_text())


def metrics(root: Path, run: str) -> list[dict]:
    lines = (results_dir(root, run) / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


class StopsAfter3Steps:
    """The job's own clock (train/job_limit.py), run out after 3 steps of each job."""

    def __init__(self, train: dict, n_params: int):
        self.steps = 0

    def step_done(self) -> None:
        self.steps += 1

    def must_stop(self) -> bool:
        return self.steps >= 3

    def checkpoint_done(self, seconds: float) -> None:
        pass

    def reason(self) -> str:
        return "3 steps"


def whole_and_split(spec, train, tmp_path: Path, monkeypatch,
                    each_stop=lambda split: None) -> tuple[Path, Path]:
    """The run trained straight through (tmp_path/whole) and stopped every 3 steps until done
    (tmp_path/split, `each_stop` called after each stop)."""
    from ngptlab.train import loop

    whole, split = tmp_path / "whole", tmp_path / "split"
    write_shards(whole)
    assert loop.train_run(spec, train, root=whole, progress=False) == 0
    write_shards(split)
    monkeypatch.setattr(loop, "JobLimit", StopsAfter3Steps)
    while (code := loop.train_run(spec, train, root=split, progress=False)) != 0:
        assert code == loop.EXIT_RESUMABLE
        each_stop(split)
    return whole, split


def assert_same_optimizer_state(optimizer, restored) -> None:
    """Every parameter's optimizer state in `restored` equals `optimizer`'s, key by key, bit for bit and
    dtype for dtype (a checkpoint's round trip), the parameters paired group by group."""
    import torch

    pairs = [(p, q) for g, h in zip(optimizer.param_groups, restored.param_groups, strict=True)
             for p, q in zip(g["params"], h["params"], strict=True)]
    for p, q in pairs:
        ours, theirs = optimizer.state[p], restored.state[q]
        assert ours.keys() == theirs.keys()
        for key in ours:
            assert torch.equal(ours[key], theirs[key]) and ours[key].dtype == theirs[key].dtype, key
