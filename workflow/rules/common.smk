# Shared by every rule: the params file's grid and what each job needs, from ngptlab.workflow (tested there,
# without Snakemake), handed to the rules through the thin functions below.

import os
import sys
from pathlib import Path

from ngptlab import layout
from ngptlab.plan.lineage import STAGES
from ngptlab.workflow.grid import Grid
from ngptlab.workflow.jobs import Jobs
from ngptlab.workflow.signatures import declare_resource_signature, per_job

# `ngptlab` and `torchrun` must come from the environment that runs Snakemake (also inside Slurm jobs,
# which start `python -m snakemake` with this same interpreter).
os.environ.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")

# The rules' software: the environment that runs Snakemake (the .venv), or with `--software-deployment-method
# conda` this one, whose post-deploy script installs this project from the working directory.
CONDA_ENV = "../envs/ngptlab.yaml"

# The params file, loaded and checked once, before any job; a config that merges overrides is refused.
GRID = Grid.from_config(config, workflow.overwrite_configfiles, check_outputs=workflow.is_main_process)
JOBS = Jobs(GRID, main_process=workflow.is_main_process)
PARAMS, RUNS, CELLS, SOURCE, SEGMENTS, TOKENS = (GRID.params_file, GRID.runs, GRID.cells, GRID.source,
                                                 GRID.segments, GRID.tokens)
declare_resource_signature()


# One path component each, not an alternation of the grid's names (the paper grid's ~1300 cost most of
# `snakemake -n`); a name outside the grid is refused where a rule looks it up (ngptlab.workflow.grid).
wildcard_constraints:
    run="[^/]+",
    cell="[^/]+",


# Every input goes through `settled()` (Snakemake's `ancient`): `dvc commit`, `checkout`, `pull` and `exp
# apply` re-create files with new modification times, and a newer input file alone must never rerun a job.
# What does rerun one is a missing output: its key file (a lineage input) under a new key. The profile
# (workflow/profiles/default) turns off Snakemake's record-based rerun triggers, which the keys replace.
def settled(files):
    if isinstance(files, dict):
        return {key: settled(value) for key, value in files.items()}
    if isinstance(files, (list, tuple)):
        return [ancient(path) for path in files]
    return ancient(files)


def of(function, *names, inputs=False):
    """`function` of the named wildcards as a Snakemake function (its files settled, with `inputs`); a value
    that is not a function stays as it is."""
    if not callable(function):
        return function
    wrap = settled if inputs else (lambda value: value)
    return per_job(lambda wildcards: wrap(function(*(getattr(wildcards, name) for name in names))))


def lineage_input(stage, job):
    """A job's key file, its input that stands for everything the job is made from; `job` may be a wildcard
    pattern where the stage has one key for all its jobs."""
    return settled(GRID.stage_lineage_file(stage, job))


def group_lineage_input(stage, job):
    """The key file of a run's or trunk segment's job (`job` a pattern of its wildcards): its lineage
    group's key, a pattern where all the stage's jobs have one group."""
    pattern = GRID.group_lineage_file(stage, job)
    if pattern is not None:
        return settled(pattern)
    return per_job(lambda wildcards: settled(GRID.lineage_file(stage, job.format(**wildcards))))


def cell_lineage_input(stage):
    return of(lambda cell: GRID.lineage_file(stage, cell), "cell", inputs=True)


def run_files(*kinds):
    """One run's train outputs `kinds` ("model", "config", "summary"), by kind (a rule takes it through
    `unpack`)."""
    return of(lambda run: {kind: GRID.train_outputs(run)[kind] for kind in kinds}, "run", inputs=True)


def cell_files(kind):
    """A cell's `kind` train output ("summary", "metrics", "model"), all its runs."""
    return of(lambda cell: GRID.cell_train_outputs(cell, kind), "cell", inputs=True)


def lineage_record(wildcards):
    return GRID.lineage_record(wildcards.stage, wildcards.job, wildcards.key)


def retired_outputs(wildcards):
    """The outputs a new key file retires: the job's, made from something else."""
    if wildcards.stage == "report":
        return list(rules.report.output)
    return GRID.outputs_of(wildcards.stage, wildcards.job)


def train_resource(name):
    return of(JOBS.train_resource(name), "cell", "run")


def trunk_resource(name):
    return of(JOBS.trunk_resource(name), "cell", "trunk", "span")
