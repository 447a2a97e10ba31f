"""A 2-process torchrun run (DDP, gloo) matches a single-process run of the same global batch."""

from __future__ import annotations

import pytest
from test_train_support import make_params, metrics, run_name, run_train, summary, write_params, write_shards

ARM, BUDGET = "ngpt", 4096  # nGPT: its post-step renormalisation must stay in step across ranks too


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = {}
    for nproc in (1, 2):
        root = tmp_path_factory.mktemp(f"nproc{nproc}")
        write_shards(root)
        # 16 sequences per step: 1 process does 2 micro-batches of 8, each of 2 processes 1 micro-batch of 8.
        write_params(root, make_params(budgets=[BUDGET], batch_sequences=16, micro_batch_tokens=256))
        result = run_train(root, run_name(ARM, BUDGET), nproc=nproc, timeout=240)
        assert result.returncode == 0, result.stderr[-3000:]
        out[nproc] = summary(root, run_name(ARM, BUDGET)), metrics(root, run_name(ARM, BUDGET))
    return out


def test_ddp_matches_single_process_with_the_same_global_batch(runs):
    (single, single_rows), (ddp, ddp_rows) = runs[1], runs[2]
    assert (single["params"]["world_size"], single["params"]["grad_accum_steps"]) == (1, 2)
    assert (ddp["params"]["world_size"], ddp["params"]["grad_accum_steps"]) == (2, 1)
    assert ddp["status"] == single["status"] == "completed"
    assert ddp["tokens"] == single["tokens"] == BUDGET
    assert ddp["final_val_loss"] == pytest.approx(single["final_val_loss"], abs=1e-5)
    assert [r["step"] for r in ddp_rows] == [r["step"] for r in single_rows]
    for a, b in zip(ddp_rows, single_rows, strict=True):
        assert a["train_loss"] == pytest.approx(b["train_loss"], abs=1e-5)
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-4)
    assert ddp["eval_windows_sha256"] == single["eval_windows_sha256"]
    assert ddp["checkpoint_sha256"] != ""  # rank 0 wrote the weights
