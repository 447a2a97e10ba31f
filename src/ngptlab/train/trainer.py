"""The trainer of one job: the seeded model, the optimizer its recipe builds (AdamW, its rotational matrices
turned by their angle: models/rotational.py; gpt-muon's hidden matrices on Muon: models/muon.py), one step,
the eval windows.

The loop (train/loop.py) drives it step by step; it knows nothing of checkpoints, outputs or stopping.
"""

from __future__ import annotations

import contextlib

import torch

from ngptlab import weight_dtype as weight_dtypes
from ngptlab.errors import ParamsError
from ngptlab.grid.resources import run_shape
from ngptlab.grid.runs import RunSpec
from ngptlab.grid.trunks import TrunkSpec
from ngptlab.models import rotational
from ngptlab.models.registry import build_seeded
from ngptlab.models.size import train_flops_per_token
from ngptlab.plan.checkpointing import run_checkpoints
from ngptlab.schedule import Schedule, WarmupStable, WarmupStableDecay
from ngptlab.settings import Train
from ngptlab.train import angle_targets, dist, final_eval
from ngptlab.train.attention import Attention
from ngptlab.train.batches import Batches, BatchPlan
from ngptlab.train.data import Shards, eval_offsets
from ngptlab.train.evaluation import Evaluator
from ngptlab.train.throughput import detect_peak


def vocab_multiple(train: Train) -> int:
    """train.vocab_multiple: pad the embedding and LM-head rows to a multiple of it (absent: 1, none)."""
    return int(train.vocab_multiple)


def resolve_precision(setting: str, device: torch.device, weight_dtype: str = weight_dtypes.FP32) -> str:
    """train.precision: auto (bf16 autocast on a GPU, fp32 on a CPU), bf16 (autocast on either) or fp32.
    Weights stored in bf16 compute under bf16 autocast on either device: nGPT's normalisations return fp32,
    which a bf16 matrix cannot multiply without autocast's casts."""
    if setting not in ("auto", "bf16", "fp32"):
        raise ParamsError(f"train.precision must be auto, bf16 or fp32, got {setting!r}")
    if weight_dtype == weight_dtypes.BF16:
        return "bf16"
    if setting == "auto":
        return "bf16" if device.type == "cuda" else "fp32"
    return setting


class Trainer:
    def __init__(self, spec: RunSpec | TrunkSpec, train: Train, shards: Shards, plan: BatchPlan,
                 topo: dist.Topology, schedule: Schedule | WarmupStableDecay | WarmupStable):
        self.spec, self.train, self.shards, self.plan, self.topo = spec, train, shards, plan, topo
        self.device = topo.device
        self.shape = run_shape(train, spec.scale)
        # seeded: the same initial weights on every rank (DDP also broadcasts rank 0's) and in `condition`
        self.model, self.recipe = build_seeded(spec.arm, self.shape, shards.vocab_size, spec.context,
                                               spec.seed, vocab_multiple(train), init_device=self.device)
        self.recipe = angle_targets.with_targets(self.recipe, train, spec, self.shape)  # angle arms only
        self.model.to(self.device)
        weight_dtypes.store(self.model, spec.weight_dtype)  # bf16: AdamW's moments follow the parameters
        # auto: as plan decided it, from the run's memory estimate (plan/checkpointing.py)
        self.model.activation_checkpointing = run_checkpoints(train, spec.arm, spec.scale, spec.context,
                                                              spec.weight_dtype)
        groups = rotational.param_groups(self.recipe, self.model, spec.lr)  # the recipe's, if none rotate
        for group in groups:
            group["base_lr"] = group["lr"]  # the schedule scales every group's own lr (multipliers kept)
        fused = {"fused": True} if self.device.type == "cuda" else {}
        self.optimizer = self.recipe.optimizer(groups, lr=spec.lr, betas=tuple(self.recipe.betas),
                                               eps=self.recipe.eps, **fused)
        self.schedule = schedule  # the job's (train/jobs.py)
        self.eval_offsets = eval_offsets(len(shards.val), spec.context, train.eval_windows,
                                         train.eval_seed)
        # every job computes them, so a val shard too small for them fails before any training
        self.final_offsets = final_eval.windows(train, len(shards.val), spec.context)
        self.flops_per_token = train_flops_per_token(spec.arm, self.shape, shards.vocab_size, spec.context)
        # for MFU; None on an unknown device
        self.peak = detect_peak(self.device, train.peak_tflops)
        self.precision = resolve_precision(train.precision, self.device, spec.weight_dtype)
        self.autocast = (torch.autocast(self.device.type, dtype=torch.bfloat16) if self.precision == "bf16"
                         else contextlib.nullcontext())
        self.compiled = bool(train.compile)
        self.forward = torch.compile(self.model) if self.compiled else self.model
        self.n_params = sum(p.numel() for p in self.model.parameters())
        self.wrapped = dist.ddp(self.forward, topo, self.n_params) if topo.distributed else self.forward
        self.batches = Batches(shards, plan, spec.seed, topo.rank, self.device)
        self.attention = Attention(self.device, (plan.micro_seqs, self.shape.n_head, spec.context,
                                                 self.shape.d_model // self.shape.n_head),
                                   torch.bfloat16 if self.precision == "bf16" else torch.float32)
        # the head in row chunks only where the losses are measured the same bits (train/evaluation.py)
        chunked = self.device.type == "cpu" and self.precision == "fp32" and not self.compiled
        self.evaluator = Evaluator(self.forward, shards.val, shards.vocab_size, spec.context, plan.micro_seqs,
                                   self.autocast, topo, model=self.model if chunked else None,
                                   pad_tail=self.compiled)  # one eval graph, whatever the tail

    def forward_backward(self, step: int, stop_requested: bool = False) -> tuple[float, float, bool]:
        """Gradients of the global batch of `step`; returns (mean train loss, grad norm before clipping, a
        stop asked on some rank). The loss, the norm and the stop flag come to the host together, once: the
        step's one synchronisation, before any update, after the next step's batch is staged. The stop flag
        rides on the loss's all-reduce: no collective of its own (train/stop.py)."""
        plan = self.plan
        loss_sum = torch.zeros((), device=self.device)
        for micro, (x, y) in enumerate(self.batches.get(step)):
            last = micro == plan.accum_steps - 1
            # DDP all-reduces gradients only on the last micro-batch of the step.
            sync = self.wrapped.no_sync() if self.topo.distributed and not last else contextlib.nullcontext()
            with sync:
                with self.autocast:
                    _, loss = self.wrapped(x, y)
                (loss / plan.accum_steps).backward()
            loss_sum += loss.detach().float()
        self.batches.prefetch(step + 1)
        flag = torch.full((), float(stop_requested), device=self.device)
        summed = dist.all_sum(torch.stack([loss_sum / plan.accum_steps, flag]), self.topo)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.recipe.clip_parameters(self.model),
                                                   self.train.grad_clip)
        norm = grad_norm.float().to(summed.device)  # already there, unless no parameter had a gradient
        host = torch.stack([summed[0] / self.topo.world_size, norm, summed[1]]).tolist()
        loss, norm, stop = host
        return loss, norm, stop > 0

    def update(self, step: int) -> float:
        """Apply the step's learning rate (a rotational group's angle: models/rotational.py) to every group,
        step the optimizer, then the arm's constraint (renorm, polar...)."""
        factor = self.schedule.factor(step)
        for group in self.optimizer.param_groups:
            group["lr"] = group["base_lr"] * factor
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        with torch.no_grad():
            self.recipe.post_step(self.model)
        return self.spec.lr * factor
