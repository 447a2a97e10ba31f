"""The workflow's grid, lineage and job resources (ngptlab.workflow), without Snakemake: on the tests' params
(.test/params.yaml), on its WSD variant and on the paper and pilot presets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from snakemake.exceptions import WorkflowError
from support import TEST_PARAMS, fixture_params

from ngptlab import layout
from ngptlab.config.load import load_params, read_mapping
from ngptlab.grid.enumeration import enumerate_cells, enumerate_runs
from ngptlab.grid.trunks import enumerate_segments
from ngptlab.layout import REPO_ROOT
from ngptlab.plan.closure import stage_fingerprints
from ngptlab.plan.grid import resolved_grid
from ngptlab.plan.lineage import STAGES
from ngptlab.workflow.grid import MERGED_CONFIG, Grid
from ngptlab.workflow.jobs import Jobs

PRESETS = REPO_ROOT / "workflow" / "presets"


def wsd_params(tmp_path: Path) -> Path:
    params = fixture_params()
    params["train"]["schedule"] = "wsd"
    path = tmp_path / "params-wsd.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


@pytest.fixture(params=["params.yaml", "wsd", "paper", "pilot"])
def params_file(request, tmp_path) -> str:
    if request.param == "params.yaml":
        return str(TEST_PARAMS)
    if request.param == "wsd":
        return str(wsd_params(tmp_path))
    return str(PRESETS / f"{request.param}.yaml")


def grid_of(params_file: str) -> Grid:
    # the code fingerprints of the repository's stages, wherever the tests run
    params = load_params(params_file)
    return Grid(params, params_file, code=stage_fingerprints(REPO_ROOT, params.train.arms))


def test_the_grid_is_the_plans(params_file):
    params = load_params(params_file)
    grid = grid_of(params_file)
    plan = resolved_grid(params, REPO_ROOT)
    assert list(grid.runs) == [run.name for run in enumerate_runs(params)]
    assert grid.cells == enumerate_cells(params) == list(plan["cells"])
    assert [s.name for s in grid.segments.values()] == list(plan["trunks"])
    assert grid.lineage == plan["lineage"]  # Snakemake's keys are DVC's
    assert grid.tokens == [f"data/tokens/{plan['source']}/{n}" for n in ("train.bin", "val.bin", "meta.json")]


def test_from_config_loads_one_params_file_and_refuses_merged_configs(tmp_path):
    path = TEST_PARAMS
    config = read_mapping(path)  # Snakemake's config: the file's mapping
    assert Grid.from_config(config, [path]).params_file == str(path)
    changed = {**config, "speedup": {**config["speedup"], "seed": config["speedup"]["seed"] + 1}}
    with pytest.raises(WorkflowError, match="--replace-workflow-config"):
        Grid.from_config(changed, [path])
    with pytest.raises(WorkflowError) as err:
        Grid.from_config(config, [path, path])
    assert str(err.value).startswith(MERGED_CONFIG[:40])
    bad = tmp_path / "bad.yaml"
    bad_config = {**config, "train": {**config["train"], "budgets": "many"}}
    bad.write_text(yaml.safe_dump(bad_config))
    with pytest.raises(WorkflowError, match="^invalid params: .*bad.yaml"):
        Grid.from_config(bad_config, [bad])


def test_every_job_has_one_key_file_and_its_record(params_file):
    grid = grid_of(params_file)
    files = grid.lineage_files()
    jobs = 1 + len(grid.segments) + 2 * len(grid.runs) + 2 * len(grid.cells) + 1
    assert len(files) == len(set(files)) == jobs
    for path in files[:3] + files[-3:]:
        stage, *job, key = Path(path).relative_to("results/lineage").parts
        record = json.loads(grid.lineage_record(stage, "/".join(job), key))
        assert record["key"] == key and record["stage"] == stage and stage in STAGES
    with pytest.raises(WorkflowError, match="not the lineage key"):
        grid.lineage_record(stage, "/".join(job), "0" * 16)


def test_names_outside_the_grid_are_refused():
    grid = grid_of(str(TEST_PARAMS))
    with pytest.raises(WorkflowError, match="cell 'nowhere' is not in the grid"):
        grid.runs_of_cell("nowhere")
    with pytest.raises(WorkflowError, match="run 'none' is not in the grid"):
        grid.lineage_file("condition", "none")
    with pytest.raises(WorkflowError, match="trunk segment"):
        grid.segment("c", "t", "from0-to1")


def test_outputs_and_inputs_follow_the_layout(params_file):
    grid = grid_of(params_file)
    run, spec = next(iter(grid.runs.items()))
    outputs = grid.train_outputs(run)
    assert outputs["model"] == f"{layout.run_dir(spec.cell, run)}/model.safetensors"
    assert layout.timing_file(spec.cell, run) not in outputs.values()  # measured speed: no job's output
    assert grid.outputs_of("train", f"{spec.cell}/{run}") == list(outputs.values())
    assert grid.outputs_of("condition", run) == list(layout.conditioning_files(run).values())
    assert grid.cell_train_outputs(spec.cell, "summary")[0] == grid.train_outputs(
        grid.runs_of_cell(spec.cell)[0])["summary"]
    everything = grid.all_outputs()
    per_run = 4 + 2  # train and condition outputs
    assert len(everything) == len(set(everything)) == (len(grid.tokens) + per_run * len(grid.runs)
                                                       + len(grid.segments) + 2 * len(grid.cells))
    assert set(grid.tokens) <= set(everything)  # a shard deleted to repair it is a missing target
    if spec.schedule == "wsd":  # a WSD run starts after its trunk segment, which is a job of the grid
        assert grid.branch_from(run)["trunk"] in {s.record for s in grid.segments.values()}
    else:
        assert grid.branch_from(run) == {}
    firsts = [s for s in grid.segments.values() if s.start == 0] if grid.segments else []
    for segment in firsts:
        assert grid.segment_after(segment.trunk.cell, segment.trunk.name, segment.span) == {}


def test_train_resources_and_retries_on_the_paper_preset():
    params_file = str(PRESETS / "paper.yaml")
    params = load_params(params_file)
    jobs = Jobs(grid_of(params_file))
    run = next(r for r in enumerate_runs(params) if r.scale == params.train.scales[-1])
    job = jobs.train_job(run.cell, run.name)
    limit = params.train.max_job_minutes
    assert 0 < job["runtime"] <= limit and job["jobs"] >= 1
    assert job["slurm_extra"] == f"--signal=TERM@{job['signal_lead_s']}"
    assert callable(jobs.train_resource("runtime"))  # a budget's share: one per job
    assert jobs.train_resource("runtime")(run.cell, run.name) == job["runtime"]
    # every retry of the longest job is one more Slurm job of the partition's limit, plus the profile's one
    assert jobs.train_retries() == max(jobs.train_job(r.cell, r.name)["jobs"] for r in enumerate_runs(params))
    assert Jobs(grid_of(params_file), main_process=False).train_retries() == 0
    with pytest.raises(WorkflowError, match="belongs to cell"):
        jobs.train_job("elsewhere", run.name)


def test_resources_alike_over_the_grid_are_constants():
    params_file = str(TEST_PARAMS)
    params = load_params(params_file)
    jobs = Jobs(grid_of(params_file))
    scale = params.train.scales[0]
    resources = params.train.resources[scale]
    assert jobs.train_resource("mem_mb") == resources.mem_mb
    assert jobs.train_resource("nodes") == 1
    assert jobs.train_retries() is None  # no partition limit: the profile's retries
    assert jobs.condition_memory() == max(2000, resources.mem_mb // resources.processes)
    cell = enumerate_cells(params)[0]
    assert jobs.evaluate_gpus(cell) == 0  # a CPU grid
    assert jobs.evaluate_runtime(cell) == jobs.stage_times["evaluate"][cell]["limit_min"]
    assert jobs.stage_runtime("report") == jobs.stage_times["report"]["limit_min"]


def test_trunk_jobs_need_what_a_run_of_their_scale_needs(tmp_path):
    params_file = str(wsd_params(tmp_path))
    grid = grid_of(params_file)
    jobs = Jobs(grid)
    segments = enumerate_segments(grid.params)
    assert segments and len(grid.segments) == len(segments)
    s = segments[0]
    trunk = jobs.trunk_job(s.trunk.cell, s.trunk.name, s.span)
    run = next(spec for spec in grid.runs.values() if spec.scale == s.trunk.scale)
    timed = ("runtime", "jobs", "signal_lead_s", "slurm_extra")  # its own share of the time
    train = jobs.train_job(run.cell, run.name)
    untimed = {k: v for k, v in trunk.items() if k not in timed}
    assert untimed == {k: v for k, v in train.items() if k not in timed}
    assert jobs.trunk_resource("nodes")(s.trunk.cell, s.trunk.name, s.span) == trunk["nodes"]
    # one lineage group: one pattern for all jobs; the angle arms' own groups: each job's file
    groups = {spec.lineage_group for spec in grid.runs.values()}
    assert (grid.group_lineage_file("train", "{cell}/{run}") is None) == (len(groups) > 1)
    trunk_groups = {segment.trunk.lineage_group for segment in grid.segments.values()}
    assert (grid.group_lineage_file("trunk", "{cell}/{trunk}/{span}") is None) == (len(trunk_groups) > 1)
    for job, segment in grid.segments.items():
        key = grid.lineage["trunk"][segment.trunk.lineage_group]
        assert grid.lineage_file("trunk", job).endswith(f"{job}/{key}")
