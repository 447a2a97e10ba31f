"""How the train stage measures itself and survives a kernel's NaN, on a CPU:

- the steps that tokens/s and MFU leave out (compile, recompile, GPU warm-up, computed twice), with a real
  compiled run interrupted and resumed: its first step after each start is not timed;
- MFU peaks by exact GPU model and form factor, none for a name the table does not list;
- the attention kernel a run uses, and a planted non-finite step computed again on another kernel: the run
  completes, or, non-finite on both, diverges as before;
- the hot loop: one host read per step, the next batch staged before it; DDP's settings.
"""

from __future__ import annotations

import json
import signal

import pytest
import torch
import torch.nn.functional as F
from support.train import CONTEXT, make_params, metrics, run_name, summary, timing_file, write_shards

from ngptlab.grid.enumeration import find_run
from ngptlab.settings import Params
from ngptlab.train import dist, timing
from ngptlab.train.attention import Attention
from ngptlab.train.batches import plan_batches
from ngptlab.train.data import batch_offsets, gather, open_shards
from ngptlab.train.jobs import make_job
from ngptlab.train.loop import EXIT_RESUMABLE, train_run
from ngptlab.train.progress import Progress
from ngptlab.train.throughput import MFU_NOTE, detect_peak, gpu_model, peak_of
from ngptlab.train.trainer import Trainer

torch.set_num_threads(1)
BUDGET = 8 * 512  # 8 steps of 16 sequences x 32 tokens


def train(root, params, arm="gpt", budget=BUDGET, **kwargs) -> int:
    spec = find_run(Params.of(params), run_name(arm, budget))
    return train_run(spec, Params.of(params).train, root=root, progress=False, **kwargs)


# ----------------------------------------------------------------------------------------------------------
# MFU peaks by exact model


@pytest.mark.parametrize("name, model, tflops", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM", 989.4),
    ("NVIDIA H100 PCIe", "H100 PCIe", 756.5),
    ("NVIDIA H100 NVL", "H100 NVL", 835.5),
    ("NVIDIA H200", "H200 SXM", 989.4),
    ("NVIDIA H200 NVL", "H200 NVL", 835.5),
    ("NVIDIA GH200 480GB", "GH200", 989.4),
    ("NVIDIA GH200 144G HBM3e", "GH200", 989.4),
    ("NVIDIA A100-SXM4-40GB", "A100 SXM", 312.0),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM", 312.0),
    ("NVIDIA A100-PCIE-40GB", "A100 PCIe", 312.0),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe", 312.0),
    ("NVIDIA B200", "B200", 2250.0),
    ("NVIDIA L40S", "L40S", 362.05),
    ("NVIDIA A10G", "A10G", 70.0),
])
def test_a_listed_gpu_gets_its_own_models_dense_bf16_peak(name, model, tflops):
    found = gpu_model(name)
    assert found is not None and found[0] == model and found[1] == pytest.approx(tflops * 1e12)
    peak = peak_of(name, is_gpu=True)
    assert peak.flops == pytest.approx(tflops * 1e12) and peak.source == f"detected ({model}: {name})"


@pytest.mark.parametrize("name", [
    "NVIDIA H100",  # no form factor: SXM and PCIe differ by 30%
    "NVIDIA H800", "NVIDIA A100-SXM4-40GB MIG 1g.5gb",  # a MIG slice has a fraction of the peak
    "NVIDIA GeForce RTX 4090", "NVIDIA L40", "Tesla V100-SXM2-32GB", "NVIDIA H100 80GB HBM3 extra",
])
def test_an_unlisted_gpu_gets_no_peak_and_a_note_rather_than_a_neighbours(name):
    assert gpu_model(name) is None
    peak = peak_of(name, is_gpu=True)
    assert peak.flops is None and peak.source.startswith(f"unknown ({name}); not an exact GPU model")
    assert "train.peak_tflops" in peak.source
    assert peak_of(name, is_gpu=True, declared_tflops=100.0).flops == 100e12  # a declared peak still counts


def test_a_cpu_has_no_peak_unless_declared():
    assert detect_peak(torch.device("cpu")).flops is None
    assert detect_peak(torch.device("cpu"), 2.0).source == "declared"


# ----------------------------------------------------------------------------------------------------------
# Which steps are timed


def test_the_timer_leaves_out_compile_recompile_and_retried_steps(monkeypatch):
    compiles = iter([5, 5, 5, 5, 5, 7, 7, 7, 7, 7])  # begin/end of steps 0..4: step 2 compiled again
    monkeypatch.setattr(timing, "compile_count", lambda: next(compiles))
    progress = Progress()
    timer = timing.StepTimer(torch.device("cpu"), compiled=True, progress=progress)
    for retried in (False, False, False, True, False):
        timer.begin()
        timer.end(retried)
        timer.read()
    assert progress.excluded_steps == {"compile": 1, "recompile": 1, "nonfinite-retry": 1}
    assert progress.timed_steps == 2 and progress.train_s > 0 and progress.excluded_s > 0
    window = timer.take_window()
    assert window.steps == 2 and window.rate(512) == pytest.approx(2 * 512 / window.seconds)
    assert timer.take_window().rate(512) is None  # nothing timed since


class FakeEvent:
    """torch.cuda.Event on a CPU: recorded on a fake GPU clock, done once the test moves the GPU past it."""

    clock, done = 0.0, 0.0
    syncs = 0

    def __init__(self, enable_timing: bool):
        assert enable_timing

    def record(self):
        FakeEvent.clock += 0.5  # every step: 0.5 ms of GPU time between its two events
        self.at = FakeEvent.clock

    def query(self):
        return self.at <= FakeEvent.done

    def synchronize(self):
        FakeEvent.syncs += 1
        FakeEvent.done = max(FakeEvent.done, self.at)

    def elapsed_time(self, other):
        return other.at - self.at


def test_on_a_gpu_steps_are_read_from_completed_cuda_events_after_the_warm_up(monkeypatch):
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    FakeEvent.clock, FakeEvent.done, FakeEvent.syncs = 0.0, 0.0, 0
    monkeypatch.setattr(timing, "compile_count", lambda: 0)
    progress = Progress()
    timer = timing.StepTimer(torch.device("cuda", 0), compiled=True, progress=progress)
    steps = timing.CUDA_WARMUP_STEPS + 3
    for _ in range(steps):
        timer.begin()
        timer.end()
        FakeEvent.done = FakeEvent.clock - 1.0  # the GPU is one step behind: the last step not complete
        timer.read()
    assert FakeEvent.syncs == 0  # no synchronisation in the loop
    assert progress.excluded_steps == {"compile": 1, "warm-up": timing.CUDA_WARMUP_STEPS - 1}
    assert progress.timed_steps == 2 and progress.train_s == pytest.approx(2 * 0.5e-3)
    timer.read(wait=True)  # a checkpoint: waits for the last step's end, once
    assert FakeEvent.syncs == 1 and progress.timed_steps == 3
    assert timer.take_window().steps == 3


def test_peak_gpu_memory_is_recorded_allocated_and_reserved_the_largest_over_starts(monkeypatch):
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device: 3 * 2**20)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda device: 5 * 2**20)
    progress = Progress(max_memory_allocated_mib=4.0, max_memory_reserved_mib=4.0)  # an earlier start's
    timing.record_memory(torch.device("cuda", 0), progress)
    assert (progress.max_memory_allocated_mib, progress.max_memory_reserved_mib) == (4.0, 5.0)
    on_cpu = Progress()
    timing.record_memory(torch.device("cpu"), on_cpu)
    assert (on_cpu.max_memory_allocated_mib, on_cpu.max_memory_reserved_mib) == (None, None)
    assert "max_memory_allocated_mib" not in on_cpu.to_dict()  # a CPU job's checkpoint has no such keys


def test_the_timing_method_says_how_steps_were_timed_and_which_were_left_out():
    gpu = timing.timing_method(cuda=True, compiled=True)
    assert gpu.startswith("CUDA events") and f"{timing.CUDA_WARMUP_STEPS} warm-up steps" in gpu
    assert "(compile)" in gpu and "recompiled" in gpu
    cpu = timing.timing_method(cuda=False, compiled=False)
    assert cpu.startswith("time.perf_counter") and "(compile)" not in cpu
    assert "The FLOP count includes the full T x T attention square" in MFU_NOTE


def small_params(**overrides) -> dict:
    """One layer of width 32: the shortest inductor compilation that still trains the real model."""
    shape = {"n_layer": 1, "d_model": 32, "n_head": 2, "mlp_ratio": 2}
    return make_params(shapes={"w32-1l": shape}, scales=["w32-1l"], budgets=[BUDGET],
                       learning_rates={"w32-1l": {"gpt": [3e-3], "ngpt": [3e-3]}},
                       resources={"w32-1l": {"gpus": 0, "processes": 1, "mem_mb": 1000, "runtime_min": 10}},
                       final_eval_tokens=8 * (CONTEXT + 1),  # one batch of 8 windows, as the eval's: no
                       checkpoint_every_tokens=2048, **overrides)  # recompile for another batch size


def test_a_compiled_run_leaves_its_first_step_after_each_start_out_of_tokens_per_s(tmp_path, monkeypatch):
    write_shards(tmp_path)
    params = small_params(compile=True)
    spec = find_run(Params.of(params), f"w32-1l-ctx{CONTEXT}-gpt-t{BUDGET}-lr0.003-s0")
    update = Trainer.update

    def interrupted(self, step):  # a real SIGTERM after the third update: checkpoint, exit 75
        lr = update(self, step)
        if step == 2:
            signal.raise_signal(signal.SIGTERM)
        return lr

    monkeypatch.setattr(Trainer, "update", interrupted)
    assert train_run(spec, Params.of(params).train, root=tmp_path, progress=False) == EXIT_RESUMABLE
    monkeypatch.setattr(Trainer, "update", update)
    assert train_run(spec, Params.of(params).train, root=tmp_path, progress=False) == 0  # resumed at step 3

    s = summary(tmp_path, spec.name)
    assert s["status"] == "completed" and s["resumed_from"] == [3]
    t = json.loads(timing_file(tmp_path, spec.name).read_text())
    # steps 1 and 4 (the first after the resume); warm-up is a GPU's alone
    assert t["compile"] is True
    assert t["excluded_steps"] == {"compile": 2, "nonfinite-retry": 0, "recompile": 0, "warm-up": 0}
    assert t["timed_steps"] == t["steps"] - 2 == 6 and timing.compile_count() > 0
    assert t["tokens_per_s"] == pytest.approx(t["timed_steps"] * 512 / t["train_s"], rel=1e-4)
    assert t["excluded_s"] > 0 and t["train_s"] + t["excluded_s"] <= t["wall_s"]
    assert "(compile)" in t["timing_method"] and t["mfu_note"] == MFU_NOTE
    rows = {r["step"]: r for r in t["rows"]}
    assert rows[1]["tokens_per_s"] is None and rows[4]["tokens_per_s"] is None  # compile steps only
    assert rows[2]["tokens_per_s"] > 0


# ----------------------------------------------------------------------------------------------------------
# The attention kernel, and a second try on another


def test_a_cpu_run_records_its_attention_kernel_and_restores_torchs_settings():
    attention = Attention(torch.device("cpu"), (8, 2, CONTEXT, 16), torch.float32)
    assert attention.record() == {"backend": "flash", "enabled": ["flash", "math"], "disabled": []}
    assert attention.alternative("flash") == (["math"], "math")
    attention.disable("flash")
    assert not torch.backends.cuda.flash_sdp_enabled()
    assert attention.record() == {"backend": "math", "enabled": ["math"], "disabled": ["flash"]}
    assert attention.alternative("math") == ([], None)  # nothing left to try
    attention.close()
    assert torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.math_sdp_enabled()


def plant_nonfinite(monkeypatch, step: int, every_kernel: bool) -> dict:
    """NaN out of attention during the training forward of `step`: only on the CPU flash kernel, or on every
    kernel. Records the weights and AdamW state each try of that step starts from."""
    seen = {"step": None, "tries": []}
    real_attention, real_step = F.scaled_dot_product_attention, Trainer.forward_backward

    def attention(*args, **kwargs):
        y = real_attention(*args, **kwargs)
        bad = every_kernel or torch.backends.cuda.flash_sdp_enabled()
        return y * float("nan") if seen["step"] == step and torch.is_grad_enabled() and bad else y

    def forward_backward(self, at, stop_requested=False):
        seen["step"] = at
        if at == step:
            state = {k: v.clone() for k, v in self.model.state_dict().items()}
            moments = [(p["step"].clone(), p["exp_avg"].clone(), p["exp_avg_sq"].clone())
                       for p in self.optimizer.state.values()]
            grads = [p.grad is None for p in self.model.parameters()]
            seen["tries"].append((state, moments, grads))
        return real_step(self, at, stop_requested)

    monkeypatch.setattr(F, "scaled_dot_product_attention", attention)
    monkeypatch.setattr(Trainer, "forward_backward", forward_backward)
    return seen


def same_start(tries) -> None:
    (state_a, moments_a, _), (state_b, moments_b, grads_b) = tries
    assert all(torch.equal(state_a[k], state_b[k]) for k in state_a)  # no update applied between tries
    assert all(all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
               for a, b in zip(moments_a, moments_b, strict=True))
    assert all(grads_b)  # the first try's gradients were dropped, not accumulated into the second


def test_a_step_non_finite_on_one_kernel_is_computed_again_on_another_and_the_run_completes(tmp_path,
                                                                                         monkeypatch):
    write_shards(tmp_path)
    seen = plant_nonfinite(monkeypatch, step=3, every_kernel=False)
    assert train(tmp_path, make_params(budgets=[BUDGET])) == 0
    assert len(seen["tries"]) == 2
    same_start(seen["tries"])
    name = run_name("gpt", BUDGET)
    s = summary(tmp_path, name)
    assert s["status"] == "completed" and s["steps"] == 8 and s["diagnostics"] is None
    (retry,) = s["nonfinite_retries"]
    assert {k: retry[k] for k in ("step", "tokens", "backend_before", "backend_after", "outcome")} == {
        "step": 4, "tokens": 2048, "backend_before": "flash", "backend_after": "math", "outcome": "recovered"}
    assert retry["loss"] == "nan" and retry["loss_after"] > 0
    assert s["attention_backend"] == {"backend": "math", "enabled": ["math"], "disabled": ["flash"]}
    rows = metrics(tmp_path, name)
    assert [r["step"] for r in rows] == list(range(1, 9)) and all("diverged" not in r for r in rows)
    t = json.loads(timing_file(tmp_path, name).read_text())
    assert t["excluded_steps"]["nonfinite-retry"] == 1 and t["timed_steps"] == 7
    assert t["nonfinite_retries"] == 1 and t["attention_backend"] == s["attention_backend"]
    assert t["timing_method"].startswith("time.perf_counter") and t["max_memory_reserved_mib"] is None
    assert torch.backends.cuda.flash_sdp_enabled()  # torch's settings restored after the run


def test_a_step_non_finite_on_both_kernels_ends_the_run_as_diverged(tmp_path, monkeypatch):
    write_shards(tmp_path)
    seen = plant_nonfinite(monkeypatch, step=3, every_kernel=True)
    assert train(tmp_path, make_params(budgets=[BUDGET])) == 0
    same_start(seen["tries"])
    name = run_name("gpt", BUDGET)
    s = summary(tmp_path, name)
    assert s["status"] == "diverged" and s["steps"] == 3
    assert s["diagnostics"]["step"] == 3 and s["diagnostics"]["reason"] == "train loss is nan"
    (retry,) = s["nonfinite_retries"]
    assert (retry["step"], retry["backend_before"], retry["backend_after"], retry["outcome"]) == \
        (4, "flash", "math", "non-finite again")
    assert s["attention_backend"]["disabled"] == []  # nothing disabled for a step that did not recover
    rows = metrics(tmp_path, name)
    assert rows[-1] == {**rows[-1], "step": 4, "diverged": True}


def test_a_compiled_run_recovers_on_another_kernel_and_recompiles_without_timing_it(tmp_path, monkeypatch):
    write_shards(tmp_path)
    params = small_params(compile=True)
    spec = find_run(Params.of(params), f"w32-1l-ctx{CONTEXT}-gpt-t{BUDGET}-lr0.003-s0")
    real = Trainer.forward_backward

    def planted(self, at, stop_requested=False):  # step 4's gradients non-finite while flash is enabled
        loss, grad_norm, stop = real(self, at, stop_requested)
        return (loss, float("nan") if at == 3 and torch.backends.cuda.flash_sdp_enabled() else grad_norm,
                stop)

    monkeypatch.setattr(Trainer, "forward_backward", planted)
    assert train_run(spec, Params.of(params).train, root=tmp_path, progress=False) == 0
    s = summary(tmp_path, spec.name)
    assert s["status"] == "completed" and [r["outcome"] for r in s["nonfinite_retries"]] == ["recovered"]
    assert s["attention_backend"] == {"backend": "math", "enabled": ["math"], "disabled": ["flash"]}
    t = json.loads(timing_file(tmp_path, spec.name).read_text())
    # step 5 ran code compiled again without flash (torch._dynamo.reset after the switch): not timed
    assert t["excluded_steps"] == {"compile": 1, "nonfinite-retry": 1, "recompile": 1, "warm-up": 0}
    assert t["timed_steps"] == 5


# ----------------------------------------------------------------------------------------------------------
# The hot loop


def test_a_step_reads_the_host_once_after_staging_the_next_batch(tmp_path, monkeypatch):
    write_shards(tmp_path)
    params = make_params(budgets=[BUDGET])
    spec = find_run(Params.of(params), run_name("gpt", BUDGET))
    job, topo = make_job(spec, Params.of(params).train, tmp_path), dist.Topology(0, 1, 0, torch.device("cpu"))
    plan = plan_batches(Params.of(params).train, spec, 1, job.steps)
    shards = open_shards(tmp_path / "data/tokens/synthetic", verify=False)
    trainer = Trainer(spec, Params.of(params).train, shards, plan, topo, job.schedule)
    events = []
    prefetch, tolist, item = trainer.batches.prefetch, torch.Tensor.tolist, torch.Tensor.item
    monkeypatch.setattr(trainer.batches, "prefetch", lambda step: (events.append("stage"), prefetch(step)))
    monkeypatch.setattr(torch.Tensor, "tolist", lambda t: (events.append("read"), tolist(t))[1])
    monkeypatch.setattr(torch.Tensor, "item", lambda t: (events.append("item"), item(t))[1])
    loss, grad_norm, stop = trainer.forward_backward(0, stop_requested=True)
    assert events == ["stage", "read"] and trainer.batches.staged == [0, 1]
    assert loss > 0 and grad_norm > 0 and stop is True
    # the staged batch is the one step 1 would gather itself
    offsets = batch_offsets(len(shards.train), CONTEXT, plan.seqs_global, spec.seed, 1)
    x, y = gather(shards.train, offsets[:plan.micro_seqs], CONTEXT)
    assert torch.equal(trainer.batches.get(1)[0][0], x) and torch.equal(trainer.batches.get(1)[0][1], y)
    assert trainer.batches.staged == [1]
    trainer.attention.close()


def test_ddp_uses_large_bucket_views_and_no_buffer_broadcast(tmp_path):
    import torch.distributed as td

    td.init_process_group("gloo", store=td.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        topo = dist.Topology(0, 1, 0, torch.device("cpu"))
        small = dist.ddp(torch.nn.Linear(8, 8), topo, 72)
        assert small.bucket_bytes_cap == 25 * 2**20  # a small model: DDP's default
        big = dist.ddp(torch.nn.Linear(8, 8), topo, 10**9)  # 4 GB of fp32 gradients
        assert big.bucket_bytes_cap == 100 * 2**20
        # broadcast_buffers: the flag on torch 2.11, the forward sync's old name on 2.13 (test_torch_range.py)
        assert big.gradient_as_bucket_view and not big.broadcast_buffers
    finally:
        td.destroy_process_group()
