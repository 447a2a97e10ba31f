"""The DAG: Snakemake lints clean and plans exactly the grid of params.yaml (in a scratch copy, the tests'
own, .test/params.yaml), dvc.yaml runs the same jobs with the same outputs, the presets are complete params
files, bad params stop everything with one clear line, and (slow) the smoke pipeline runs end to end on this
machine."""

from __future__ import annotations

import json
import math
import re
from collections import Counter

import pytest
import yaml
from dvc.dependency.param import ParamsDependency
from dvc.repo import Repo
from support.workflow import (
    BIN,
    E2E_DIVERGING,
    REPO,
    apply_preset,
    default_params,
    dvc,
    e2e_params,
    git,
    job_counts,
    local_smoke_run,
    make_workdir,
    planned_jobs,
    snakemake,
)
from support.workflow import run as run_command

from ngptlab import layout
from ngptlab.config.load import load_params
from ngptlab.grid.enumeration import enumerate_cells, enumerate_runs
from ngptlab.plan.grid import check_grid_file
from ngptlab.results import json_ready, read_run_result, train_dir
from ngptlab.settings import Params, allowed_arms
from ngptlab.speedup.estimator import estimate_cell

PRESETS = sorted(p.stem for p in (REPO / "workflow" / "presets").glob("*.yaml"))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A fresh copy of the workflow (no outputs yet) with the tests' params and their plan, inside its own git
    repository, as DVC requires."""
    work = make_workdir(tmp_path_factory.mktemp("workflow") / "repo")
    git(work, "init", "-q")
    return work


@pytest.fixture(scope="module")
def dry_run(scratch) -> str:
    """The whole DAG as Snakemake plans it for the tests' params (forced, so nothing counts as done)."""
    return snakemake(scratch, "--dry-run", "--forceall", "--nolock").stdout


def expected_counts(params: Params) -> Counter:
    runs, cells = enumerate_runs(params), enumerate_cells(params)
    return Counter(prepare=1, train=len(runs), condition=len(runs), speedup=len(cells), evaluate=len(cells),
                   report=1, lineage=2 * len(runs) + 2 * len(cells) + 2, all=1)  # a key file per job


def dvc_stages(work):
    """(stage name, rule, cmd, file deps, (params file, key)s, outs) of every stage dvc.yaml resolves to."""
    with Repo(str(work)) as repo:
        stages = []
        for stage in repo.index.stages:
            params = [(dep.def_path, key) for dep in stage.deps if isinstance(dep, ParamsDependency)
                      for key in (dep.params or [None])]  # None: every key of the file
            deps = [dep.def_path for dep in stage.deps if not isinstance(dep, ParamsDependency)]
            stages.append((stage.name, stage.name.split("@")[0], stage.cmd, deps, params,
                           [out.def_path for out in stage.outs]))
        return stages


def test_snakemake_lint_is_clean(scratch):
    out = snakemake(scratch, "--lint", "--nolock")
    assert "Congratulations, your workflow is in a good condition!" in out.stdout + out.stderr


def test_dry_run_plans_every_run_and_cell_of_the_grid(scratch, dry_run):
    params = load_params(scratch / "params.yaml")
    counts = job_counts(dry_run)
    assert counts == expected_counts(params)
    trained = sorted(job.outputs[0] for job in planned_jobs(dry_run) if job.rule == "train")
    assert trained == sorted(f"runs/{r.cell}/{r.name}/model.safetensors" for r in enumerate_runs(params))


def test_dvc_stages_run_the_same_jobs_with_the_same_outputs(scratch, dry_run):
    jobs = [job for job in planned_jobs(dry_run) if job.rule not in ("all", "lineage")]
    stages = [s for s in dvc_stages(scratch) if s[1] != "plan"]  # plan: DVC's own, it writes plan.json

    def key_file(job):
        return next(path for path in job.inputs if path.startswith("results/lineage/"))

    # Each stage's outputs are its job's, and the folder of the job's lineage key file.
    expected = sorted((j.rule, sorted([*j.outputs, key_file(j).rsplit("/", 1)[0]])) for j in jobs)
    assert expected == sorted((s[1], sorted(s[5])) for s in stages)

    by_outputs = {tuple(sorted(job.outputs)): job for job in jobs}
    for name, rule, cmd, deps, _, outs in stages:
        job = by_outputs[tuple(sorted(out for out in outs if not out.startswith("results/lineage/")))]
        # Each stage delegates to its own rule (and writes its key file), for one of its own outputs, after
        # checking the plan.
        assert f"--allowed-rules lineage {rule} -- " in cmd, name
        assert cmd.split(" -- ")[-1] in outs, name
        assert cmd.startswith("ngptlab plan --params params.yaml --check results/plan.json && snakemake "), \
            name
        # Whatever Snakemake reads, DVC hashes: each input is a dependency or lies inside one.
        for path in set(job.inputs) - {key_file(job)}:
            assert any(path == dep or path.startswith(dep.rstrip("/") + "/") for dep in deps), (name, path)


def test_the_report_stage_names_each_cached_file_it_reads_so_repro_pull_can_fetch_it(scratch, dry_run):
    """`dvc repro --pull --allow-missing` pulls a missing dependency of a stage it runs by the dependency's
    path, which must be some stage's output: a directory that merely holds outputs (results/conditioning) is
    not pulled. So the report depends on each run's conditioning result and spectra table (DVC-cached) one by
    one, exactly the files Snakemake's report rule takes, and on no directory holding a cached output."""
    params = load_params(scratch / "params.yaml")
    stages = dvc_stages(scratch)
    (report,) = [stage for stage in stages if stage[0] == "report"]
    deps = report[3]
    conditioning = [path for run in enumerate_runs(params)
                    for path in layout.conditioning_files(run.name).values()]
    assert [dep for dep in deps if dep.startswith("results/conditioning")] == conditioning
    (job,) = [job for job in planned_jobs(dry_run) if job.rule == "report"]
    assert {path for path in job.inputs if path.startswith("results/conditioning")} == set(conditioning)
    cached = [out for stage in stages for out in stage[5] if out.endswith(".parquet")]
    assert not [dep for dep in deps for out in cached if out.startswith(dep.rstrip("/") + "/")]


def test_dvc_declares_the_lineage_keys_snakemake_names_its_key_files_by(scratch, dry_run):
    plan = json.loads((scratch / "results" / "plan.json").read_text())
    key_files = {path for job in planned_jobs(dry_run) if job.rule == "lineage" for path in job.outputs}
    for name, rule, _, deps, params, outs in dvc_stages(scratch):
        if rule == "plan":  # made from the whole params file and every stage's code
            assert {file for file, _ in params} == {"params.yaml"}
            # every stage's code (its key holds the import closure's) and the refactors accepted as such
            assert deps == ["src/ngptlab", "results/accepted-code.json"]
            continue
        assert not any(dep.startswith("src/") for dep in deps), name  # the code is in the key
        ((file, key),) = params  # one param: the stage's key, from the plan
        assert file == "results/plan.json" and key.startswith(f"lineage.{rule}"), (name, key)
        value = plan
        for part in key.split("."):
            value = value[part]
        folder = next(out for out in outs if out.startswith("results/lineage/"))
        assert f"{folder}/{value}" in key_files, name  # the key Snakemake's job takes as its input


def test_dvc_cache_policy_large_outputs_cached_small_results_committed():
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    for name, stage in stages.items():
        body = stage.get("do", stage)
        for out in body.get("outs", []) + body.get("metrics", []):
            path, opts = (out, {}) if isinstance(out, str) else next(iter(out.items()))
            # the spectra tables are results, but ~120 MB per 1B checkpoint: DVC cache, not git
            # and the lineage key files, so that `dvc exp apply` restores a job's key folder exactly
            committed = ((path.startswith("results/") and not path.endswith(".parquet")
                          and not path.startswith("results/lineage/")) or path.endswith("/meta.json")
                         or path == "reports/metrics")
            assert opts.get("cache", True) == (not committed), (name, path)


def test_presets_are_complete_params_files():
    assert PRESETS == ["first-light", "paper", "pilot", "rehearsal", "settle", "small"], (
        f"workflow/presets/ holds {PRESETS}: name each preset in this list and in the parametrize of the "
        "time-limit tests below (tests/test_workflow.py)")
    for preset in PRESETS:
        load_params(REPO / "workflow" / "presets" / f"{preset}.yaml")  # the same schema and checks
    paper = load_params(REPO / "workflow" / "presets" / "paper.yaml")
    train = paper.train
    assert train.scales == ("0.5B", "1B") and train.contexts == (1024, 4096, 8192)
    assert list(train.arms) == allowed_arms()  # every arm
    assert train.batch_sequences == 512  # the paper's batch at every context (see the preset's note)
    assert train.warmup_steps == 2000  # the paper's Table 3 for GPT
    # Learning rates per context, the same sweep for every arm.
    for scale, sweeps in train.learning_rates.items():
        assert set(sweeps) == set(train.arms), scale
        assert all(set(sweep) == {"ctx1024", "ctx4096", "ctx8192"} for sweep in sweeps.values()), scale
        assert len({json.dumps(sweep, sort_keys=True) for sweep in sweeps.values()}) == 1, scale
    assert min(train.budgets) <= 10e9 and max(train.budgets) >= 500e9
    source = paper.prepare.source
    assert (source.kind, source.name, source.min_documents) == ("local", "openwebtext", 8013769)


def assert_time_limits_of_the_plan(work, dry_run: str) -> None:
    """Through the Slurm profile (`dry_run`: its --dry-run output): every job's --time from the plan (no
    profile default), none over the partition's limit, training jobs with their early signal, and the
    plan's jobs per run."""
    limit = load_params(work / "params.yaml").train.max_job_minutes
    plan = json.loads(run_command([str(BIN / "ngptlab"), "plan", "--params", "params.yaml", "--json"],
                                  work).stdout)
    jobs, cells = plan["runs"] + plan["trunks"], len(plan["cells"])
    runtimes = [int(value) for value in re.findall(r"\bruntime=(\d+)", dry_run)]
    # every job but the local lineage ones: train and trunk, condition per run, speedup and evaluate per cell,
    # prepare and report
    assert len(runtimes) == len(jobs) + len(plan["runs"]) + 2 * cells + 2
    assert max(runtimes) <= limit
    trained = re.findall(r"\bruntime=(\d+), slurm_extra=(--signal=TERM@\d+)", dry_run)
    assert sorted(int(t) for t, _ in trained) == sorted(j["time_limit_min"] for j in jobs)
    # each within its estimate (its share of runtime_min), rounded up to a minute, at least 10 minutes
    assert all(j["time_limit_min"] <= max(10, math.ceil(j["estimate_min"])) for j in jobs)
    assert all(j["jobs"] >= math.ceil(j["estimate_min"] / limit) for j in jobs)


@pytest.mark.parametrize("preset", ["first-light", "pilot", "rehearsal", "settle"])  # small, paper: below
def test_every_job_of_a_preset_asks_slurm_for_the_time_the_plan_gives_it(preset, tmp_path):
    work = make_workdir(tmp_path / "repo")
    apply_preset(work, preset)
    dry = snakemake(work, "--dry-run", "--nolock", "--profile", "slurm", timeout=300).stdout
    assert_time_limits_of_the_plan(work, dry)


@pytest.mark.parametrize("preset", ["small", pytest.param("paper", marks=pytest.mark.slow)])
def test_applied_preset_plans_its_grid_in_snakemake_and_dvc(preset, tmp_path):
    work = make_workdir(tmp_path / "repo")
    apply_preset(work, preset)
    git(work, "init", "-q")
    params = load_params(work / "params.yaml")
    dry = snakemake(work, "--dry-run", "--nolock", "--profile", "slurm", timeout=300).stdout
    counts = job_counts(dry)
    assert counts == expected_counts(params)
    assert_time_limits_of_the_plan(work, dry)
    assert len(dvc_stages(work)) == sum(counts.values()) - counts["lineage"]  # all jobs but `all`; plan


def test_config_overrides_are_refused_because_the_stages_would_not_see_them(scratch):
    out = snakemake(scratch, "--dry-run", "--nolock", "--configfile", "workflow/presets/small.yaml",
                    check=False)
    assert out.returncode != 0
    assert "merges params.yaml with --configfile/--config overrides" in out.stdout + out.stderr
    # One complete file is fine: it is what every stage is then told to read.
    out = snakemake(scratch, "--dry-run", "--nolock", "--configfile", "workflow/presets/small.yaml",
                    "--replace-workflow-config")
    assert job_counts(out.stdout) == expected_counts(load_params(REPO / "workflow/presets/small.yaml"))


def test_bad_params_stop_the_workflow_with_one_line_naming_the_key(tmp_path):
    params = default_params()
    params["speedup"]["boostrap"] = 3
    work = make_workdir(tmp_path / "repo")
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    out = snakemake(work, "--dry-run", "--nolock", check=False)
    assert out.returncode != 0
    lines = [line for line in (out.stdout + out.stderr).splitlines() if "invalid params: " in line]
    assert lines, out.stdout[-2000:] + out.stderr[-2000:]
    # the file, the key and the keys allowed there, the one meant among them
    assert "invalid params: params.yaml: unknown key speedup.boostrap; allowed keys: " in lines[0]
    assert re.search(r"allowed keys: .*\bbootstrap\b", lines[0]), lines[0]


def test_a_stale_plan_stops_every_dvc_stage_and_a_changed_grid_takes_a_second_pass(tmp_path):
    params = default_params()
    work = make_workdir(tmp_path / "repo")
    git(work, "init", "-q")
    params["train"]["budgets"] = [16384]
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))  # plan.json not rewritten
    # A stage run alone refuses the stale plan before it runs anything.
    out = dvc(work, "repro", "--single-item", "prepare", check=False)
    assert out.returncode != 0
    assert "results/plan.json: stale, it no longer matches the params file" in out.stdout + out.stderr
    assert not (work / "data" / "tokens").exists() and not (work / "dvc.lock").exists()
    # The pipeline's plan stage rewrites the plan, but DVC resolved the stages from the old grid: it stops.
    out = dvc(work, "repro", "prepare", check=False)
    assert out.returncode != 0
    assert "the grid changed (" in out.stdout + out.stderr and "run `dvc repro`" in out.stdout + out.stderr
    assert not (work / "data" / "tokens").exists()
    settings = Params.of(params)
    check_grid_file(settings, work / "results" / "plan.json", work)  # ... after rewriting it
    runs = enumerate_runs(settings)
    assert {run.budget for run in runs} == {16384}
    assert len(dvc_stages(work)) == 2 + 2 * len(runs) + 2 * len(enumerate_cells(settings)) + 1


@pytest.mark.slow
def test_smoke_pipeline_runs_end_to_end_locally(tmp_path_factory):
    smoke = local_smoke_run(tmp_path_factory.getbasetemp())
    print(f"end-to-end grid (snakemake --cores 2): {smoke.wall_s:.0f} s")
    work, params = smoke.work, Params.of(e2e_params())
    statuses = {}
    for run in enumerate_runs(params):
        summary = yaml.safe_load((train_dir(work, run) / "summary.json").read_text())
        statuses[run.name] = summary["status"]
        if (run.arm, run.lr) == E2E_DIVERGING:
            assert summary["status"] == "diverged" and summary["final_val_loss"] is None, run.name
            assert "train.diverge_loss" in summary["diagnostics"]["reason"], run.name
        else:
            assert summary["status"] == "completed" and summary["tokens"] == run.budget, run.name
        assert (work / "results" / "conditioning" / f"{run.name}.json").is_file()
    assert set(statuses.values()) == {"completed", "diverged"}  # both paths ran
    for cell in enumerate_cells(params):
        doc = json.loads((work / layout.speedup_file(cell)).read_text())
        # the further baseline: the speed-ups estimate_cell gives against it alone, from the same runs
        cell_runs = [read_run_result(work, s) for s in enumerate_runs(params) if s.cell == cell]
        alone = estimate_cell(cell_runs, "ngpt", doc["bootstrap"]["resamples"], doc["bootstrap"]["seed"],
                              doc["equivalence_margin"], doc["resolve_ratio"])
        assert doc["baseline"] == "gpt" and list(doc["by_baseline"]) == ["ngpt"]
        further = doc["by_baseline"]["ngpt"]
        assert further["targets"] == json_ready(alone["targets"]) and further["targets"][0]["arm"] == "ngpt"
        assert {arm: entry["speedup"] for arm, entry in further["arms"].items()} == \
            json_ready({arm: entry["speedup"] for arm, entry in alone["arms"].items()})
        evaluated = yaml.safe_load((work / "results" / "evaluate" / f"{cell}.json").read_text())
        # Each arm's best completed run at the largest budget, on every task of params.yaml, through lm-eval.
        assert sorted(entry["arm"] for entry in evaluated["runs"]) == sorted(params.train.arms)
        for entry in evaluated["runs"]:
            assert entry["budget"] == max(params.train.budgets)
            assert statuses[entry["run"]] == "completed"
            assert set(entry["results"]) == set(params.evaluate.tasks)
            assert all(0 <= task["acc"] <= 1 and task["n"] > 0 for task in entry["results"].values())
    report = (work / "reports" / "report.md").read_text()
    diverged = sorted(name for name, status in statuses.items() if status == "diverged")
    assert all(f"`{name}`" in report for name in diverged)  # the report names the diverged runs
    assert (work / "reports" / "report.html").stat().st_size > 10_000
    assert "Speed-up against gpt (" in report and "Speed-up against ngpt (" in report  # a table per baseline
    assert (work / "reports" / "tables" / "speedup_ngpt.csv").is_file()
    logs = sorted(p.name for p in (work / "logs").iterdir())
    assert logs == ["condition", "evaluate", "lineage", "prepare", "report", "speedup", "train"]  # per rule
    out = snakemake(work, "--dry-run")
    assert job_counts(out.stdout) == Counter() and "Nothing to be done" in out.stdout + out.stderr
