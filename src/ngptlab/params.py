"""params.yaml: load, validate, and enumerate the runs and cells it describes.

Validation happens in two layers, both before anything runs:
1. the JSON schema in workflow/schemas/params.schema.yaml (types, unknown keys, arm and scale names, signs);
2. cross-field checks the schema cannot express (every scale x arm has learning rates, batch arithmetic).
Either layer raises one ParamsError whose message names the key and, where there is a fixed set, the
allowed values.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from ngptlab.errors import ParamsError
from ngptlab.models.scales import Scale, resolve_scale

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA_PATH = REPO_ROOT / "workflow" / "schemas" / "params.schema.yaml"


@cache
def load_schema() -> dict:
    with open(SCHEMA_PATH) as f:
        return yaml.safe_load(f)


def allowed_arms() -> list[str]:
    return list(load_schema()["$defs"]["arm"]["enum"])


# ----------------------------------------------------------------------------------------------------------
# Loading and validation


def load_params(path: str | Path) -> dict:
    """Read and validate a params file; raise ParamsError naming the file and the key at fault."""
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"{path}: params file not found")
    try:
        with open(path) as f:
            params = yaml.safe_load(f)
    except yaml.YAMLError as err:
        raise ParamsError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(params, dict):
        raise ParamsError(f"{path}: expected a mapping of sections (prepare, train, ...), "
                          f"got {type(params).__name__}")
    validate_params(params, source=str(path))
    return params


def validate_params(params: dict, source: str = "params") -> None:
    """Schema check, then cross-field checks. Raises ParamsError with one clear message."""
    validator = jsonschema.Draft202012Validator(load_schema())
    errors = list(validator.iter_errors(params))
    if errors:
        raise ParamsError(f"{source}: {_describe(_most_specific(errors))}")
    problem = _cross_field_problem(params)
    if problem:
        raise ParamsError(f"{source}: {problem}")


def _most_specific(errors: list[jsonschema.ValidationError]) -> jsonschema.ValidationError:
    # The deepest error names the exact key; among equals, prefer the one the schema checked first.
    return max(errors, key=lambda e: (len(e.absolute_path), -len(e.absolute_schema_path)))


def _key(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


def _describe(err: jsonschema.ValidationError) -> str:
    if err.validator in ("oneOf", "anyOf") and err.context:
        # name what is wrong inside the alternative that got furthest, not just "none matched"
        deepest = _most_specific(list(err.context))
        if len(deepest.absolute_path) > len(err.absolute_path):
            return _describe(deepest)
    key = _key(err.absolute_path)
    schema = err.schema if isinstance(err.schema, dict) else {}
    if err.validator == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        unknown = sorted(set(err.instance) - set(allowed))
        prefix = f"{key}." if err.absolute_path else ""
        return f"unknown key {prefix}{unknown[0]}; allowed keys: {', '.join(allowed)}"
    if err.validator == "enum":
        allowed = ", ".join(map(str, err.validator_value))
        return f"{key}: {err.instance!r} is not allowed; allowed values: {allowed}"
    if err.validator == "required":
        missing = [k for k in err.validator_value if k not in err.instance]
        return f"{key}: missing required key {missing[0]!r}"
    if err.validator == "type":
        expected = err.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        return f"{key}: expected {expected}, got {type(err.instance).__name__} {err.instance!r}"
    if err.validator in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        relation = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}
        return f"{key}: {err.instance!r} must be {relation[err.validator]} {err.validator_value}"
    return f"{key}: {err.message}"


def _cross_field_problem(params: dict) -> str | None:
    source = params["prepare"]["source"]
    cap, floor = source.get("max_documents"), source.get("min_documents")
    if cap is not None and floor is not None and cap < floor:  # the words of ngptlab.prepare.counts
        return (f"prepare.source.max_documents ({cap}) is below prepare.source.min_documents ({floor}): the "
                f"cap stops reading before the floor is reached")
    train = params["train"]
    if train["source"] != params["prepare"]["source"]["name"]:
        return (f"train.source {train['source']!r} must name the prepared source "
                f"prepare.source.name {params['prepare']['source']['name']!r}")
    for name in train["shapes"]:
        try:
            resolve_scale(name, train["shapes"])
        except ParamsError as err:
            return str(err)
    for scale in train["scales"]:
        try:
            resolve_scale(scale, train["shapes"])
        except ParamsError as err:
            return f"train.scales: {err}"
        if scale not in train["learning_rates"]:
            return f"train.learning_rates: missing scale {scale!r} (listed in train.scales)"
        for arm in train["arms"]:
            if arm not in train["learning_rates"][scale]:
                return f"train.learning_rates.{scale}: missing arm {arm!r} (listed in train.arms)"
            sweep = train["learning_rates"][scale][arm]
            if isinstance(sweep, dict):
                key = f"train.learning_rates.{scale}.{arm}"
                contexts = {f"ctx{c}" for c in train["contexts"]}
                missing, extra = sorted(contexts - set(sweep)), sorted(set(sweep) - contexts)
                if missing:
                    return f"{key}: missing {missing[0]} (train.contexts lists {missing[0][3:]})"
                if extra:
                    return f"{key}: {extra[0]} is not in train.contexts {train['contexts']}"
        if scale not in train["resources"]:
            return f"train.resources: missing scale {scale!r} (listed in train.scales)"
    for context in train["contexts"]:
        if train["micro_batch_tokens"] % context:
            return (f"train.micro_batch_tokens ({train['micro_batch_tokens']}) must be a multiple of every "
                    f"context in train.contexts; {context} does not divide it")
        micro_seqs = train["micro_batch_tokens"] // context
        if train["batch_sequences"] % micro_seqs and micro_seqs < train["batch_sequences"]:
            return (f"train.micro_batch_tokens ({train['micro_batch_tokens']}) = {micro_seqs} sequences of "
                    f"{context} must divide train.batch_sequences ({train['batch_sequences']})")
        for budget in train["budgets"]:
            if budget < tokens_per_step(train, context):
                return (f"train.budgets: {budget} is smaller than one batch at context {context} "
                        f"(train.batch_sequences {train['batch_sequences']} x {context} = "
                        f"{tokens_per_step(train, context)} tokens)")
    for scale in train["scales"]:
        problem = _layout_problem(train, scale)
        if problem:
            return problem
    problem = _growth_problem(train)
    if problem:
        return problem
    from ngptlab.trunks import wsd_problem  # beside the trunks whose rules it checks (it imports this module)

    problem = wsd_problem(train)
    if problem:
        return problem
    if params["speedup"]["baseline"] not in train["arms"]:
        return (f"speedup.baseline {params['speedup']['baseline']!r} is not among train.arms: "
                f"{', '.join(train['arms'])}")
    return None


def _growth_problem(train: dict) -> str | None:
    """What `ngptlab plan --prune-sweeps` and `--add-seeds` write (train.pruned_sweeps, train.added_seeds) and
    train.protocol must name points of the grid; the first one that does not, as one line."""
    def outside(key: str, entry: dict) -> str | None:
        for field, listed in (("scale", "scales"), ("context", "contexts"), ("arm", "arms")):
            if entry[field] not in train[listed]:
                return f"{key}: {field} {entry[field]!r} is not in train.{listed}"
        return None

    seen: set[tuple] = set()
    for i, entry in enumerate(train.get("pruned_sweeps", [])):
        key = f"train.pruned_sweeps[{i}]"
        where = (entry["scale"], entry["context"], entry["arm"], entry["after_budget"])
        problem = outside(key, entry)
        if problem:
            return problem
        if entry["after_budget"] not in train["budgets"]:
            return f"{key}: after_budget {entry['after_budget']} is not in train.budgets"
        full = lr_sweep(train, entry["scale"], entry["context"], entry["arm"])
        stray = [lr for lr in entry["learning_rates"] if float(lr) not in full]
        if stray:
            return f"{key}: learning rate {stray[0]:g} is not in the sweep {[f'{x:g}' for x in full]}"
        if where in seen:
            return f"{key}: a second entry for {entry['arm']} after budget {entry['after_budget']}"
        seen.add(where)
    seen = set()
    for i, entry in enumerate(train.get("added_seeds", [])):
        key = f"train.added_seeds[{i}]"
        where = (entry["scale"], entry["context"], entry["arm"], entry["budget"])
        problem = outside(key, entry)
        if problem:
            return problem
        if entry["budget"] not in train["budgets"]:
            return f"{key}: budget {entry['budget']} is not in train.budgets"
        twice = sorted(set(entry["seeds"]) & set(train["seeds"]))
        if twice:
            return f"{key}: seed {twice[0]} is already in train.seeds"
        sweep = lr_sweep(train, *where)
        if float(entry["lr"]) not in sweep:
            return (f"{key}: lr {entry['lr']:g} is not swept at budget {entry['budget']} "
                    f"({[f'{x:g}' for x in sweep]})")
        if where in seen:
            return f"{key}: a second entry for {entry['arm']} at budget {entry['budget']}"
        seen.add(where)
    prune = train.get("protocol", {}).get("prune_sweeps")
    if prune and prune["after_budget"] not in sorted(train["budgets"])[:-1]:
        return (f"train.protocol.prune_sweeps.after_budget: {prune['after_budget']} must be one of "
                f"train.budgets below the largest")
    return None


def _layout_problem(train: dict, scale: str) -> str | None:
    """A scale's processes must split the global batch evenly at every context; one process per GPU."""
    layout = scale_layout(train, scale)
    key = f"train.resources.{scale}"
    if layout.gpus_per_node and layout.processes_per_node != layout.gpus_per_node:
        return (f"{key}: processes ({layout.processes_per_node}) must equal gpus ({layout.gpus_per_node}): "
                f"one training process per GPU, on each node")
    for context in train["contexts"]:
        try:
            split_batch(train["batch_sequences"], train["micro_batch_tokens"], context, layout.world_size)
        except ParamsError as err:
            return f"{key}: {layout.describe()}: {err}"
    return None


# ----------------------------------------------------------------------------------------------------------
# Runs and cells

# The train keys that shape the grid: which runs and cells exist, and under which schedule.
GRID_KEYS = ("scales", "contexts", "arms", "budgets", "seeds", "learning_rates", "schedule", "calibrate",
             "pruned_sweeps", "added_seeds", "protocol")


def format_lr(lr: float) -> str:
    return f"{lr:g}"


@dataclass(frozen=True, order=True)
class RunSpec:
    """One training run: the unit of the train and condition stages."""

    scale: str
    context: int
    arm: str
    budget: int
    lr: float
    seed: int
    schedule: str = "cosine"  # or "wsd" (train.schedule; ngptlab.trunks)

    @property
    def cell(self) -> str:
        """The (scale, context) cell of the speed-up table this run belongs to."""
        return cell_name(self.scale, self.context)

    @property
    def name(self) -> str:
        suffix = "" if self.schedule == "cosine" else f"-{self.schedule}"
        return f"{self.cell}-{self.arm}-t{self.budget}-lr{format_lr(self.lr)}-s{self.seed}{suffix}"

    def as_dict(self) -> dict[str, Any]:
        # a cosine run's record carries no schedule key: records written before WSD existed stay valid
        schedule = {} if self.schedule == "cosine" else {"schedule": self.schedule}
        return {"scale": self.scale, "context": self.context, "arm": self.arm, "budget": self.budget,
                "lr": self.lr, "seed": self.seed, **schedule}


def cell_name(scale: str, context: int) -> str:
    return f"{scale}-ctx{context}"


def schedule_of(train: dict) -> str:
    """train.schedule: the grid's learning-rate schedule, cosine (the paper's, the default) or wsd."""
    return train.get("schedule", "cosine")


def calibration_budgets(train: dict) -> list[int]:
    """The budgets of train.calibrate: cosine runs beside a WSD grid's runs (none without it)."""
    return list(train.get("calibrate", {}).get("budgets", [])) if schedule_of(train) == "wsd" else []


def enumerate_runs(params: dict) -> list[RunSpec]:
    """Every run the grid describes, in a stable order: the runs of train.schedule, then the cosine
    calibration runs of a WSD grid (train.calibrate), each in (scale, context, arm, budget, seed, lr) order,
    then the runs of train.added_seeds. Budgets that train.protocol holds back until the sweep is pruned
    (held_back) are left out."""
    train = params["train"]
    runs = []
    for schedule, budgets in ((schedule_of(train), train["budgets"]), ("cosine", calibration_budgets(train))):
        for scale, context, arm, budget, seed in itertools.product(
            train["scales"], train["contexts"], train["arms"], budgets, train["seeds"]
        ):
            if held_back(train, scale, context, arm, budget):
                continue
            for lr in lr_sweep(train, scale, context, arm, budget):
                runs.append(RunSpec(scale, context, arm, budget, float(lr), seed, schedule))
    for added in train.get("added_seeds", []):
        for seed in added["seeds"]:
            runs.append(RunSpec(added["scale"], added["context"], added["arm"], added["budget"],
                                float(added["lr"]), seed, schedule_of(train)))
    return runs


def compared_runs(params: dict) -> list[RunSpec]:
    """The runs the speed-up compares: those of train.schedule (not the calibration runs)."""
    schedule = schedule_of(params["train"])
    return [run for run in enumerate_runs(params) if run.schedule == schedule]


def enumerate_cells(params: dict) -> list[str]:
    train = params["train"]
    return [cell_name(s, c) for s, c in itertools.product(train["scales"], train["contexts"])]


def lr_sweep(train: dict, scale: str, context: int, arm: str, budget: int | None = None) -> list[float]:
    """The learning rates swept for (scale, context, arm): the arm's list, or its list for this context; at a
    budget that train.pruned_sweeps prunes, the learning rates it kept."""
    pruned = pruning_of(train, scale, context, arm, budget) if budget is not None else None
    if pruned is not None:
        return [float(lr) for lr in pruned["learning_rates"]]
    sweep = train["learning_rates"][scale][arm]
    return [float(lr) for lr in (sweep[f"ctx{context}"] if isinstance(sweep, dict) else sweep)]


def pruning_of(train: dict, scale: str, context: int, arm: str, budget: int) -> dict | None:
    """The train.pruned_sweeps entry that sets the sweep at this budget: of those of (scale, context, arm)
    whose after_budget is below it, the one with the largest after_budget (successive halving prunes in
    rounds); None where the whole sweep runs."""
    entries = [e for e in train.get("pruned_sweeps", []) if (e["scale"], e["context"], e["arm"]) ==
               (scale, context, arm) and e["after_budget"] < budget]
    return max(entries, key=lambda e: e["after_budget"]) if entries else None


def held_back(train: dict, scale: str, context: int, arm: str, budget: int) -> bool:
    """A budget above train.protocol.prune_sweeps.after_budget waits, outside the grid, until
    `ngptlab plan --prune-sweeps` has pruned the arm's sweep from the results up to there."""
    prune = train.get("protocol", {}).get("prune_sweeps")
    return bool(prune) and budget > prune["after_budget"] and pruning_of(train, scale, context, arm,
                                                                         budget) is None


def lopsided_sweeps(train: dict) -> list[str]:
    """One line per (scale, context) whose arms do not all get the same number of learning rates: a
    comparison that tunes some arms more than others is not a fair one."""
    lines = []
    for scale, context in itertools.product(train["scales"], train["contexts"]):
        sizes = {arm: len(lr_sweep(train, scale, context, arm)) for arm in train["arms"]}
        if len(set(sizes.values())) > 1:
            counts = ", ".join(f"{arm} {n}" for arm, n in sizes.items())
            lines.append(f"{scale} ctx{context}: unequal learning-rate sweeps ({counts})")
    return lines


def final_eval_setting(train: dict) -> int | str:
    """train.final_eval_tokens: the tokens of a run's final evaluation, or `all` (the default) for the whole
    validation split up to a cap (ngptlab.train.final_eval)."""
    return train.get("final_eval_tokens", "all")


def tokens_per_step(train: dict, context: int) -> int:
    """Tokens per optimizer step: the global batch is a number of sequences at every context."""
    return train["batch_sequences"] * context


def steps_per_run(train: dict, context: int, budget: int) -> int:
    """Optimizer steps in a run of `budget` tokens (whole batches; the remainder is not trained)."""
    return budget // tokens_per_step(train, context)


@dataclass(frozen=True)
class BatchSplit:
    """How one optimizer step's global batch is shared: each of world_size processes takes
    seqs_per_rank sequences, in accum_steps forward passes of micro_seqs sequences."""

    seqs_per_rank: int
    micro_seqs: int
    accum_steps: int


def split_batch(batch_sequences: int, micro_batch_tokens: int, context: int, world_size: int) -> BatchSplit:
    """The global batch stays batch_sequences sequences whatever the number of processes (over all nodes);
    gradient accumulation fills what one forward pass of micro_batch_tokens does not."""
    if micro_batch_tokens % context:
        raise ParamsError(f"train.micro_batch_tokens ({micro_batch_tokens}) must be a multiple of the "
                          f"context {context}")
    if batch_sequences % world_size:
        raise ParamsError(f"train.batch_sequences ({batch_sequences}) cannot be split evenly over "
                          f"{world_size} processes")
    seqs_per_rank = batch_sequences // world_size
    micro_seqs = min(micro_batch_tokens // context, seqs_per_rank)
    if seqs_per_rank % micro_seqs:
        raise ParamsError(f"train.micro_batch_tokens ({micro_batch_tokens}) = {micro_seqs} sequences does "
                          f"not divide the {seqs_per_rank} sequences each of {world_size} processes gets per "
                          f"step")
    return BatchSplit(seqs_per_rank, micro_seqs, seqs_per_rank // micro_seqs)


# Arms whose recipe does not warm up (Recipe.warmup False in their model file; tests/test_plan.py checks
# this set against the registry, which the plan does not import because it loads torch).
ARMS_WITHOUT_WARMUP = frozenset({"ngpt", "ngpt-freew"})


def warmup_steps(train: dict, steps: int, warms_up: bool) -> int:
    """Warmup of a run of `steps` steps, by the rule in the schema's docs: warmup_steps, at most
    floor(warmup_max_fraction x steps), and at least one cosine step left; 0 for an arm without warmup."""
    if not warms_up:
        return 0
    cap = math.floor(train["warmup_max_fraction"] * steps)
    return max(0, min(train["warmup_steps"], cap, steps - 1))


# ----------------------------------------------------------------------------------------------------------
# Where a run trains: train.resources.<scale> asks for `nodes` nodes (default 1), each with `gpus` GPUs and
# `processes` training processes (one per GPU on GPUs; CPU processes otherwise) and `mem_mb` of memory.
# Counts are per node, as on a Slurm node, so adding nodes never changes what one node must hold.

MIN_RUNTIME_MIN = 10  # the shortest Slurm time limit a run gets


@dataclass(frozen=True)
class Layout:
    nodes: int
    gpus_per_node: int
    processes_per_node: int

    @property
    def world_size(self) -> int:
        return self.nodes * self.processes_per_node

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def describe(self) -> str:
        return (f"{self.nodes} node(s) x {self.processes_per_node} process(es) = {self.world_size} "
                f"process(es)")


def scale_layout(train: dict, scale: str) -> Layout:
    resources = train["resources"][scale]
    return Layout(resources.get("nodes", 1), resources["gpus"], resources["processes"])


def max_restarts(train: dict) -> int:
    """torchrun's --max-restarts: how often a failed process group is restarted (from the last checkpoint)
    within one job before the job fails (optional key train.max_restarts; default 0)."""
    return int(train.get("max_restarts", 0))


def time_limit_min(train: dict, scale: str, tokens: int) -> int:
    """The Slurm time limit of a job of `scale` that trains `tokens` (ngptlab.trunks.job_tokens): their share
    of the scale's runtime_min (the wall time of the grid's largest budget), at least MIN_RUNTIME_MIN; a job
    cut off resumes on the profile's retry."""
    share = tokens / max(train["budgets"])
    return max(MIN_RUNTIME_MIN, math.ceil(train["resources"][scale]["runtime_min"] * share))


def run_shape(train: dict, scale: str) -> Scale:
    """The shape of a scale named in the train section: train.shapes first, then the named defaults."""
    return resolve_scale(scale, train["shapes"])


@cache
def _run_name_pattern() -> re.Pattern:
    alternatives = lambda names: "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))  # noqa: E731
    return re.compile(
        rf"^(?P<scale>[A-Za-z0-9][A-Za-z0-9._-]*?)-ctx(?P<context>\d+)-(?P<arm>{alternatives(allowed_arms())})"
        r"-t(?P<budget>\d+)-lr(?P<lr>[0-9.e+-]+?)-s(?P<seed>\d+)(?P<wsd>-wsd)?$"
    )


def parse_run_name(name: str) -> RunSpec:
    match = _run_name_pattern().match(name)
    if not match:
        raise ParamsError(
            f"run name {name!r} is not of the form <scale>-ctx<context>-<arm>-t<budget>-lr<lr>-s<seed>[-wsd] "
            f"with arm in {allowed_arms()}"
        )
    g = match.groupdict()
    return RunSpec(g["scale"], int(g["context"]), g["arm"], int(g["budget"]), float(g["lr"]), int(g["seed"]),
                   "wsd" if g["wsd"] else "cosine")


def find_run(params: dict, name: str) -> RunSpec:
    """The run of this grid with this name; a name outside the grid is an error, not a silent new run."""
    for run in enumerate_runs(params):
        if run.name == name:
            return run
    parse_run_name(name)  # raises a format error first if the name is malformed
    raise ParamsError(f"run {name!r} is not in the grid of this params file (see `ngptlab plan`)")
