# Shared by every rule: check the params, enumerate the grid, and name the files.
#
# The grid comes from ngptlab.params (the same code `ngptlab plan` and every stage use), never from a
# second implementation here, so Snakemake, DVC (through results/plan.json) and the stages agree.

import functools
import inspect
import json
import os
import sys
from pathlib import Path

from snakemake.common import FUNC_OVERWRITE_PARAMS_ATTR, overwrite_function_params
from snakemake.exceptions import WorkflowError
from snakemake.resources import Resource
from snakemake.utils import validate

from ngptlab import layout
from ngptlab.errors import ParamsError
from ngptlab.config.load import load_params, validate_params
from ngptlab.grid.enumeration import enumerate_cells, enumerate_runs
from ngptlab.grid.resources import max_restarts, scale_layout
from ngptlab.plan import runtime
from ngptlab.plan.estimate import largest_models, model_size
from ngptlab.plan.grid import cell_key, lineage_keys, stage_code
from ngptlab.plan.lineage import PER_CELL, PER_SCHEDULE, STAGES, made_from
from ngptlab.grid.trunks import branch_segment, by_end, enumerate_segments, job_tokens, segment_before

# `ngptlab` and `torchrun` must come from the environment that runs Snakemake (also inside Slurm jobs,
# which start `python -m snakemake` with this same interpreter).
os.environ.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


# The software of every rule. By default the rules run in the environment that runs Snakemake (the project's
# .venv); with `--software-deployment-method conda` Snakemake builds this environment instead, and its
# post-deploy script installs this project into it from the working directory.
CONDA_ENV = "../envs/ngptlab.yaml"


# ----------------------------------------------------------------------------------------------------------
# The params file. Every stage reads it itself (`ngptlab <verb> --params FILE`), so Snakemake's config must
# be exactly one file's content: a --config or merged --configfile override would never reach the stages.


def params_file():
    candidates = workflow.overwrite_configfiles or ["params.yaml"]
    if len(candidates) == 1 and load_params(candidates[0]) == config:
        return str(candidates[0])
    raise WorkflowError(
        "the ngptlab stages read a single params file, but this config merges params.yaml with "
        "--configfile/--config overrides that would never reach them. Apply a preset with "
        "`make preset NAME=<name>` (or edit params.yaml), or pass one complete file with "
        "`--configfile FILE --replace-workflow-config`."
    )


# Both checks run before any job: ngptlab's own (one line naming the key, then the cross-field checks the
# schema cannot express), and Snakemake's validation against the same schema.
try:
    PARAMS = params_file()
    validate_params(config, source=PARAMS)
except ParamsError as err:
    raise WorkflowError(f"invalid params: {err}") from None
validate(config, "../schemas/params.schema.yaml")


# ----------------------------------------------------------------------------------------------------------
# The grid


RUNS = {run.name: run for run in enumerate_runs(config)}
CELLS = enumerate_cells(config)
SOURCE = config["prepare"]["source"]["name"]
# With train.schedule wsd: the trunk segments (ngptlab/trunks.py), by job ("<cell>/<trunk>/<span>"), and
# by where they end: a WSD run branches from the segment that ends at its branch point, and a segment comes
# after the one that ends where it starts.
SEGMENTS = {f"{s.trunk.cell}/{s.trunk.name}/{s.span}": s for s in enumerate_segments(config)}
_SEGMENT_ENDS = by_end(list(SEGMENTS.values()))


# One path component each. Not an alternation of every name: Snakemake matches every file of the DAG against
# these, and an alternation of the paper grid's ~1300 run names cost most of `snakemake -n`'s time. A name
# outside the grid is refused where a rule first looks it up (grid_run, runs_of_cell).
wildcard_constraints:
    run="[^/]+",
    cell="[^/]+",


def runs_of_cell(cell):
    if cell not in CELLS:
        raise WorkflowError(f"cell {cell!r} is not in the grid of {PARAMS} (cells: {', '.join(CELLS)})")
    return [name for name, run in RUNS.items() if run.cell == cell]


def grid_run(run):
    if run not in RUNS:
        raise WorkflowError(f"run {run!r} is not in the grid of {PARAMS} (`ngptlab plan` lists its runs)")
    return RUNS[run]


def grid_segment(cell, trunk, span):
    job = f"{cell}/{trunk}/{span}"
    if job not in SEGMENTS:
        raise WorkflowError(f"trunk segment {job!r} is not in the grid of {PARAMS} (`ngptlab plan` lists them)")
    return SEGMENTS[job]


# ----------------------------------------------------------------------------------------------------------
# Snakemake and DVC agree on what is stale because both decide it from the same lineage keys
# (ngptlab/plan/lineage.py), never from file times or Snakemake's own records: `dvc commit`, `checkout`, `pull`
# and `exp apply` re-create files with new modification times and leave .snakemake/ as it was. Every input
# therefore goes through `settled()` (Snakemake's `ancient`): a newer input file alone never reruns a job.
# What does rerun one is a missing output, and the job's key file results/lineage/<stage>/<job>/<key> is one
# of its inputs: a changed setting, code or upstream key is a new key, a missing file, and the job and every
# job after it (their keys include this one) run again. The profile (workflow/profiles/default) turns off
# Snakemake's record-based rerun triggers, which the keys replace. DVC declares the same keys as params
# (`lineage.<stage>` of results/plan.json) and, beyond them, hashes the content of every dependency.


def settled(files):
    if isinstance(files, dict):
        return {key: settled(value) for key, value in files.items()}
    if isinstance(files, (list, tuple)):
        return [ancient(path) for path in files]
    return ancient(files)


# What each job's results are made from (the settings, the code's fingerprints, the keys upstream), and its
# key; the same values `ngptlab plan --write` puts in results/plan.json for DVC.
CODE = stage_code()
MADE_FROM = made_from(config, CODE)
LINEAGE = lineage_keys(MADE_FROM)


def lineage_of(stage, job):
    """(what the job is made from, its key); a cell's job for speedup and evaluate, a run's schedule's for
    train (job "<cell>/<run>") and condition (job "<run>"), one for every trunk segment, prepare and report."""
    if stage in PER_CELL:
        runs_of_cell(job)  # refuses a cell outside the grid
        return MADE_FROM[stage][job], LINEAGE[stage][cell_key(job)]
    if stage in PER_SCHEDULE:
        schedule = grid_run(job.split("/")[-1]).schedule
        return MADE_FROM[stage][schedule], LINEAGE[stage][schedule]
    return MADE_FROM[stage], LINEAGE[stage]


def lineage_input(stage, job):
    """A job's key file, ancient: its input that stands for everything the job is made from. `job` may be a
    wildcard pattern where the stage has one key for all its jobs."""
    return settled(layout.lineage_file(stage, job, LINEAGE[stage]))


def lineage_files():
    """Every job's key file."""
    jobs = [("prepare", SOURCE), *(("trunk", job) for job in SEGMENTS),
            *(("train", f"{spec.cell}/{run}") for run, spec in RUNS.items()),
            *(("condition", run) for run in RUNS),
            *((stage, cell) for stage in PER_CELL for cell in CELLS), ("report", "all")]
    return [layout.lineage_file(stage, job, lineage_of(stage, job)[1]) for stage, job in jobs]


def cell_lineage_input(stage):
    return per_job(lambda wildcards: settled(
        layout.lineage_file(stage, wildcards.cell, lineage_of(stage, wildcards.cell)[1])))


def run_lineage_input(stage, job):
    """The key file of a run's job (`job` a pattern of the run's wildcards): its schedule's key. A pattern
    where every run has one schedule, which costs Snakemake nothing per job."""
    schedules = {spec.schedule for spec in RUNS.values()}
    if len(schedules) == 1:
        return settled(layout.lineage_file(stage, job, LINEAGE[stage][schedules.pop()]))
    return per_job(lambda wildcards: settled(
        layout.lineage_file(stage, job.format(**wildcards), lineage_of(stage, wildcards.run)[1])))


def outputs_of(stage, job):
    if stage == "prepare":
        return TOKENS
    if stage == "train":
        cell, run = job.split("/")
        return list(train_outputs(run, cell).values())
    if stage == "trunk":
        return [SEGMENTS[job].record]
    if stage == "condition":
        return list(condition_outputs(job).values())
    if stage == "speedup":
        return [speedup_output(job)]
    if stage == "evaluate":
        return [evaluate_output(job)]
    return list(rules.report.output)


def lineage_record(wildcards):
    """The text of a job's key file: what the job is made from (a key other than the job's is refused)."""
    sources, current = lineage_of(wildcards.stage, wildcards.job)
    if wildcards.key != current:
        raise WorkflowError(f"{layout.lineage_file(wildcards.stage, wildcards.job, wildcards.key)}: not the "
                            f"lineage key of {wildcards.stage} {wildcards.job} under {PARAMS} ({current})")
    return json.dumps({"stage": wildcards.stage, "job": wildcards.job, "key": current, "made_from": sources},
                      indent=1, sort_keys=True)


def retired_outputs(wildcards):
    """The outputs a new key file retires: the job's, made from something else."""
    return outputs_of(wildcards.stage, wildcards.job)


# ----------------------------------------------------------------------------------------------------------
# Files: ngptlab.layout spells every path (the stages use it too); the rules and `rule all` name them
# through these functions only. A run's files sit under its cell (see ngptlab/layout.py for why).

TOKENS = [f"data/tokens/{SOURCE}/{name}" for name in ("train.bin", "val.bin", "meta.json")]


def train_outputs(run, cell=None):
    """A run's train outputs; with the wildcards "{run}" and "{cell}" the train rule's output patterns."""
    cell = cell or grid_run(run).cell
    run_dir, results_dir = layout.run_dir(cell, run), layout.train_results_dir(cell, run)
    return {
        "model": f"{run_dir}/model.safetensors",
        "config": f"{run_dir}/config.json",
        "summary": f"{results_dir}/summary.json",
        "metrics": f"{results_dir}/metrics.jsonl",
        "timing": layout.timing_file(cell, run),  # measured speed, varies per training: the report reads it
    }


condition_outputs = layout.conditioning_files
speedup_output = layout.speedup_file
evaluate_output = layout.evaluate_file


def per_job(function):
    """An input or resource function with its signature read once: Snakemake otherwise reads it
    (inspect.signature) each time it calls the function, for every job, a tenth of `snakemake -n` on the
    paper preset. Snakemake's own wrappers (snakemake.ioutils) declare theirs the same way."""
    overwrite_function_params(function, inspect.signature(function).parameters)
    return function


# Snakemake evaluates every resource of every job, threads and its default `tmpdir` included, through the
# method Resource.evaluate, and reads that method's signature twice each time: declared once here, as
# per_job declares ours (the same parameters: a bound method's, which Snakemake would read).
if not hasattr(Resource.evaluate, FUNC_OVERWRITE_PARAMS_ATTR):
    overwrite_function_params(Resource.evaluate, inspect.signature(Resource("name", 0).evaluate).parameters)


def run_files(*kinds):
    """The input function of one run's train outputs `kinds` ("model", "config", "summary"), named by kind:
    one call per job for all of them (a rule takes it through `unpack`)."""
    def files(wildcards):
        outputs = train_outputs(wildcards.run)
        return settled({kind: outputs[kind] for kind in kinds})

    return per_job(files)


def cell_files(kind):
    """The input function of a cell's `kind` train output ("summary", "metrics", "model"), all its runs."""
    def files(wildcards):
        return settled([train_outputs(run)[kind] for run in runs_of_cell(wildcards.cell)])

    return per_job(files)


# ----------------------------------------------------------------------------------------------------------
# Resources. train.resources.<scale> in params says what the scale's runs need, per node: GPUs, processes
# (>1 on one node, or any run over several nodes, means torchrun), memory, plus the number of nodes and the
# wall time of its largest run. Every job's Slurm time limit comes from the plan (ngptlab/plan/runtime.py,
# which `ngptlab plan` prints): a run's is its budget's share of that time, capped at train.max_job_minutes;
# a run longer than that stops by its own clock before it, with a checkpoint and exit 75, and the rule's next
# attempt resumes it, so the train, trunk and evaluate rules retry as often as their longest job needs.
#
# Slurm signals a training job signal_lead_s before its limit (sbatch --signal, to every process of the job;
# a run checkpoints and exits 75 on it if its own clock has not stopped it first), and torchrun gives its
# processes as long to finish before it kills them.


def plan_value(compute, what):
    try:
        return compute()
    except ValueError as err:  # a partition limit that leaves no time to train
        raise WorkflowError(f"invalid params: {what}: {err}") from None


LARGEST = largest_models(config["train"])
STAGE_TIMES = plan_value(lambda: runtime.stage_runtimes(config, LARGEST), "stage time limits")


# What the Slurm plugin turns into sbatch options: on one node `gpu` (--gpus, the job's total); over several
# `gres` gpu:N (--gres, per node), so that every node gets its GPUs. `tasks` (--ntasks) is one per node for
# CPU jobs and 0 (left out) for GPU jobs, where the plugin would make it --ntasks-per-gpu: Slurm's default is
# then one task per node.
def _training_job(scale, arm, tokens):
    job = scale_layout(config["train"], scale)
    n_params = model_size(config["train"], scale, arm)[2]
    time = plan_value(lambda: runtime.train_job(config["train"], scale, tokens, n_params), f"train {scale}")
    lead = runtime.signal_lead_s(config["train"], n_params, time.limit_min)
    return {
        "nodes": job.nodes,
        "processes": job.processes_per_node,
        "tasks": 0 if job.gpus else job.nodes,
        "gpu": job.gpus_per_node if job.nodes == 1 else 0,
        "gres": f"gpu:{job.gpus_per_node}" if job.nodes > 1 and job.gpus else "",
        "mem_mb": config["train"]["resources"][scale]["mem_mb"],
        "runtime": time.limit_min,
        "jobs": time.jobs,
        "signal_lead_s": lead,
        "slurm_extra": f"--signal=TERM@{lead}" if lead else "",
    }


@functools.cache
def _train_job(cell, run):
    """Every resource of one train job, computed once (Snakemake asks for each one separately)."""
    spec = grid_run(run)
    if cell != spec.cell:
        raise WorkflowError(f"run {run} belongs to cell {spec.cell}, not {cell}")
    return _training_job(spec.scale, spec.arm, job_tokens(config["train"], spec))


# A resource that every run of the grid has alike is given as that value: Snakemake calls a resource function
# once per job and resource, and a constant costs nothing. `runtime` stays a function, a budget's share, so
# that every train job still passes _train_job's check that its run belongs to its cell.
def train_resource(name):
    values = {_train_job(spec.cell, run)[name] for run, spec in RUNS.items()}
    if len(values) == 1 and name != "runtime":
        return values.pop()
    return per_job(lambda wildcards: _train_job(wildcards.cell, wildcards.run)[name])


@functools.cache
def _trunk_job(cell, trunk, span):
    """A trunk segment needs what a run of its scale needs, for its share of the largest budget's time."""
    segment = grid_segment(cell, trunk, span)
    return _training_job(segment.trunk.scale, segment.trunk.arm, job_tokens(config["train"], segment))


def trunk_resource(name):
    return per_job(lambda wildcards: _trunk_job(wildcards.cell, wildcards.trunk, wildcards.span)[name])


def rule_retries(jobs):
    """A rule's retries when train.max_job_minutes splits jobs (plan/runtime.py); None (the profile's or
    --retries) without a partition limit; 0 inside a cluster job: the Snakemake there runs the one job, and
    the next attempt must be the controller's, a new job with a time limit of its own."""
    if not workflow.is_main_process:
        return 0
    if config["train"].get("max_job_minutes") is None:
        return None
    return runtime.retries(jobs)


TRAIN_RETRIES = rule_retries(_train_job(spec.cell, run)["jobs"] for run, spec in RUNS.items())
TRUNK_RETRIES = rule_retries(_trunk_job(s.trunk.cell, s.trunk.name, s.span)["jobs"] for s in SEGMENTS.values())
EVALUATE_RETRIES = rule_retries(entry["jobs"] for entry in STAGE_TIMES["evaluate"].values())


def stage_runtime(stage):
    """The time limit of a stage's job (minutes): one value, or per scale (condition) or cell (evaluate)."""
    if stage == "condition":
        times = STAGE_TIMES["condition"]
        return per_job(lambda wildcards: times[grid_run(wildcards.run).scale]["limit_min"])
    if stage == "evaluate":
        return per_job(lambda wildcards: STAGE_TIMES["evaluate"][wildcards.cell]["limit_min"])
    return STAGE_TIMES[stage]["limit_min"]


def segment_input(wildcards):
    """A segment trains after the segment before it (the record of its start; none for the first)."""
    segment = grid_segment(wildcards.cell, wildcards.trunk, wildcards.span)
    before = segment_before(_SEGMENT_ENDS, segment)
    return settled({"after": before.record} if before else {})


def branch_input(wildcards):
    """A WSD run starts from its trunk segment's kept state: after that segment (a cosine run: nothing)."""
    if grid_run(wildcards.run).schedule != "wsd":
        return {}
    return settled({"trunk": branch_segment(_SEGMENT_ENDS, config["train"], grid_run(wildcards.run)).record})


def process_memory(run):
    # condition loads one copy of the model, like one training process; at least 2 GB.
    res = config["train"]["resources"][grid_run(run).scale]
    return max(2000, res["mem_mb"] // res["processes"])


def condition_memory():
    values = {process_memory(run) for run in RUNS}
    if len(values) == 1:
        return values.pop()
    return per_job(lambda wildcards: process_memory(wildcards.run))


# evaluate: a GPU when the cell's runs trained on one and evaluate.device allows it.
def evaluate_gpus(wildcards):
    scale = next(RUNS[run].scale for run in runs_of_cell(wildcards.cell))
    wants = config["train"]["resources"][scale]["gpus"] > 0 and config["evaluate"]["device"] != "cpu"
    return 1 if wants else 0
