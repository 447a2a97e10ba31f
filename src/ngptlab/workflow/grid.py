"""The workflow's grid: the params file, its runs, cells and WSD trunk segments, every job's files, and what
each job is made from (its lineage key).

The grid comes from ngptlab.grid (the same code `ngptlab plan` and every stage use),
never from a second implementation, so Snakemake, DVC (through results/plan.json) and the stages agree. Every
path is ngptlab.layout's; a run's files sit under its cell (see ngptlab/layout.py for why).

Snakemake and DVC agree on what is stale because both decide it from the same lineage keys
(ngptlab/plan/lineage.py), never from file times or Snakemake's own records: every job takes its key file
results/lineage/<stage>/<job>/<key> as an input, so a changed setting, code or upstream key is a new key, a
missing file, and the job and every job after it (their keys include this one) run again. DVC declares the
same keys as params (`lineage.<stage>` of results/plan.json).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from snakemake.exceptions import WorkflowError

from ngptlab import layout
from ngptlab.config.load import load_params, read_mapping
from ngptlab.errors import ParamsError
from ngptlab.grid.enumeration import enumerate_cells, enumerate_runs
from ngptlab.grid.runs import RunSpec
from ngptlab.grid.trunks import Segment, branch_segment, by_end, enumerate_segments, segment_before
from ngptlab.plan.closure import accepted_digest, stage_fingerprints
from ngptlab.plan.grid import cell_key, lineage_keys
from ngptlab.plan.lineage import PER_CELL, PER_SCHEDULE, made_from
from ngptlab.schedule import shares_trunk
from ngptlab.settings import Params
from ngptlab.workflow.damage import damage

MERGED_CONFIG = ("the ngptlab stages read a single params file, but this config merges params.yaml with "
                 "--configfile/--config overrides that would never reach them. Apply a preset with "
                 "`make preset NAME=<name>` (or edit params.yaml), or pass one complete file with "
                 "`--configfile FILE --replace-workflow-config`.")


class Grid:
    """The grid of one params file, as the workflow's rules see it."""

    def __init__(self, params: Params, params_file: str, code: dict | None = None):
        self.params = params
        self.params_file = params_file
        self.runs: dict[str, RunSpec] = {run.name: run for run in enumerate_runs(params)}
        self.cells: list[str] = enumerate_cells(params)
        self.source: str = params.prepare.source.name
        # With train.schedule wsd: the trunk segments, by job ("<cell>/<trunk>/<span>"), and by where they
        # end: a WSD run branches from the segment that ends at its branch point, and a segment comes after
        # the one that ends where it starts.
        self.segments: dict[str, Segment] = {f"{s.trunk.cell}/{s.trunk.name}/{s.span}": s
                                             for s in enumerate_segments(params)}
        self._segment_ends = by_end(list(self.segments.values()))
        tokens_dir = layout.tokens_dir(self.source)
        self.tokens = [f"{tokens_dir}/{name}" for name in ("train.bin", "val.bin", "meta.json")]
        # What each job's results are made from (the settings, the code's fingerprints, the keys upstream),
        # and its key; the same values `ngptlab plan --write` puts in results/plan.json for DVC.
        code = stage_fingerprints(".", params.train.arms) if code is None else code
        self.made_from = made_from(params, code, accepted_digest("."))
        self.lineage = lineage_keys(self.made_from)

    @classmethod
    def from_config(cls, config: dict, configfiles: Iterable = (), check_outputs: bool = True) -> Grid:
        """The grid of Snakemake's config, which must be exactly one params file's content: every stage reads
        the file itself (`ngptlab <verb> --params FILE`), so a --config or merged --configfile override would
        never reach them. The file is loaded and checked here, once, before any job; with `check_outputs`
        (the process that plans, not a job's own), its outputs too (damaged())."""
        candidates = list(configfiles or ()) or ["params.yaml"]
        try:
            if len(candidates) != 1 or read_mapping(candidates[0]) != config:
                raise WorkflowError(MERGED_CONFIG)
            grid = cls(load_params(candidates[0]), str(candidates[0]))
        except ParamsError as err:
            raise WorkflowError(f"invalid params: {err}") from None
        problem = grid.damaged() if check_outputs else None
        if problem:
            raise WorkflowError(f"damaged output: {problem}")
        return grid

    # ------------------------------------------------------------------------------------------------------
    # Lookups: a name outside the grid is refused where a rule first looks it up.

    def runs_of_cell(self, cell: str) -> list[str]:
        if cell not in self.cells:
            raise WorkflowError(f"cell {cell!r} is not in the grid of {self.params_file} "
                                f"(cells: {', '.join(self.cells)})")
        return [name for name, run in self.runs.items() if run.cell == cell]

    def run(self, run: str) -> RunSpec:
        if run not in self.runs:
            raise WorkflowError(f"run {run!r} is not in the grid of {self.params_file} "
                                "(`ngptlab plan` lists its runs)")
        return self.runs[run]

    def segment(self, cell: str, trunk: str, span: str) -> Segment:
        job = f"{cell}/{trunk}/{span}"
        if job not in self.segments:
            raise WorkflowError(f"trunk segment {job!r} is not in the grid of {self.params_file} "
                                "(`ngptlab plan` lists them)")
        return self.segments[job]

    # ------------------------------------------------------------------------------------------------------
    # Files

    def train_outputs(self, run: str, cell: str | None = None) -> dict[str, str]:
        """A run's train outputs; with "{run}" and "{cell}" the train rule's output patterns. Not its timing
        file (layout.timing_file), which the job writes too: measured speed differs from one identical
        training to the next, so it is no job's output or input, in Snakemake as in DVC (the report reads
        it and records its digest)."""
        cell = cell or self.run(run).cell
        run_dir, results_dir = layout.run_dir(cell, run), layout.train_results_dir(cell, run)
        return {
            "model": f"{run_dir}/model.safetensors",
            "config": f"{run_dir}/config.json",
            "summary": f"{results_dir}/summary.json",
            "metrics": f"{results_dir}/metrics.jsonl",
        }

    def damaged(self, root: str | Path = ".") -> str | None:
        """The first truncated shard or checkpoint under root, with its repair (workflow/damage.py)."""
        return damage(root, layout.tokens_dir(self.source),
                      (layout.run_dir(run.cell, name) for name, run in self.runs.items()))

    def cell_train_outputs(self, cell: str, kind: str) -> list[str]:
        """The `kind` train output ("summary", "metrics", "model") of every run of a cell."""
        return [self.train_outputs(run)[kind] for run in self.runs_of_cell(cell)]

    def segment_after(self, cell: str, trunk: str, span: str) -> dict[str, str]:
        """A segment trains after the segment before it (the record of its start; none for the first)."""
        before = segment_before(self._segment_ends, self.segment(cell, trunk, span))
        return {"after": before.record} if before else {}

    def branch_from(self, run: str) -> dict[str, str]:
        """A WSD run starts from its trunk segment's kept state: after that segment (a cosine run:
        nothing)."""
        spec = self.run(run)
        if not shares_trunk(spec):
            return {}
        return {"trunk": branch_segment(self._segment_ends, self.params.train, spec).record}

    def outputs_of(self, stage: str, job: str) -> list[str]:
        """A job's outputs (the report's are its rule's, not known here)."""
        if stage == "prepare":
            return self.tokens
        if stage == "train":
            cell, run = job.split("/")
            return list(self.train_outputs(run, cell).values())
        if stage == "trunk":
            return [self.segments[job].record]
        if stage == "condition":
            return list(layout.conditioning_files(job).values())
        if stage == "speedup":
            return [layout.speedup_file(job)]
        if stage == "evaluate":
            return [layout.evaluate_file(job)]
        raise ValueError(f"the outputs of stage {stage} are its rule's")

    def all_outputs(self) -> list[str]:
        """Every file of the grid but the report's and the key files; the token shards too, so that a shard
        deleted to repair it is made again (workflow/damage.py)."""
        return [*self.tokens,
                *(path for run in self.runs for path in (*self.train_outputs(run).values(),
                                                          *layout.conditioning_files(run).values())),
                *(segment.record for segment in self.segments.values()),  # WSD trunks
                *(layout.speedup_file(cell) for cell in self.cells),
                *(layout.evaluate_file(cell) for cell in self.cells)]

    # ------------------------------------------------------------------------------------------------------
    # Lineage

    def lineage_of(self, stage: str, job: str) -> tuple[dict, str]:
        """(what the job is made from, its key); a cell's job for speedup and evaluate, a run's lineage
        group's for train (job "<cell>/<run>") and condition (job "<run>"), a trunk's for its segments (job
        "<cell>/<trunk>/<span>"), one for prepare and report."""
        if stage in PER_CELL:
            self.runs_of_cell(job)  # refuses a cell outside the grid
            return self.made_from[stage][job], self.lineage[stage][cell_key(job)]
        if stage in PER_SCHEDULE:
            group = self._group_of(stage, job)
            return self.made_from[stage][group], self.lineage[stage][group]
        return self.made_from[stage], self.lineage[stage]

    def lineage_file(self, stage: str, job: str) -> str:
        """A job's key file."""
        return layout.lineage_file(stage, job, self.lineage_of(stage, job)[1])

    def stage_lineage_file(self, stage: str, job: str) -> str:
        """The key file of a stage with one key for all its jobs; `job` may be a wildcard pattern."""
        return layout.lineage_file(stage, job, self.lineage[stage])

    def _group_of(self, stage: str, job: str) -> str:
        """A trunk segment's (job "<cell>/<trunk>/<span>") or a run's lineage group."""
        if stage == "trunk":
            return self.segment(*job.split("/")).trunk.lineage_group
        return self.run(job.split("/")[-1]).lineage_group

    def group_lineage_file(self, stage: str, job: str) -> str | None:
        """The key file of a run's or trunk segment's job as a pattern (`job` of its wildcards) where all the
        stage's jobs have one lineage group, which costs Snakemake nothing per job; None where each job's
        group decides."""
        specs = (s.trunk for s in self.segments.values()) if stage == "trunk" else self.runs.values()
        groups = {spec.lineage_group for spec in specs}
        if len(groups) != 1:
            return None
        return layout.lineage_file(stage, job, self.lineage[stage][groups.pop()])

    def lineage_files(self) -> list[str]:
        """Every job's key file."""
        jobs = [("prepare", self.source), *(("trunk", job) for job in self.segments),
                *(("train", f"{spec.cell}/{run}") for run, spec in self.runs.items()),
                *(("condition", run) for run in self.runs),
                *((stage, cell) for stage in PER_CELL for cell in self.cells), ("report", "all")]
        return [self.lineage_file(stage, job) for stage, job in jobs]

    def lineage_record(self, stage: str, job: str, key: str) -> str:
        """The text of a job's key file: what the job is made from (a key other than the job's is refused)."""
        sources, current = self.lineage_of(stage, job)
        if key != current:
            raise WorkflowError(f"{layout.lineage_file(stage, job, key)}: not the lineage key of {stage} "
                                f"{job} under {self.params_file} ({current})")
        return json.dumps({"stage": stage, "job": job, "key": current, "made_from": sources},
                          indent=1, sort_keys=True)
