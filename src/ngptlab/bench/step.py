"""`ngptlab bench step`: median training-step time of each arm against gpt at the same shape, in one run.

A step is what the train stage does per optimizer step: forward and backward (bf16 autocast on GPU),
gradient clipping, the optimizer its recipe builds (AdamW, with the arm's rotational matrices:
models/rotational.py; Muon on gpt-muon's hidden matrices: models/muon.py), and the arm's
post-step hook (nGPT's renormalisation, gpt-orth's polar projection...). All arms are built up front and
timed round-robin, one step of each arm in turn, so a slow patch of a shared machine hits every arm alike;
the ratios are what to read, the absolute times vary with the machine.

On a CPU it computes on the threads a training process computes on (train/threads.py: one, whatever the
machine's cores), so its ratios are the cost the pipeline pays; `--threads N` times on N. The ratios move
with the count: an arm's extra work in small matrix products (the PC layer, Muon's Newton-Schulz) splits
over threads otherwise than gpt's large LM-head product (models/gpt_pc.py has both counts' figures).

Two variants of an arm time a piece beside the arm itself (each printed as a ratio to its arm):
  ARM+step-angle   the step with its angle measured (observe/step_angle.py; --step-angle: of every arm)
  ARM+rotational   every matrix turned by the rotational step instead of AdamW's (--rotational)
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import statistics
import time

import torch

from ngptlab import options
from ngptlab.errors import ParamsError
from ngptlab.models.scales import Scale
from ngptlab.settings import Params
from ngptlab.train.threads import THREADS_PER_PROCESS, pinned
from ngptlab.vocabulary import VOCAB_SIZE

DEFAULT_VOCAB = VOCAB_SIZE  # GPT-2 BPE, what `prepare` writes
STEP_ANGLE, ROTATIONAL = "+step-angle", "+rotational"  # the variants of an arm (the module docstring)
ROTATIONAL_ANGLE = 0.01  # rad per step for ARM+rotational and the angle arms: the time does not depend on it


def variant_of(arm: str) -> tuple[str, str]:
    """("gpt", "+rotational") for "gpt+rotational"; (arm, "") for an arm itself."""
    for variant in (STEP_ANGLE, ROTATIONAL):
        if arm.endswith(variant):
            return arm.removesuffix(variant), variant
    return arm, ""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scale", help="model scale (default: the first of train.scales)")
    parser.add_argument("--context", type=int, help="sequence length (default: the first of train.contexts)")
    options.add_arms(parser)  # gpt is always timed too, as the reference
    parser.add_argument("--batch-tokens", type=int,
                        help="tokens per step, one forward pass (default: train.micro_batch_tokens)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per arm (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per arm first (default 3)")
    parser.add_argument("--vocab-size", type=int, default=DEFAULT_VOCAB)
    parser.add_argument("--before", action="store_true", help="also time ngpt@before: nGPT computed as "
                        "before the speed work (bench/before.py)")
    parser.add_argument("--step-angle", action="store_true", help="also time each arm with the angle of "
                        "every step measured (ARM+step-angle)")
    parser.add_argument("--rotational", action="store_true", help="also time each arm with every matrix "
                        "turned by the rotational step (ARM+rotational)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], help="default: train.device")
    parser.add_argument("--threads", type=int, default=THREADS_PER_PROCESS,
                        help=f"CPU threads to compute on (default {THREADS_PER_PROCESS}: a training "
                        "process's, train/threads.py)")
    compile_group = parser.add_mutually_exclusive_group()
    compile_group.add_argument("--compile", dest="compile", action="store_true", default=None,
                               help="torch.compile the models (default: train.compile)")
    compile_group.add_argument("--no-compile", dest="compile", action="store_false")


class _Arm:
    """One arm's model, optimizer and a fixed random batch, ready to take timed steps."""

    def __init__(self, arm: str, scale: Scale | str, vocab_size: int, context: int, seqs: int,
                 device: torch.device, compile_model: bool, bf16: bool | None = None,
                 build_on_device: bool = False) -> None:
        from ngptlab.bench.before import SUFFIX, as_before
        from ngptlab.models import rotational
        from ngptlab.models.layers import MATRIX_KINDS
        from ngptlab.models.registry import build
        from ngptlab.models.size import train_flops_per_token
        from ngptlab.observe.step_angle import StepAngles

        torch.manual_seed(0)
        self.arm = arm
        built, variant = variant_of(arm)
        base = built.removesuffix(SUFFIX)
        # on the device: no host-side init and copy, where the weights' values do not matter
        with torch.device(device) if build_on_device else contextlib.nullcontext():
            self.model, self.recipe = build(base, scale, vocab_size, context)
        if built != base:
            self.model, self.recipe = as_before(self.model, self.recipe)
        turned = MATRIX_KINDS if variant == ROTATIONAL else getattr(self.recipe, "turned_kinds", ())
        if turned:  # an angle arm's own kinds (its angle is a params value the time does not depend on)
            self.recipe = dataclasses.replace(self.recipe, rotation=dict.fromkeys(turned, ROTATIONAL_ANGLE))
        self.model.to(device)
        self.forward = torch.compile(self.model) if compile_model else self.model
        fused = {"fused": True} if device.type == "cuda" else {}
        groups = rotational.param_groups(self.recipe, self.model, 1e-4)
        self.optimizer = self.recipe.optimizer(groups, betas=self.recipe.betas, eps=self.recipe.eps, **fused)
        self.angles = StepAngles(self.model, every=1) if variant == STEP_ANGLE else None
        generator = torch.Generator().manual_seed(0)
        tokens = torch.randint(0, vocab_size, (seqs, context + 1), generator=generator).to(device)
        self.x, self.y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
        self.device = device
        self.flops_per_token = train_flops_per_token(base, scale, vocab_size, context)
        self.times: list[float] = []
        self.bf16 = device.type == "cuda" if bf16 is None else bf16  # as train.precision auto

    def step(self) -> float:
        """One training step; returns its wall time in seconds (device synchronised)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            _, loss = self.forward(self.x, self.y)
        self.last_loss = loss.detach()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.recipe.clip_parameters(self.model), 1.0)
        with self.angles.measuring(0) if self.angles else contextlib.nullcontext():
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            with torch.no_grad():
                self.recipe.post_step(self.model)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start


def run_step_bench(arms: list[str], scale: Scale | str, context: int, batch_tokens: int, device: torch.device,
                   compile_model: bool = False, steps: int = 20, warmup: int = 3,
                   vocab_size: int = DEFAULT_VOCAB) -> list[dict]:
    """Median step time, ratio to gpt, tokens/s and (on a known GPU) MFU of each arm; gpt first."""
    from ngptlab.train.throughput import mfu

    if batch_tokens % context:
        raise ParamsError(f"--batch-tokens {batch_tokens} is not a multiple of --context {context}")
    arms = ["gpt", *[a for a in arms if a != "gpt"]]
    seqs = batch_tokens // context
    runners = [_Arm(arm, scale, vocab_size, context, seqs, device, compile_model) for arm in arms]
    for runner in runners:
        for _ in range(warmup):  # compilation, allocator and cache warm-up
            runner.step()
    for _ in range(steps):
        for runner in runners:
            runner.times.append(runner.step())
    base = statistics.median(runners[0].times)
    medians = {runner.arm: statistics.median(runner.times) for runner in runners}
    rows = []
    for runner in runners:
        median = medians[runner.arm]
        tokens_per_s = batch_tokens / median
        row = {"arm": runner.arm, "median_ms": median * 1e3, "ratio_vs_gpt": median / base,
               "tokens_per_s": tokens_per_s, "mfu": mfu(runner.flops_per_token, tokens_per_s, device)}
        arm, variant = variant_of(runner.arm)
        if variant and arm in medians:
            row["ratio_vs_arm"] = median / medians[arm]
        rows.append(row)
    return rows


def with_variants(arms: list[str], step_angle: bool, rotational: bool) -> list[str]:
    """The arms, each followed by the variants asked for."""
    chosen = [variant for variant, asked in ((STEP_ANGLE, step_angle), (ROTATIONAL, rotational)) if asked]
    return [name for arm in arms for name in (arm, *(arm + variant for variant in chosen))]


def format_table(rows: list[dict]) -> str:
    lines = ["| arm | median step (ms) | x gpt | tokens/s | MFU |", "|---|---:|---:|---:|---:|"]
    for r in rows:
        util = "n/a" if r["mfu"] is None else f"{100 * r['mfu']:.1f}%"
        lines.append(f"| {r['arm']} | {r['median_ms']:.2f} | {r['ratio_vs_gpt']:.2f} | "
                     f"{r['tokens_per_s']:,.0f} | {util} |")
    lines += [f"{r['arm']}: {r['ratio_vs_arm']:.3f} x the step of {variant_of(r['arm'])[0]}"
              for r in rows if "ratio_vs_arm" in r]
    return "\n".join(lines)


def run(args: argparse.Namespace, params: Params) -> int:
    from ngptlab.device import resolve_device

    train = params.train
    from ngptlab.grid.resources import run_shape

    scale = run_shape(train, args.scale or train.scales[0])
    context = args.context or train.contexts[0]
    batch_tokens = args.batch_tokens or train.micro_batch_tokens
    device = resolve_device(args.device or train.device)
    compile_model = train.compile if args.compile is None else args.compile
    arms = args.arms or train.arms
    if args.before:
        arms = [*arms, "ngpt@before"]
    arms = with_variants(arms, args.step_angle, args.rotational)
    if args.threads < 1:
        raise ParamsError(f"--threads must be at least 1, got {args.threads}")
    with pinned(args.threads):
        rows = run_step_bench(arms, scale, context, batch_tokens, device, compile_model, args.steps,
                              args.warmup, args.vocab_size)
    print(f"bench step: scale {args.scale or train.scales[0]}, context {context}, "
          f"{batch_tokens} tokens/step, device {device}, "
          f"{'compiled' if compile_model else 'eager'}, threads {args.threads}, "
          f"vocab {args.vocab_size}, median of {args.steps} steps per arm (round-robin)")
    print(format_table(rows))
    return 0
