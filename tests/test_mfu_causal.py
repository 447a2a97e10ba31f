"""Causal MFU beside MFU: MFU counts attention over the full T x T square (PaLM, Appendix B: 6 N + 12 L d T),
a causal kernel computes about half of it (6 N + 6 L d T). The causal figure is shown where MFU is (bench
gpu's rows and table, each evaluation's log line, the report's compute table), from what is already
recorded; the recorded MFU and flops_per_token stay PaLM's."""

from __future__ import annotations

import pytest
import torch

from ngptlab.bench.checks import ANCHOR
from ngptlab.bench.gpu_report import format_steps
from ngptlab.bench.gpu_steps import time_steps
from ngptlab.models.scales import resolve_scale
from ngptlab.models.size import (
    attention_flops_per_token,
    causal_flops_per_token,
    matmul_parameters,
    train_flops_per_token,
)
from ngptlab.prepare.tokenizer import VOCAB_SIZE
from ngptlab.train.batches import BatchPlan
from ngptlab.train.log import eval_line


@pytest.mark.parametrize(("scale", "context", "overstated"), [
    ("0.5B", 4096, 0.181), ("0.5B", 8192, 0.307), ("1B", 4096, 0.158), ("1B", 8192, 0.272),
    ("0.5B", 1024, 0.053),
])
def test_the_full_square_overstates_the_causal_work_by_18_and_31_percent_at_4k_and_8k(scale, context,
                                                                                      overstated):
    full = train_flops_per_token("gpt", scale, VOCAB_SIZE, context)
    causal = causal_flops_per_token(full, scale, context)
    assert full / causal - 1 == pytest.approx(overstated, abs=5e-4)


def test_the_counted_flops_keep_palm_s_formula_and_the_causal_ones_halve_its_attention_term():
    s = resolve_scale("0.5B")
    n = matmul_parameters(s, VOCAB_SIZE)
    full = train_flops_per_token("ngpt", s, VOCAB_SIZE, 4096)
    assert full == 6.0 * n + 12.0 * s.n_layer * s.d_model * 4096  # bit for bit what the runs recorded
    assert attention_flops_per_token("0.5B", 4096) == 12 * 24 * 1024 * 4096
    assert causal_flops_per_token(full, s, 4096) == 6.0 * n + 6.0 * s.n_layer * s.d_model * 4096


def test_bench_gpu_rows_and_table_carry_the_causal_mfu_beside_mfu(one_torch_thread):
    rows, skipped = time_steps(["gpt"], "cpu-4l", [32], 64, 256, torch.device("cpu"), steps=1, warmup=0,
                               peak_flops=1e12, compile_all=False, modes=("eager",))
    [row] = rows
    full = train_flops_per_token("gpt", "cpu-4l", 256, 32)
    assert row["mfu_causal"] == pytest.approx(row["mfu"] * causal_flops_per_token(full, "cpu-4l", 32) / full,
                                              rel=1e-12)
    assert 0 < row["mfu_causal"] < row["mfu"]
    table = format_steps({"scale": "cpu-4l", "shape": "", "batch_tokens": 64, "vocab_size": 256,
                          "precision": "fp32", "fused_adamw": False, "memory": "", "rows": rows,
                          "skipped": skipped, "anchor": ANCHOR})
    assert "| tokens/s | MFU | MFU causal | peak MB |" in table[1]
    assert f"| {row['mfu']:.1%} | {row['mfu_causal']:.1%} |" in table[3]


def test_each_evaluation_s_log_line_shows_the_causal_mfu_beside_mfu():
    plan = BatchPlan(context=10, seqs_global=10, seqs_per_rank=10, micro_seqs=10, accum_steps=1, steps=10)
    row = {"tokens": 500, "train_loss": 3.0, "val_loss": 3.1, "mfu": 0.40}
    assert " MFU 40.0% (causal 34.0%) ETA " in eval_line("r", 5, plan, row, 100.0, causal_share=0.85)
    assert " MFU n/a ETA " in eval_line("r", 5, plan, {**row, "mfu": None}, 100.0, causal_share=0.85)
