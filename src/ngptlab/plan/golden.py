"""Golden traces: tiny deterministic runs on a CPU through every path a grid trains, the evidence that an edit
meant to change no number changes none (`ngptlab plan --accept-code`, plan/accept.py).

The tiny grid (golden_params) is the grid's own params file with its size replaced: one arm, a 2-layer model
at context 16, one budget of 8 steps, one learning rate and seed, on tiny shards of a synthetic language
(write_shards). What the grid trains with is kept: its schedule (a WSD run and the trunk segment it branches
from; train.calibrate's cosine run beside it), every weight dtype of train.weight_dtype, its precision (bf16
autocast where the grid computes under it on GPUs), the arm's own recipe (an angle arm's rotational step),
and a run of two processes (gloo, under torchrun) where the grid trains one on more than one. A path is one
run of the tiny grid; its trace, through the real `ngptlab train` and `ngptlab condition`:
- the train loss of every step (float.hex) and the sha256 of the metrics rows as written;
- the sha256 of every tensor of the final checkpoint, by name;
- the sha256 of the run's summary, of its trunk segments' records, of the condition result and spectra, as
  canonical JSON without VOLATILE: the fields that record the code revision (`code_revision`), or the hash
  of a file whose header records it (the checkpoint's). They differ between any two trees of other code and
  say nothing of the numbers (tests/support/same_outputs.py leaves out the same); everything else of two
  runs of the same code is equal byte for byte.

`python -m ngptlab.plan.golden SPEC OUT --work DIR` traces the arms of SPEC ({"arms": {arm: params}}) and
writes {"ngptlab": the package's file, "traces": {arm: {path: trace}}} to OUT. It runs once per side, with
PYTHONPATH=<that tree>/src, so that each tree trains with its own code.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ngptlab import layout
from ngptlab.config.load import load_params
from ngptlab.errors import NgptlabError
from ngptlab.grid.enumeration import enumerate_runs
from ngptlab.grid.resources import scale_layout
from ngptlab.grid.runs import RunSpec
from ngptlab.grid.trunks import Segment, enumerate_segments, trunk_of
from ngptlab.prepare.shards import ShardWriter, write_meta
from ngptlab.schedule import shares_trunk
from ngptlab.settings import Params

RUNNER = "ngptlab.plan.golden"  # this module, run once per tree
SOURCE = "golden"
SHAPE = {"n_layer": 2, "d_model": 32, "n_head": 2, "mlp_ratio": 2}
CONTEXT = 16
BATCH_SEQUENCES = 4
STEPS = 8
BUDGET = STEPS * BATCH_SEQUENCES * CONTEXT  # 512 tokens
LR = 3e-3
VOCAB = 256
SHARD_TOKENS = {"train": 4096, "val": 1024}
SCALES = {1: "golden", 2: "golden-x2"}  # by processes: one, or two standing for any more
# The grid's keys that name its own runs, cells or targets (replaced by the tiny grid's, or left out), and
# those of how a job runs that would stop or slow a tiny one (its clock, TensorBoard's view).
DROPPED = ("pruned_sweeps", "added_seeds", "angles", "protocol", "max_job_minutes", "tensorboard")
VOLATILE = frozenset({"code_revision", "checkpoint_sha256"})
VOLATILE_NESTED = frozenset({("checkpoint", "sha256")})  # the condition result's checkpoint


def worlds(params: Params) -> list[int]:
    """The processes a path trains on: 1 where some scale of the grid trains a run on one, 2 where some
    trains one on more (train.resources: nodes x processes)."""
    return sorted({min(scale_layout(params.train, scale).world_size, 2) for scale in params.train.scales})


def precision(params: Params) -> str:
    """The grid's train.precision, with `auto` resolved as the grid's runs resolve it: bf16 autocast where
    they train on GPUs (a CPU resolves auto to fp32)."""
    train = params.train
    gpus = train.device == "cuda" or train.device == "auto" and any(
        train.resources[scale].gpus for scale in train.scales)
    return "bf16" if train.precision == "auto" and gpus else train.precision


def golden_params(grid: dict, params: Params, arm: str) -> dict:
    """The tiny grid of one arm, a params mapping made from the grid's (`grid` as written, `params` the same
    file loaded)."""
    scales = [SCALES[world] for world in worlds(params)]
    train = {key: value for key, value in grid["train"].items() if key not in DROPPED}
    train.update(
        source=SOURCE, shapes={scale: SHAPE for scale in scales}, scales=scales, contexts=[CONTEXT],
        arms=[arm], budgets=[BUDGET], seeds=[0], learning_rates={scale: {arm: [LR]} for scale in scales},
        batch_sequences=BATCH_SEQUENCES, micro_batch_tokens=2 * CONTEXT,  # two micro-batches on one process
        warmup_steps=2, warmup_max_fraction=0.25, eval_every_tokens=BUDGET // 2, eval_windows=4, eval_seed=0,
        final_eval_tokens=16 * CONTEXT, log_every_tokens=1, device="cpu", compile=False,
        checkpoint_every_tokens=BUDGET, precision=precision(params),
        resources={scale: {"nodes": 1, "gpus": 0, "processes": world, "mem_mb": 2000, "runtime_min": 10}
                   for world, scale in SCALES.items() if scale in scales})
    if train.get("calibrate"):
        train["calibrate"] = {"budgets": [BUDGET]}
    speedup = {key: value for key, value in grid["speedup"].items() if key != "reference_budget"}
    return {"prepare": {**grid["prepare"], "source": {"kind": "local", "name": SOURCE, "files": ["none.txt"],
                                                      "format": "text"}},
            "train": train, "condition": {**grid["condition"], "device": "cpu"}, "evaluate": grid["evaluate"],
            "speedup": {**speedup, "baseline": arm}, "report": grid["report"]}


def write_shards(root: Path) -> Path:
    """Token shards in the format `ngptlab prepare` writes, of a learnable synthetic language: each token a
    fixed function of the one before 80% of the time, uniform noise otherwise."""
    out = root / "data" / "tokens" / SOURCE
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    splits = {}
    for split, n in SHARD_TOKENS.items():
        noise, uniform = rng.random(n) < 0.2, rng.integers(0, VOCAB, n)
        tokens = np.empty(n, dtype=np.int64)
        tokens[0] = uniform[0]
        for i in range(1, n):
            tokens[i] = uniform[i] if noise[i] else (tokens[i - 1] * 7 + 3) % VOCAB
        writer = ShardWriter(out / f"{split}.bin")  # the stage's own format and record
        writer.write(tokens, documents=1)
        splits[split] = writer.close()
        writer.publish()
    write_meta(out, {"vocab_size": VOCAB, "splits": splits})
    return out


def canonical(value: Any, parent: str | None = None) -> Any:
    """A result without its VOLATILE fields."""
    if isinstance(value, dict):
        return {key: canonical(item, key) for key, item in value.items()
                if key not in VOLATILE and (parent, key) not in VOLATILE_NESTED}
    if isinstance(value, list):
        return [canonical(item, parent) for item in value]
    return value


def json_sha256(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, allow_nan=True).encode()).hexdigest()


def tensor_hashes(path: Path) -> dict[str, str]:
    """The sha256 of every tensor of a safetensors file (its dtype, shape and bytes), by name."""
    import torch
    from safetensors import safe_open

    hashes = {}
    with safe_open(str(path), framework="pt") as f:
        for name in sorted(f.keys()):
            tensor = f.get_tensor(name).contiguous()
            digest = hashlib.sha256(f"{tensor.dtype}|{tuple(tensor.shape)}|".encode())
            digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
            hashes[name] = digest.hexdigest()
    return hashes


def path_name(run: RunSpec, world: int) -> str:
    """A path by what it goes through: "cosine-fp32", "wsd-bf16-x2"."""
    return f"{run.schedule}-{run.weight_dtype}" + (f"-x{world}" if world > 1 else "")


def _cli(argv: list[str]) -> None:
    from ngptlab.cli import main

    code = main(argv)
    if code:
        raise SystemExit(f"golden trace: `ngptlab {' '.join(argv)}` exited {code}")


def _train(name: str, params_file: Path, root: Path, world: int) -> None:
    args = ["train", "--params", str(params_file), "--root", str(root), "--no-progress", name]
    if world == 1:
        _cli(args)
        return
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(world),
               "-m", "ngptlab.cli", *args]
    done = subprocess.run(command, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if done.returncode:
        raise SystemExit(f"golden trace: torchrun of {name} on {world} processes exited {done.returncode}")


def run_trace(root: Path, run: RunSpec, segments: list[Segment]) -> dict:
    """The trace of one trained and conditioned run (and the trunk segments it branches from)."""
    results = root / layout.train_results_dir(run.cell, run.name)
    metrics = (results / "metrics.jsonl").read_bytes()
    rows = [json.loads(line) for line in metrics.decode().splitlines()]
    losses = [[row["step"], None if row.get("train_loss") is None else float.hex(row["train_loss"])]
              for row in rows]
    condition = layout.conditioning_files(run.name)
    return {
        "losses": losses,
        "metrics": hashlib.sha256(metrics).hexdigest(),
        "tensors": tensor_hashes(root / layout.run_dir(run.cell, run.name) / "model.safetensors"),
        "summary": json_sha256(canonical(json.loads((results / "summary.json").read_text()))),
        "trunk": {s.span: json_sha256(canonical(json.loads((root / layout.trunk_record(
            s.trunk.cell, s.trunk.name, s.span)).read_text()))) for s in segments},
        "condition": json_sha256(canonical(json.loads((root / condition["json"]).read_text()))),
        "spectra": hashlib.sha256((root / condition["spectra"]).read_bytes()).hexdigest(),
    }


def trace_arm(document: dict, root: Path) -> dict[str, dict]:
    """Train every job of one arm's tiny grid under root (trunk segments first), condition every run, and
    return each run's trace by its path's name."""
    write_shards(root)
    params_file = root / "params.yaml"
    params_file.write_text(yaml.safe_dump(document, sort_keys=False))
    params = load_params(params_file)
    segments, runs = enumerate_segments(params), enumerate_runs(params)

    def world(scale: str) -> int:
        return scale_layout(params.train, scale).world_size

    for segment in segments:
        _train(segment.name, params_file, root, world(segment.trunk.scale))
    for run in runs:
        _train(run.name, params_file, root, world(run.scale))
        _cli(["condition", "--params", str(params_file), "--root", str(root), "--no-progress", run.name])
    return {path_name(run, world(run.scale)): run_trace(root, run, [
        s for s in segments if shares_trunk(run) and s.trunk == trunk_of(run)]) for run in runs}


def trace_trees(trees: dict[str, Path], spec: dict, work: Path) -> dict[str, dict]:
    """The traces of `spec` trained by each tree's own code ({side: the project root whose src/ runs}), the
    sides at once (each trains on one thread): {side: {arm: {path: trace}}}. A side that fails or imports the
    package from elsewhere stops it, naming the side and the last line of its log."""
    spec_file = work / "golden-spec.json"
    spec_file.write_text(json.dumps(spec))
    running = {}
    try:
        for i, (side, tree) in enumerate(trees.items()):
            source = (tree / "src").resolve()
            path = os.pathsep.join([str(source), *filter(None, [os.environ.get("PYTHONPATH")])])
            env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
            out, log, trained = work / f"side{i}.json", work / f"side{i}.log", work / f"side{i}"
            with open(log, "w") as stream:
                command = [sys.executable, "-m", RUNNER, str(spec_file), str(out), "--work", str(trained)]
                # a session of its own: stopped early, the side goes with the torchrun it started
                running[side] = (subprocess.Popen(command, env=env, cwd=work, stdout=stream,
                                                  stderr=subprocess.STDOUT, start_new_session=True),
                                 source, out, log)
        codes = {side: process.wait() for side, (process, *_) in running.items()}
    finally:
        for process, *_ in running.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    traces = {}
    for side, (_, source, out, log) in running.items():
        if codes[side]:
            last = (log.read_text(errors="replace").strip().splitlines() or ["no output"])[-1]
            raise NgptlabError(f"the golden traces {side} failed (exit {codes[side]}): {last.strip()}")
        done = json.loads(out.read_text())
        if Path(done["ngptlab"]).resolve().parent.parent != source:
            raise NgptlabError(f"the golden traces {side} imported {done['ngptlab']}, not the package under "
                               f"{source}")
        traces[side] = done["traces"]
    return traces


def main(argv: list[str] | None = None) -> int:
    import ngptlab

    parser = argparse.ArgumentParser(prog=f"python -m {RUNNER}", description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", help='JSON: {"arms": {arm: the params of its tiny grid}}')
    parser.add_argument("out", help="the traces, as JSON")
    parser.add_argument("--work", required=True, help="where the tiny grids train (a folder per arm)")
    args = parser.parse_args(argv)
    spec = json.loads(Path(args.spec).read_text())
    traces = {arm: trace_arm(document, Path(args.work) / arm) for arm, document in spec["arms"].items()}
    Path(args.out).write_text(json.dumps({"ngptlab": ngptlab.__file__, "traces": traces}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
