"""The params file as typed, frozen settings: one dataclass per section (and per object inside one), built
once from the validated file, every optional key filled with its schema `default:`.

The schema is the one place a default is written: `filled` copies the defaults into a plain mapping, and
`Params.of` turns that mapping into the dataclasses below, whose attributes the stages read (the lineage
hashes them back as a mapping, so a default that changes reruns what it shapes). A key without a default
that a file leaves out (an hf source's `dataset` of a local source) is None. Lists become tuples, so nothing
downstream can change a setting; free-form mappings (learning_rates, shapes, resources' scales) are dicts
of typed values (frozen only at their top: a dict pickles, which Snakemake's jobs need).

tests/test_typed_settings.py holds every dataclass's fields equal to its schema node's properties.
"""

from __future__ import annotations

import copy
import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Union

from ngptlab.settings.schema import load_schema, resolved_node


@dataclass(frozen=True)
class Source:
    kind: Literal["embedded", "hf", "local"]
    name: str
    dataset: str | None
    config: str | None
    revision: str | None
    split: str
    text_field: str
    max_documents: int | None
    min_documents: int | None
    files: tuple[str, ...] | None
    format: Literal["text", "json", "parquet", "csv"]
    sample_by: Literal["document", "paragraph", "line"]


@dataclass(frozen=True)
class Prepare:
    source: Source
    val_fraction: float
    split_seed: int
    batch_documents: int
    workers: int
    runtime_min: float | None


@dataclass(frozen=True)
class Shape:
    n_layer: int
    d_model: int
    n_head: int
    mlp_ratio: float


@dataclass(frozen=True)
class Resources:
    nodes: int
    gpus: int
    processes: int
    mem_mb: int
    runtime_min: int


@dataclass(frozen=True)
class Calibrate:
    budgets: tuple[int, ...]


@dataclass(frozen=True)
class TrainedLr:
    budget: int
    lr: float


@dataclass(frozen=True)
class PrunedSweep:
    scale: str
    context: int
    arm: str
    after_budget: int
    keep: int
    best_lr: float | None
    learning_rates: tuple[float, ...]
    trained: tuple[TrainedLr, ...]


# The run of a stand-in target: what the plan's projection and the design put where an angle arm waits for
# `ngptlab plan --match-angles` (plan/protocol.py); it measured nothing, so its lr sets no multiplier 1.
STAND_IN_RUN = "(a stand-in for the measured target: plan/protocol.py)"


@dataclass(frozen=True)
class MatchedAngle:
    lr: float
    run: str
    kinds: Mapping[str, float]

    @property
    def stand_in(self) -> bool:
        return self.run == STAND_IN_RUN


@dataclass(frozen=True)
class AddedSeeds:
    scale: str
    context: int
    arm: str
    budget: int
    lr: float
    seeds: tuple[int, ...]


@dataclass(frozen=True)
class PruneSweeps:
    after_budget: int
    keep: int


@dataclass(frozen=True)
class Protocol:
    match_angles: bool
    prune_sweeps: PruneSweeps | None
    add_seeds: int | None

    def __bool__(self) -> bool:
        """A protocol with no step still to come is empty (the schema's default, `{}`)."""
        return bool(self.match_angles or self.prune_sweeps or self.add_seeds)


LearningRates = Mapping[str, Mapping[str, tuple[float, ...] | Mapping[str, tuple[float, ...]]]]


@dataclass(frozen=True)
class Train:
    source: str
    shapes: Mapping[str, Shape]
    scales: tuple[str, ...]
    contexts: tuple[int, ...]
    arms: tuple[str, ...]
    budgets: tuple[int, ...]
    seeds: tuple[int, ...]
    learning_rates: LearningRates
    batch_sequences: int
    micro_batch_tokens: int
    warmup_steps: int
    warmup_max_fraction: float
    schedule: Literal["cosine", "wsd"]
    weight_dtype: str | tuple[str, ...]
    cooldown_fraction: float
    cooldown_shape: Literal["1-sqrt", "linear"]
    calibrate: Calibrate | None
    pruned_sweeps: tuple[PrunedSweep, ...]
    angles: Mapping[str, Mapping[str, MatchedAngle]]
    added_seeds: tuple[AddedSeeds, ...]
    protocol: Protocol
    grad_clip: float
    eval_every_tokens: int
    log_every_tokens: int
    tensorboard: bool
    condition_every_evals: int
    step_angle_every: int
    eval_windows: int
    eval_seed: int
    final_eval_tokens: int | str
    diverge_loss: float
    device: Literal["auto", "cpu", "cuda"]
    compile: bool
    activation_checkpointing: bool | Literal["auto"]
    vocab_multiple: int
    precision: Literal["auto", "bf16", "fp32"]
    peak_tflops: float | None
    checkpoint_every_tokens: int
    max_job_minutes: float | None
    checkpoint_write_gbps: float
    signal_lead_s: int | None
    kill_wait_s: int | None
    max_restarts: int
    resources: Mapping[str, Resources]


@dataclass(frozen=True)
class Condition:
    sample_rows: int
    seed: int
    singular_tol: float
    device: Literal["auto", "cpu", "cuda"]
    runtime_min: float | None


@dataclass(frozen=True)
class Evaluate:
    budgets: Literal["largest", "all"]
    tasks: tuple[str, ...]
    task_dirs: tuple[str, ...]
    limit: int | None
    seed: int
    context_words: int
    continuation_words: int
    batch_size: int
    device: Literal["auto", "cpu", "cuda"]
    runtime_min: float | None


@dataclass(frozen=True)
class Speedup:
    baseline: str | tuple[str, ...]
    bootstrap: int
    seed: int
    equivalence_margin: float
    kappa_margin: float
    resolve_ratio: float
    primary_contrast: Literal["conditioning", "norm", "interaction"]
    reference_budget: str | int
    lr_policy: Literal["crossing", "largest", "budget"]

    @property
    def baselines(self) -> tuple[str, ...]:
        """The baseline as a tuple: one arm, or several whose first is the primary baseline."""
        return (self.baseline,) if isinstance(self.baseline, str) else self.baseline


@dataclass(frozen=True)
class Report:
    title: str
    min_budget_for_claims: int
    runtime_min: float | None


@dataclass(frozen=True)
class Design:
    irreducible: float
    amplitude: float
    exponent: float
    lr_curvature: float
    lr_drift: float
    lr_optimum: float | None
    lr_reference_tokens: float | None
    seed_sd: float
    seed_shared: float
    trunk_sd: float
    run_sd: float
    anneal_gap: float
    kappa_sd: float
    angle_sd: float
    ngpt_speedups: tuple[float, ...] | None
    worlds: int
    seed: int


@dataclass(frozen=True)
class Params:
    """A whole params file, typed."""
    prepare: Prepare
    train: Train
    condition: Condition
    evaluate: Evaluate
    speedup: Speedup
    report: Report
    design: Design

    @classmethod
    def of(cls, params: Mapping) -> Params:
        """The typed settings of a validated params mapping (defaults filled in here)."""
        return _build(cls, filled(params), "")


SECTIONS = {"prepare": Prepare, "train": Train, "condition": Condition, "evaluate": Evaluate,
            "speedup": Speedup, "report": Report, "design": Design}


def of_section(name: str, section: Mapping) -> Any:
    """One section's typed settings from its mapping, defaults filled in (for a stage driven without a
    whole params file: a benchmark, a test). The mapping is taken as valid: validate a whole file with
    ngptlab.config.load."""
    node = load_schema()["properties"][name]
    return _build(SECTIONS[name], _fill(copy.deepcopy(dict(section)), node), name)


def filled(params: Mapping) -> dict:
    """A copy of a validated params mapping with every optional key the file leaves out set to its schema
    default, or None where the schema gives none, down every object with properties (a mapping's entries
    included: train.resources' scales, train.pruned_sweeps' entries, ...)."""
    return _fill(copy.deepcopy(dict(params)), load_schema())


def _fill(value: Any, node: dict) -> Any:
    node = resolved_node(node)
    if isinstance(value, dict):
        if "properties" in node:
            for name, child in node["properties"].items():
                child = resolved_node(child)
                if name in value:
                    value[name] = _fill(value[name], child)
                else:
                    value[name] = _fill(copy.deepcopy(child.get("default")), child)
        elif isinstance(node.get("additionalProperties"), dict):
            value = {k: _fill(v, node["additionalProperties"]) for k, v in value.items()}
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        value = [_fill(v, node["items"]) for v in value]
    return value


def _build(cls: type, mapping: Mapping, key: str) -> Any:
    hints = typing.get_type_hints(cls)
    return cls(**{f.name: _convert(hints[f.name], mapping[f.name], f"{key}.{f.name}".lstrip("."))
                  for f in dataclasses.fields(cls)})


def _convert(hint: Any, value: Any, key: str) -> Any:
    """A plain value as the type a field declares: dataclasses built, lists as tuples, mappings of typed
    values; everything else as it is (the schema has checked it)."""
    if value is None:
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, key)
    if origin in (Union, types.UnionType):
        for option in args:  # the first alternative that fits the value's shape
            if option is type(None):
                continue
            fits = (isinstance(value, (list, tuple)) if typing.get_origin(option) is tuple
                    else isinstance(value, Mapping) if (typing.get_origin(option) is Mapping
                                                        or dataclasses.is_dataclass(option))
                    else True)
            if fits:
                return _convert(option, value, key)
        return value
    if origin is tuple:
        return tuple(_convert(args[0], item, key) for item in value)
    if origin is Mapping:
        return {k: _convert(args[1], v, f"{key}.{k}") for k, v in value.items()}
    return value
