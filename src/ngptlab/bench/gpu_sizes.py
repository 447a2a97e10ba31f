"""What each part of `bench gpu` measures, resolved once from the device's defaults and the options, so that
the parts run and the estimate counts (bench/gpu_parts.py) the same steps, shapes and graphs.

Torch-free: the estimate is printed before anything is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ngptlab.bench.gpu_parts import CONDITION_S, Work
from ngptlab.config.load import read_mapping
from ngptlab.layout import REPO_ROOT
from ngptlab.models import arms as arm_table
from ngptlab.models.scales import Scale
from ngptlab.models.size import parameter_count, train_flops_per_token

PRESETS = REPO_ROOT / "workflow" / "presets"
TINY = Scale(n_layer=2, d_model=64, n_head=4)  # the CPU stand-in for every GPU shape
TINY_DEEPER = Scale(n_layer=3, d_model=64, n_head=4)  # ... and for 1B, the larger of the memory shapes
MEMORY_PRESET = "paper"  # the preset that trains the memory part's cells: its micro-batch and checkpointing
MEMORY_CELLS = (("0.5B", 4096), ("0.5B", 8192), ("1B", 8192))  # (scale, context): the largest activations
ANGLE_ARMS = ("gpt-angle", "ngpt-angle")
TRAJECTORY_STEPS = 100  # nGPT's first-light run, bf16 against fp32 beyond the first steps


def preset_arms() -> list[str]:
    """Every arm some preset trains, in arms.yaml's order."""
    named = {a for f in PRESETS.glob("*.yaml") for a in read_mapping(f)["train"]["arms"]}
    return [a for a in arm_table.names() if a in named]


@dataclass(frozen=True)
class MemoryJob:
    """One arm at one cell as the preset trains it: its micro-batch, precision and checkpointing, and
    plan/memory.py's estimate of its peak."""

    arm: str
    cell: str  # the GPU cell it stands for, e.g. 0.5B-ctx4096
    shape: Scale
    context: int
    tokens: int
    vocab_rows: int
    bf16: bool
    checkpointing: bool

    def estimate_bytes(self) -> float:
        from ngptlab.plan.memory import training_memory

        n = parameter_count(self.arm, self.shape, self.vocab_rows)
        return training_memory(self.arm, self.shape, n, self.vocab_rows, self.tokens, self.bf16,
                               self.checkpointing).total


def memory_jobs(gpu: bool) -> list[MemoryJob]:
    """Every preset arm at MEMORY_CELLS as MEMORY_PRESET trains it; on a CPU the same arms and checkpointing
    decisions at tiny shapes (2 sequences of 32 and 64 tokens, fp32)."""
    from ngptlab.plan.checkpointing import checkpoints, run_memory
    from ngptlab.settings import of_section

    train = of_section("train", read_mapping(PRESETS / f"{MEMORY_PRESET}.yaml")["train"])
    stand_in = {"0.5B": TINY, "1B": TINY_DEEPER}
    jobs = []
    for (scale, context), cpu_context in zip(MEMORY_CELLS, (32, 64, 64), strict=True):
        for arm in preset_arms():
            m = run_memory(train, arm, scale, context, "fp32")
            ck = checkpoints(train, m)
            cell = f"{scale}-ctx{context}"
            jobs.append(MemoryJob(arm, cell, m.shape, context, m.tokens, m.vocab_rows, m.bf16, ck) if gpu else
                        MemoryJob(arm, cell, stand_in[scale], cpu_context, 2 * cpu_context, 512, False, ck))
    return jobs


@dataclass(frozen=True)
class Sizes:
    """Every part's shapes and step counts for one call."""

    gpu: bool
    step_scale: str
    step_shape: Scale
    contexts: tuple[int, ...]
    batch_tokens: int
    vocab: int
    steps: int
    warmup: int
    step_arms: tuple[str, ...]
    modes: tuple[str, ...]
    compile_all: bool
    train_scale: str
    train_shape: Scale
    train_context: int
    train_sequences: int
    train_steps: dict[str, int]
    bf16_steps: int
    angle_steps: int
    condition_scale: str
    condition_shape: Scale
    ddp_processes: int  # 0: fewer than 2 GPUs, and no --ddp-cpu
    memory: list[MemoryJob] = field(default_factory=list)

    @property
    def compiled(self) -> bool:
        return "compiled" in self.modes

    def step_jobs(self) -> list[tuple[int, str, str]]:
        return step_jobs(list(self.step_arms), list(self.contexts), self.modes, self.compile_all)

    def train_flops(self, arm: str, steps: int, shape: Scale | None = None,
                    sequences: int | None = None) -> float:
        shape = shape or self.train_shape
        tokens = (sequences or self.train_sequences) * self.train_context
        return train_flops_per_token(arm, shape, self.vocab, self.train_context) * tokens * steps

    def work(self, part: str) -> Work:
        """The part's count for the estimate (bench/gpu_parts.py)."""
        g = int(self.compiled)
        if part == "steps":
            w = Work()
            for context, mode, arm in self.step_jobs():
                base = arm.split("@")[0]
                w.cold_graphs += mode == "compiled"
                w.bf16_flops += (train_flops_per_token(base, self.step_shape, self.vocab, context)
                                 * self.batch_tokens * (self.steps + self.warmup))
                w.built_params += parameter_count(base, self.step_shape, self.vocab)
            return w
        if part == "first-light":
            flops = sum(self.train_flops(a, n) for a, n in self.train_steps.items())
            return Work(cold_graphs=2 * g, bf16_flops=flops, fp32_flops=flops, runs=4)
        if part == "memory":
            w = Work()
            for j in self.memory:  # a warm-up step and a measured one, eager
                w.bf16_flops += 2 * train_flops_per_token(j.arm, j.shape, j.vocab_rows, j.context) * j.tokens
                w.device_built_params += parameter_count(j.arm, j.shape, j.vocab_rows)
            return w
        if part == "bf16":  # gpt and ngpt, bf16 weights and fp32 master, eager
            flops = sum(self.train_flops(a, self.bf16_steps) for a in ("gpt", "ngpt"))
            return Work(bf16_flops=2 * flops, runs=4)
        if part == "angles":
            flops = sum(self.train_flops(a, self.angle_steps) for a in ANGLE_ARMS)
            return Work(bf16_flops=flops, built_params=sum(parameter_count(a, self.train_shape, self.vocab)
                                                           for a in ANGLE_ARMS))
        if part == "path":  # DDP of one, resume (two compiles), activation checkpointing (a graph of its own)
            flops = self.train_flops("gpt", self.train_steps["gpt"])
            return Work(cold_graphs=g, warm_graphs=3 * g, bf16_flops=3 * flops, runs=4)
        if part == "ddp":
            if not self.ddp_processes:
                return Work()
            return Work(fp32_flops=self.train_flops("gpt", self.train_steps["gpt"]), runs=self.ddp_processes)
        if part == "condition":
            one = self.train_flops("gpt", 1, self.condition_shape, 1)
            return Work(bf16_flops=one, runs=1, fixed_s=CONDITION_S if self.gpu else 0.0)
        raise ValueError(f"unknown part {part!r}")


def resolve_shape(name: str, train: dict) -> Scale:
    """The CPU's stand-in, or a scale as a run of the params file's train section resolves it; an unknown
    name fails, naming the known ones."""
    from ngptlab.grid.resources import run_shape
    from ngptlab.settings import of_section

    return TINY if name == "bench-tiny" else run_shape(of_section("train", train), name)


ALWAYS_COMPILED = ("gpt", "ngpt", "ngpt@before")  # compiled at every context; other arms at the first only


def step_jobs(arms: list[str], contexts: list[int], modes: tuple[str, ...], compile_all: bool) -> list[tuple]:
    """(context, mode, arm) in the order they run: every eager step first, then the compiled gpt and nGPT at
    every context, then the other arms compiled at the first context (every context with compile_all), so
    that a time budget cuts the least needed compilations."""
    jobs = [(c, "eager", a) for c in contexts for a in arms] if "eager" in modes else []
    if "compiled" in modes:
        jobs += [(c, "compiled", a) for c in contexts for a in arms if a in ALWAYS_COMPILED]
        jobs += [(c, "compiled", a) for c in (contexts if compile_all else contexts[:1]) for a in arms
                 if a not in ALWAYS_COMPILED]
    return jobs
