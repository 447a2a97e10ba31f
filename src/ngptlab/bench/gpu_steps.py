"""`bench gpu`, part steps: the training step of gpt and ngpt (and any arm asked for) timed eager and
compiled, the compile's seconds (the first step's time above a steady one's) apart from the median step,
with its peak memory beside the plan's estimate of it (plan/memory.py).

Peak memory is measured above the level before the arm was built, so weights, optimizer state and the
step's activations alike: on a GPU torch.cuda.max_memory_allocated and max_memory_reserved (what the
process took from the GPU, allocator slack included); on a CPU the process's peak resident set (VmHWM,
reset through /proc/self/clear_refs before each arm) above its size at the start, which counts what the
allocator keeps and lazily loaded code too, so on a CPU it is reported beside the estimate, not judged.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch

from ngptlab.bench.gpu_sizes import step_jobs
from ngptlab.errors import ParamsError
from ngptlab.models.scales import Scale, resolve_scale


def _proc_kb(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


class PeakMemory:
    """Peak bytes above the level at start(): CUDA allocator peaks, or the CPU process's peak RSS."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.kind = ("torch.cuda.max_memory_reserved (and max_memory_allocated)" if device.type == "cuda" else
                     "peak RSS (VmHWM, reset via /proc/self/clear_refs) above RSS at start")

    def start(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base = torch.cuda.memory_allocated(self.device)
            self.base_reserved = torch.cuda.memory_reserved(self.device)
            return
        try:
            Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
        except OSError:
            self.base = None
            return
        self.base = _proc_kb("VmRSS")

    def peak_mb(self) -> float | None:
        """Allocated on a GPU, resident on a CPU."""
        if self.device.type == "cuda":
            return (torch.cuda.max_memory_allocated(self.device) - self.base) / 2**20
        peak = _proc_kb("VmHWM")
        return None if self.base is None or peak is None else (peak - self.base) / 1024

    def reserved_mb(self) -> float | None:
        """What the CUDA caching allocator reserved at its peak (None on a CPU)."""
        if self.device.type != "cuda":
            return None
        return (torch.cuda.max_memory_reserved(self.device) - self.base_reserved) / 2**20


def estimate_mb(arm: str, scale: Scale, vocab_size: int, batch_tokens: int, bf16: bool) -> float:
    """plan/memory.py's peak for one step of `arm` on `batch_tokens` tokens, in MiB."""
    from ngptlab.bench.before import SUFFIX
    from ngptlab.models.size import parameter_count
    from ngptlab.plan.memory import training_memory

    base = arm.removesuffix(SUFFIX)
    n_params = parameter_count(base, scale, vocab_size)
    return training_memory(base, scale, n_params, vocab_size, batch_tokens, bf16).total / 2**20


def time_steps(arms: list[str], scale: Scale | str, contexts: list[int], batch_tokens: int, vocab_size: int,
               device: torch.device, steps: int, warmup: int, peak_flops: float | None,
               compile_all: bool, modes: tuple[str, ...] = ("eager", "compiled"),
               budget_s: float | None = None) -> tuple[list[dict], list[str]]:
    """One row per (context, mode, arm): median step time, tokens/s, MFU and mfu_causal, peak memory and its
    estimate, ratio to gpt at the same context and mode; and the jobs skipped because the time budget ran
    out."""
    from ngptlab.bench.step import _Arm
    from ngptlab.models.size import causal_flops_per_token
    from ngptlab.train.throughput import mfu_of

    arms = ["gpt", *[a for a in arms if a != "gpt"]]
    for context in contexts:
        if batch_tokens % context:
            raise ParamsError(f"--batch-tokens {batch_tokens} is not a multiple of context {context}")
    shape = scale if isinstance(scale, Scale) else resolve_scale(scale)
    memory = PeakMemory(device)
    started, rows, skipped = time.perf_counter(), [], []
    for context, mode, arm in step_jobs(arms, contexts, modes, compile_all):
        if budget_s is not None and time.perf_counter() - started > budget_s and arm != "gpt":
            skipped.append(f"ctx {context} {mode} {arm}")
            continue
        torch._dynamo.reset()  # a fresh compile per model: no cache-size-limit fallback to eager
        memory.start()
        runner = _Arm(arm, scale, vocab_size, context, batch_tokens // context, device, mode == "compiled",
                      bf16=True)
        times = [runner.step() for _ in range(warmup + steps)]
        median = statistics.median(times[warmup:] or times)
        tokens_per_s = batch_tokens / median
        # the first call compiles (torch.compile is lazy): its time above a steady step's
        compile_s = times[0] - median if mode == "compiled" else None
        rows.append({"context": context, "mode": mode, "arm": arm, "median_ms": median * 1e3,
                     "first_step_s": times[0], "compile_s": compile_s,
                     "tokens_per_s": tokens_per_s,
                     "mfu": mfu_of(runner.flops_per_token, tokens_per_s, peak_flops),
                     # beside MFU's full attention square: the half a causal kernel computes
                     "mfu_causal": mfu_of(causal_flops_per_token(runner.flops_per_token, shape, context),
                                          tokens_per_s, peak_flops),
                     "peak_memory_mb": memory.peak_mb(), "reserved_memory_mb": memory.reserved_mb(),
                     "memory_estimate_mb": estimate_mb(arm, shape, vocab_size, batch_tokens, True),
                     "loss": runner.last_loss.item()})
        del runner
    base = {(r["context"], r["mode"]): r["median_ms"] for r in rows if r["arm"] == "gpt"}
    for r in rows:
        r["ratio_vs_gpt"] = r["median_ms"] / base[(r["context"], r["mode"])]
    order = {job: i for i, job in enumerate((c, m, a) for c in contexts for m in modes for a in arms)}
    return sorted(rows, key=lambda r: order[(r["context"], r["mode"], r["arm"])]), skipped
