"""`ngptlab plan`: the size and cost of every run from the shapes alone, batch arithmetic, quiet pipes."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest
import yaml
from support import TEST_PARAMS, fixture_params

from ngptlab.layout import REPO_ROOT

PAPER = REPO_ROOT / "workflow" / "presets" / "paper.yaml"


def test_a_clone_starts_with_no_results():
    """git tracks what the pipeline is made from, not what a run of it made: under results/ only the plan
    and the accepted code, under reports/ nothing. Results committed by accident (a run's summary, a timing
    file) would stand in a fresh clone for runs it never trained. Where this fails, `git rm --cached` the
    files it names."""
    from ngptlab.layout import ACCEPTED_CODE

    if not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(["git", "ls-files", "results", "reports"], cwd=REPO_ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    assert set(tracked) - {"results/plan.json", ACCEPTED_CODE} == set()


def test_the_committed_plan_is_the_plan_of_the_committed_params_and_code():
    """The one check of the committed results/plan.json (and the grid's list in dvc.yaml written with it):
    dvc.yaml reads it, so a fresh clone's `dvc repro` must find it current for the researcher's params.yaml
    and this code. Every other test writes its own plan (support.workflow.make_workdir) and passes whatever
    state the committed one is in."""
    from ngptlab.config.load import load_params
    from ngptlab.errors import ParamsError
    from ngptlab.plan.grid import check_grid_file

    params, stale = load_params(REPO_ROOT / "params.yaml"), None
    try:
        check_grid_file(params, REPO_ROOT / "results" / "plan.json", REPO_ROOT)
    except ParamsError as err:
        stale = str(err)
    if stale:
        pytest.fail(f"the committed plan is stale: {stale}\nto fix: in {REPO_ROOT}, run "
                    "`ngptlab plan --write results/plan.json` and commit results/plan.json and dvc.yaml",
                    pytrace=False)


def test_the_plan_lists_each_runs_conditioning_files_in_the_report_stage_and_check_refuses_another_list(
        tmp_path):
    """DVC's templating cannot expand a list of paths, and `dvc repro --pull` pulls a stage's missing inputs
    only where each is named (test_workflow): writing the plan dvc.yaml reads writes every run's conditioning
    files between the report stage's marker lines (a plan written elsewhere leaves dvc.yaml alone), once, and
    `--check` refuses a list that is not the grid's, naming the fix."""
    from ngptlab import layout
    from ngptlab.config.load import load_params
    from ngptlab.errors import ParamsError
    from ngptlab.grid.enumeration import enumerate_runs
    from ngptlab.plan.dvcyaml import PLAN_FILE, check_report_inputs, write_report_inputs

    dvc_yaml = tmp_path / "dvc.yaml"
    committed = (REPO_ROOT / "dvc.yaml").read_text().splitlines(keepends=True)
    begin, end = (next(i for i, line in enumerate(committed) if marker in line)
                  for marker in ("# >>> every run's", "# <<< every run's"))
    dvc_yaml.write_text("".join(committed[:begin + 1] + committed[end:]))  # an empty list
    params = load_params(TEST_PARAMS)
    files = [path for run in enumerate_runs(params) for path in layout.conditioning_files(run.name).values()]
    plan = tmp_path / PLAN_FILE

    assert not write_report_inputs(params, tmp_path / "elsewhere.json", tmp_path)
    assert write_report_inputs(params, plan, tmp_path)
    stage = yaml.safe_load(dvc_yaml.read_text())["stages"]["report"]
    assert [dep for dep in stage["deps"] if dep.startswith("results/conditioning")] == files
    written = dvc_yaml.read_text()
    assert not write_report_inputs(params, plan, tmp_path) and dvc_yaml.read_text() == written
    check_report_inputs(params, plan, tmp_path, "fix it")

    dvc_yaml.write_text(written.replace(f"      - {files[-1]}\n", ""))  # one run's table left out
    with pytest.raises(ParamsError, match=r"conditioning files are not the grid's .* fix it"):
        check_report_inputs(params, plan, tmp_path, "fix it")
    dvc_yaml.write_text(written.replace("# <<< every run's conditioning files", ""))
    with pytest.raises(ParamsError, match="marker lines"):
        write_report_inputs(params, plan, tmp_path)


def test_plan_sizes_the_paper_grid_without_torch():
    code = ("import sys; from ngptlab.cli import main; rc = main(['plan', '--params', sys.argv[1]]); "
            "assert rc == 0; assert 'torch' not in sys.modules, 'plan imported torch'")
    result = subprocess.run([sys.executable, "-c", code, str(PAPER)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "1B-ctx8192-gpt-orth" in result.stdout


def test_plan_into_a_closed_pipe_ends_quietly():
    command = f"{sys.executable} -m ngptlab.cli plan --json --params {PAPER} | head -n 2"
    result = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True)
    assert result.stdout.splitlines()[0] == "{"
    assert result.stderr == "" and result.returncode == 0


def _paper_rows(scale: str = "0.5B", budget: int = 10**10) -> dict:
    from ngptlab.config.load import load_params
    from ngptlab.grid.enumeration import enumerate_runs
    from ngptlab.plan.estimate import estimate_runs

    params = load_params(PAPER)
    runs = [r for r in enumerate_runs(params) if r.scale == scale and r.budget == budget]
    return params, estimate_runs(params.train, runs, mfu=0.4, peak_tflops=989.0)


@pytest.mark.parametrize("context, steps", [(1024, 19_073), (4096, 4_768), (8192, 2_384)])
def test_paper_plan_trains_512_sequences_per_step_at_every_context(context, steps):
    _, rows = _paper_rows()
    rows = [r for r in rows if r["context"] == context]
    assert {r["batch_sequences"] for r in rows} == {512}
    assert {r["tokens_per_step"] for r in rows} == {512 * context}
    assert {r["steps"] for r in rows} == {steps}  # 10B tokens // (512 x context)
    warmups = {r["arm"]: r["warmup_steps"] for r in rows}
    assert warmups["ngpt"] == 0 and warmups["gpt"] == min(2000, steps // 2)


def test_paper_plan_sweeps_learning_rates_per_context():
    params, rows = _paper_rows()
    sweeps = {(r["context"], r["arm"]): sorted(x["lr"] for x in rows
                                               if (x["context"], x["arm"]) == (r["context"], r["arm"]))
              for r in rows}
    assert sweeps[(1024, "gpt")] == [3.75e-4, 7.5e-4, 1.5e-3, 3.0e-3]
    assert sweeps[(8192, "gpt")] == [7.5e-4, 1.5e-3, 3.0e-3, 6.0e-3]
    assert len({tuple(v) for (c, _), v in sweeps.items() if c == 4096}) == 1  # equal for every arm


def test_extend_sweeps_adds_exactly_the_neighbouring_runs_until_interior(tmp_path):
    from test_speedup_command import BUDGETS, EDGE_SWEEPS, write_train_results

    from ngptlab.cli import main
    from ngptlab.config.load import load_params
    from ngptlab.grid.enumeration import enumerate_runs
    from ngptlab.plan.grid import check_grid_file

    params = fixture_params()
    params["train"].update(contexts=[64], budgets=BUDGETS, arms=list(EDGE_SWEEPS),
                           learning_rates={"cpu-4l": {arm: list(v) for arm, v in EDGE_SWEEPS.items()}})
    params_file = tmp_path / "params.yaml"
    params_file.write_text("# my experiment\n" + yaml.safe_dump(params, sort_keys=False))
    (tmp_path / "src").symlink_to(REPO_ROOT / "src")  # the project's code, which the plan fingerprints
    before = {r.name for r in enumerate_runs(load_params(params_file))}
    for spec in enumerate_runs(load_params(params_file)):
        write_train_results(tmp_path, spec)  # best lr 3e-3: interior for gpt, bottom for ngpt, top for orth
    extend = ["plan", "--params", str(params_file), "--extend-sweeps", "--root", str(tmp_path)]

    assert main(extend) == 0
    grown = load_params(params_file)
    sweeps = grown.train.learning_rates["cpu-4l"]
    assert sweeps == {"gpt": (1e-3, 3e-3, 1e-2), "ngpt": (1.5e-3, 3e-3, 1e-2, 3e-2),
                      "gpt-orth": (3e-4, 1e-3, 3e-3, 6e-3)}
    new = {r.name for r in enumerate_runs(grown)} - before
    added = (("ngpt", "0.0015"), ("gpt-orth", "0.006"))
    assert new == {f"cpu-4l-ctx64-{arm}-t{b}-lr{lr}-s0" for arm, lr in added for b in BUDGETS}
    assert params_file.read_text().startswith("# my experiment\n")  # the file is edited, not regenerated
    check_grid_file(grown, tmp_path / "results" / "plan.json", tmp_path)  # the resolved grid follows

    assert main(extend) == 0  # new runs not trained yet: nothing to conclude, nothing added
    assert load_params(params_file) == grown
    for spec in enumerate_runs(grown):
        if spec.name in new:
            write_train_results(tmp_path, spec)
    assert main(extend) == 0  # every best (3e-3) is interior now
    assert load_params(params_file) == grown


def test_extend_sweeps_stops_at_the_cap(tmp_path, capsys):
    from test_speedup_command import BUDGETS, EDGE_SWEEPS, write_train_results

    from ngptlab.cli import main
    from ngptlab.config.load import load_params
    from ngptlab.grid.enumeration import enumerate_runs
    from ngptlab.settings import Params

    params = fixture_params()
    params["train"].update(contexts=[64], budgets=BUDGETS, arms=list(EDGE_SWEEPS),
                           learning_rates={"cpu-4l": {arm: list(v) for arm, v in EDGE_SWEEPS.items()}})
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(params, sort_keys=False))
    (tmp_path / "src").symlink_to(REPO_ROOT / "src")
    for spec in enumerate_runs(Params.of(params)):
        write_train_results(tmp_path, spec)
    assert main(["plan", "--params", str(params_file), "--extend-sweeps", "--root", str(tmp_path),
                 "--max-sweep", "3"]) == 0
    assert load_params(params_file).train.learning_rates == Params.of(params).train.learning_rates
    assert "cpu-4l ctx64 ngpt: best lr at the bottom of its sweep, which already has 3 values" in \
        capsys.readouterr().out


def test_plan_notes_unequal_sweeps(tmp_path, capsys):
    from ngptlab.cli import main

    params = fixture_params()
    params["train"]["learning_rates"]["cpu-4l"]["gpt"] = [1e-2]
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    assert main(["plan", "--params", str(path)]) == 0
    assert "note: cpu-4l ctx128: unequal learning-rate sweeps (gpt 1, gpt-nowd 3," in capsys.readouterr().out
    assert main(["plan", "--params", str(TEST_PARAMS)]) == 0  # the tests' grid: equal sweeps
    assert "unequal" not in capsys.readouterr().out


def test_plan_shows_nodes_gpus_and_wall_time_per_run():
    params, rows = _paper_rows("1B")
    layout = params.train.resources["1B"]
    assert {(r["nodes"], r["gpus_per_node"], r["gpus"]) for r in rows} == {
        (layout.nodes, layout.gpus, layout.nodes * layout.gpus)}
    for r in rows:
        assert r["wall_hours"] == pytest.approx(r["gpu_hours"] / r["gpus"])
        assert r["time_limit_min"] >= 10
    result = subprocess.run([sys.executable, "-m", "ngptlab.cli", "plan", "--params", str(PAPER)],
                            capture_output=True, text=True, check=True)
    header = result.stdout.splitlines()[0]
    assert "nodes x GPUs" in header and "wall-h" in header and "limit-h" in header
    assert f"{layout.nodes} x {layout.gpus}" in next(
        line for line in result.stdout.splitlines() if line.startswith("1B-"))


def test_plan_set_edits_dotted_keys_in_place_keeping_comments_and_rewrites_the_plan(tmp_path, capsys):
    import json

    from ngptlab.cli import main

    params_file, plan_file = tmp_path / "paper.yaml", tmp_path / "plan.json"
    params_file.write_text(PAPER.read_text())
    comments = [line for line in PAPER.read_text().splitlines() if line.lstrip().startswith("#")]
    args = ["plan", "--params", str(params_file), "--write", str(plan_file), "--root", str(REPO_ROOT)]
    # A scale name holds a dot ("0.5B"): the longest existing key wins at each level.
    assert main([*args, "--set", "train.learning_rates.0.5B.ngpt.ctx1024=[1.0e-3, 2.0e-3]",
                 "--set", "evaluate.limit=7"]) == 0
    edited = yaml.safe_load(params_file.read_text())
    assert edited["train"]["learning_rates"]["0.5B"]["ngpt"]["ctx1024"] == [1.0e-3, 2.0e-3]
    assert edited["evaluate"]["limit"] == 7
    kept = [line for line in params_file.read_text().splitlines() if line.lstrip().startswith("#")]
    assert kept == comments
    runs = json.loads(plan_file.read_text())["runs"]
    assert sum("0.5B-ctx1024-ngpt-t" in run for run in runs) == 2 * len(edited["train"]["budgets"])

    before = params_file.read_bytes()
    for bad, message in [("train.budget=[1]", "unknown key train.budget"),
                         ("train.nosuch.key=1", "no key train.nosuch"),
                         ("evaluate.limit", "expected KEY=VALUE")]:
        assert main([*args, "--set", bad]) == 2
        assert message in capsys.readouterr().err
        assert params_file.read_bytes() == before  # nothing written


def test_plan_set_changes_only_the_line_of_the_value_it_sets(tmp_path):
    """A commented params file keeps every other line as written, a flow list wrapped over two lines
    included, and the value set keeps its style and its comment."""
    from ngptlab.cli import main

    params_file = tmp_path / "params.yaml"
    params_file.write_text(TEST_PARAMS.read_text())
    original = params_file.read_text().splitlines()
    budgets = next(i for i, line in enumerate(original) if line.lstrip().startswith("budgets:"))
    assert original[budgets].split("#")[0].rstrip().endswith("]")  # a flow list with a comment after it
    assert main(["plan", "--params", str(params_file), "--write", str(tmp_path / "plan.json"), "--root",
                 str(REPO_ROOT), "--set", "train.budgets=[4096, 16384]"]) == 0
    edited = params_file.read_text().splitlines()
    changed = [i for i, (a, b) in enumerate(zip(original, edited, strict=False)) if a != b]
    assert len(edited) == len(original) and changed == [budgets]
    before, comment = original[budgets].split("#", 1)
    assert edited[budgets] == f"{before.split('[')[0]}[4096, 16384]".ljust(len(before)) + "#" + comment
    assert yaml.safe_load(params_file.read_text())["train"]["budgets"] == [4096, 16384]


def _priced(params: dict) -> dict:
    from ngptlab.config.load import validate_params
    from ngptlab.plan.estimate import estimate_plan

    return estimate_plan(validate_params(params), mfu=0.4, peak_tflops=989.0)


def test_wsd_paper_plan_prices_each_shared_trunk_once():
    import copy

    from ngptlab.config.load import read_mapping

    cosine = read_mapping(PAPER)
    wsd = copy.deepcopy(cosine)
    wsd["train"].update(schedule="wsd", cooldown_fraction=0.2)
    cosine_plan, wsd_plan = _priced(cosine), _priced(wsd)
    ratio = wsd_plan["total_gpu_hours"] / cosine_plan["total_gpu_hours"]
    assert ratio <= 0.70
    # every trunk trains its largest budget once and a 0.2 cooldown of each smaller one (in units of 1e9)
    budgets = sorted(b // 10**9 for b in cosine["train"]["budgets"])
    assert budgets == [10, 20, 50, 100, 200, 500]
    assert ratio == pytest.approx((budgets[-1] + 0.2 * sum(budgets[:-1])) / sum(budgets), abs=1e-3)
    for plan in (cosine_plan, wsd_plan):  # the totals are the runs' and the segments' sums
        jobs = plan["runs"] + plan["trunks"]
        assert plan["total_gpu_hours"] == pytest.approx(sum(r["gpu_hours"] for r in jobs))
        assert plan["total_train_flops"] == pytest.approx(sum(r["train_flops"] for r in jobs))
    assert cosine_plan["trunks"] == [] and len(wsd_plan["trunks"]) == len(wsd_plan["runs"])


TINY_BUDGETS = [2048, 4096, 8192]  # 4, 8 and 16 steps of 512 tokens: a 0.25 cooldown is whole steps


def _tiny_wsd(tmp_path):
    params = fixture_params()
    train = params["train"]
    train.update(arms=["gpt", "ngpt"], budgets=TINY_BUDGETS, schedule="wsd", cooldown_fraction=0.25,
                 calibrate={"budgets": [8192]})
    sweeps = train["learning_rates"]["cpu-4l"]
    train["learning_rates"] = {"cpu-4l": {arm: sweeps[arm] for arm in train["arms"]}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return params, path


def test_tiny_wsd_plan_trains_the_largest_budget_plus_the_cooldowns_per_trunk(tmp_path, capsys):
    import json

    from ngptlab.cli import main

    params, path = _tiny_wsd(tmp_path)
    assert main(["plan", "--json", "--params", str(path)]) == 0
    plan = json.loads(capsys.readouterr().out)
    train = params["train"]
    trunks = len(train["arms"]) * 3 * len(train["seeds"])  # 3 learning rates per arm
    per_trunk = 8192 + 0.25 * (2048 + 4096)  # B_k + f x (B_1 + ... + B_(k-1)), by hand
    calibration = [r for r in plan["runs"] if r.get("schedule") is None]  # cosine rows carry no schedule
    assert len(calibration) == trunks and {r["budget"] for r in calibration} == {8192}
    assert plan["tokens_trained"] == trunks * per_trunk + trunks * 8192
    assert plan["tokens_without_sharing"] == trunks * (sum(TINY_BUDGETS) + 8192)
    assert len({r["trunk"] for r in plan["trunks"]}) == trunks and len(plan["trunks"]) == 3 * trunks

    # calibration runs train their whole budget, at the same FLOPs per token as the WSD branches
    wsd = {(r["arm"], r["lr"], r["budget"]): r for r in plan["runs"] if r.get("schedule") == "wsd"}
    for r in calibration:
        assert r["trained_tokens"] == 8192
        branch = wsd[r["arm"], r["lr"], 8192]
        assert branch["trained_tokens"] == 2048  # 4 of 16 steps
        assert r["train_flops"] == pytest.approx(branch["train_flops"] * 4)
        # warmup: the cosine run's own rule at 16 steps, the WSD run its trunk's (the 4-step budget's)
        assert branch["warmup_steps"] == 0
        assert r["warmup_steps"] == (1 if r["arm"] == "gpt" else 0)
    jobs = plan["runs"] + plan["trunks"]
    assert plan["total_gpu_hours"] == pytest.approx(sum(r["gpu_hours"] for r in jobs))
    for s in plan["trunks"]:
        assert s["trained_tokens"] == (s["step"] - s["start"]) * 512
        assert s["time_limit_min"] >= 10

    assert main(["plan", "--params", str(path)]) == 0
    out = capsys.readouterr().out
    assert "schedule: wsd, cooldown_fraction 0.25" in out
    assert f"ratio {plan['tokens_trained'] / plan['tokens_without_sharing']:.3f}" in out
    assert "runs/trunks/" in out and "never cached nor pushed to a DVC remote" in out
    assert f"{len(plan['runs'])} runs and {len(plan['trunks'])} trunk segments" in out


def test_kept_trunk_states_take_disk_with_wsd_only(tmp_path):
    params, _ = _tiny_wsd(tmp_path)
    wsd = _priced(params)
    state_gb = {r["trunk"]: 12 * r["n_params"] / 1e9 for r in wsd["trunks"]}  # fp32 weights + AdamW moments
    assert wsd["kept_states_peak_gb"] > 0
    assert wsd["kept_states_peak_gb"] == pytest.approx(3 * sum(state_gb.values()))  # 3 segments per trunk
    assert wsd["kept_states_steady_gb"] == pytest.approx(sum(state_gb.values()))  # the latest of each
    params["train"]["schedule"] = "cosine"
    del params["train"]["calibrate"]
    cosine = _priced(params)
    assert cosine["kept_states_peak_gb"] == 0 and cosine["trunks"] == []
    assert cosine["tokens_trained"] == cosine["tokens_without_sharing"] == 2 * 3 * sum(TINY_BUDGETS)


def test_the_merge_keeps_the_files_lines_where_only_the_dump_relaid_them():
    from ngptlab.plan.linemerge import merged

    written = ["a: [1,\n", "   2]\n", "b: 3  # kept\n", "c: 4\n"]
    base = ["a: [1, 2]\n", "b: 3  # kept\n", "c: 4\n"]  # the round trip joins a's wrapped list
    assert merged(base, written, base) == written  # no edit: the file as it was
    assert merged(base, written, [*base[:2], "c: 5\n"]) == [*written[:3], "c: 5\n"]
    assert merged(base, written, [*base, "d: 6\n"]) == [*written, "d: 6\n"]  # an entry added at the end
    assert merged(base, written, ["x: 0\n", *base]) == ["x: 0\n", *written]
    assert merged(base, written, ["a: [7]\n", *base[1:]]) == ["a: [7]\n", *written[2:]]  # the edit wins
    assert merged(base, base, ["b: 9\n"]) == ["b: 9\n"]
    rng = random.Random(0)  # with nothing re-laid, the merge is the edit, whatever it deletes or inserts
    for _ in range(500):
        lines = [f"k{rng.randrange(6)}: 1\n" for _ in range(rng.randrange(8))]
        edit = [line for line in lines if rng.random() > 0.3]
        for _ in range(rng.randrange(3)):
            edit.insert(rng.randrange(len(edit) + 1), f"n{rng.randrange(9)}: 2\n")
        assert merged(lines, lines, edit) == edit and merged(lines, edit, lines) == edit
