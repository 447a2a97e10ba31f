"""The learning-rate policy on a planted world whose optimum drifts with tokens, through the real commands.

The loss is the design's model (ngptlab.design.loss_model), noise-free: a power law in S T plus a parabola
in ln lr around an optimum falling as T^-0.3 (Bjorck et al. 2024, arXiv 2409.19913), its amplitude set so
that the law's slope at the reference budget is the 0.5B preset's (about 0.15 nats per e-fold of tokens).
ngpt is planted 4x faster than gpt. Seed 0 sweeps four learning rates x2 apart under wsd; `ngptlab plan
--add-seeds 2` adds two seeds where the policy reads; `ngptlab speedup` estimates on those held-out seeds.
Noise-free, every seed gives the estimand itself, so the estimate minus ln 4 is what the policy costs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from support.synthetic import synthetic_params

from ngptlab.cli import main
from ngptlab.config.load import load_params, validate_params
from ngptlab.design.loss_model import loss_model
from ngptlab.design.truths import Truth
from ngptlab.design.world import World
from ngptlab.grid.enumeration import compared_runs
from ngptlab.grid.trunks import enumerate_segments
from ngptlab.results import RunResult, train_dir
from ngptlab.schedule import branch_point

BUDGETS = tuple(4096 * 2**k for k in range(7))  # 4,096 .. 262,144 tokens
LRS = (1e-3, 2e-3, 4e-3, 8e-3)
REFERENCE = 65536
CELL = "cpu-4l-ctx64"


NOISE_FREE = {"seed_sd": 0.0, "trunk_sd": 0.0, "run_sd": 0.0}


def params_file(root: Path, rule: str, arms: list[str] | None = None, seeds: list[int] | None = None,
                design: dict | None = None) -> Path:
    """A wsd grid of the arms (default gpt and ngpt) swept by the seeds (default 0), its design's loss
    model noise-free unless `design` says otherwise, at the 0.5B preset's slope (amplitude 12)."""
    arms = arms or ["gpt", "ngpt"]
    params = synthetic_params(seeds=tuple(seeds or [0]), budgets=BUDGETS, schedule="wsd")
    params["train"].update(contexts=[64], arms=arms,
                           learning_rates={"cpu-4l": {arm: list(LRS) for arm in arms}})
    params["speedup"].update(bootstrap=0, lr_policy=rule, reference_budget=REFERENCE)
    params["design"] = {**(NOISE_FREE if design is None else design), "amplitude": 12.0}
    validate_params(params)
    (root / "src").symlink_to(Path(__file__).resolve().parents[1] / "src")  # the code the grid file names
    path = root / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return path


def write_result(root: Path, result: RunResult) -> None:
    """summary.json and metrics.jsonl of a planted run, as the train stage writes the fields read back."""
    out = train_dir(root, result.spec)
    out.mkdir(parents=True, exist_ok=True)
    rows = [{"step": int(t // 2048), "tokens": int(t), "val_loss": loss} for t, loss in result.curve]
    (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (out / "summary.json").write_text(json.dumps({"run": result.spec.name, "spec": result.spec.as_dict(),
                                                  "status": "completed",
                                                  "final_val_loss": result.final_val_loss}))


def protocol(root: Path, rule: str) -> dict:
    """Seed 0's sweep, `ngptlab plan --add-seeds 2`, the new runs, `ngptlab speedup`: its document."""
    path = params_file(root, rule)
    params = load_params(path)
    world = World(loss_model(params), Truth("account true", 4.0), params.train.eval_every_tokens,
                  np.random.default_rng(0))

    def write_grid() -> None:
        for spec in compared_runs(load_params(path)):
            write_result(root, world.result_of(spec))

    write_grid()
    assert main(["plan", "--params", str(path), "--root", str(root), "--add-seeds", "2",
                 "--write", str(root / "grid.json")]) == 0
    write_grid()
    assert main(["speedup", "--params", str(path), CELL, "--root", str(root)]) == 0
    return json.loads((root / "results" / "speedup" / f"{CELL}.json").read_text())


@pytest.mark.parametrize("rule, lowest, highest", [("crossing", -0.02, 0.02), ("largest", -0.10, -0.05)])
def test_a_fast_arm_reads_its_planted_speedup_at_its_crossing_and_reads_low_at_the_largest_budgets_lr(
        tmp_path, rule, lowest, highest):
    doc = protocol(tmp_path, rule)
    ngpt = doc["arms"]["ngpt"]
    assert doc["lr_policy"]["name"] == rule and doc["lr_policy"]["estimate_seeds"] == [1, 2]
    assert ngpt["speedup"]["n_seeds"] == 2 and ngpt["speedup"]["bound"] is None
    gap = ngpt["speedup"]["log"]["mean"] - math.log(4.0)
    assert lowest <= gap <= highest  # measured: crossing 0.000, largest -0.071
    assert f"N = {REFERENCE:,} tokens" in doc["estimand"]
    params = load_params(tmp_path / "params.yaml")
    added = {(e.arm, e.budget): e.lr for e in params.train.added_seeds}
    chosen = {(c["arm"], c["budget"]): c["lr"] for c in doc["lr_policy"]["chosen"]}
    assert added == chosen  # the seeds went exactly where the estimate reads
    if rule == "crossing":
        # gpt reads up to the reference; ngpt, 4x faster, up to the first budget x1.2 past its crossing at
        # 16,384 tokens: 32,768 (its three smallest budgets at least); a higher learning rate than gpt's
        assert sorted(b for a, b in added if a == "gpt") == [b for b in BUDGETS if b <= REFERENCE]
        assert sorted(b for a, b in added if a == "ngpt") == [4096, 8192, 16384, 32768]
        assert chosen[("ngpt", 4096)] > chosen[("gpt", 4096)]
        # the grid both tools read: each added seed's ngpt trunk ends at the branch point of 32,768 tokens
        ends = {(seg.trunk.arm, seg.trunk.seed): seg.step for seg in enumerate_segments(params)}
        steps = {b: branch_point(params.train, 64, b) for b in BUDGETS}
        assert ends[("ngpt", 1)] == ends[("ngpt", 2)] == steps[32768]
        assert ends[("gpt", 1)] == steps[REFERENCE] and ends[("gpt", 0)] == steps[BUDGETS[-1]]
    else:
        assert {b for a, b in added if a == "ngpt"} == set(BUDGETS)
