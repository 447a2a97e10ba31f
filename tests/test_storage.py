"""`ngptlab plan`'s disk figures (plan/storage.py): final checkpoints, resume state at the Slurm profile's
concurrency, DVC's cache and remote; and resume state that DVC never hashes (.dvcignore)."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from support import TEST_PARAMS

from ngptlab.config.load import load_params
from ngptlab.errors import ParamsError
from ngptlab.layout import REPO_ROOT
from ngptlab.plan.estimate import estimate_plan
from ngptlab.plan.protocol import projected_params
from ngptlab.plan.storage import plan_storage, profile_jobs, storage_summary
from ngptlab.settings import allowed_arms

PRESETS = REPO_ROOT / "workflow" / "presets"
PAPER = PRESETS / "paper.yaml"


@pytest.fixture(scope="module")
def paper_plan() -> dict:
    """The paper preset's whole grid: its runs with the angle arms its protocol adds once their angles are
    measured (train.protocol.match_angles)."""
    return estimate_plan(projected_params(load_params(PAPER)), mfu=0.4, peak_tflops=989.0)


def whole_paper(tmp_path) -> str:
    """The paper preset without its protocol: every arm listed from the start, as `ngptlab plan` prints the
    whole grid."""
    params = yaml.safe_load(PAPER.read_text())
    del params["train"]["protocol"]
    path = tmp_path / "paper.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return str(path)


def _profile(tmp_path, jobs) -> str:
    path = tmp_path / f"profile-{jobs}.yaml"
    path.write_text(yaml.safe_dump({"executor": "slurm", "jobs": jobs}))
    return str(path)


def test_paper_final_checkpoints_are_4_bytes_a_parameter_of_every_run(paper_plan):
    storage = storage_summary(paper_plan, 100, "profile")
    final = storage["final_checkpoints"]
    # 3 contexts x every arm x 6 budgets x 4 learning rates per scale, 4 bytes per fp32 parameter
    per_scale = 3 * len(allowed_arms()) * 6 * 4
    assert {scale: entry["runs"] for scale, entry in final["per_scale"].items()} == {"0.5B": per_scale,
                                                                                       "1B": per_scale}
    for scale, entry in final["per_scale"].items():
        assert entry["bytes"] == 4 * sum(r["n_params"] for r in paper_plan["runs"] if r["scale"] == scale)
    assert final["bytes"] == sum(entry["bytes"] for entry in final["per_scale"].values())
    assert final["per_scale"]["0.5B"]["bytes"] == pytest.approx(per_scale * 4 * 506e6, rel=0.001)
    assert final["per_scale"]["1B"]["bytes"] == pytest.approx(per_scale * 4 * 1073e6, rel=0.001)
    # DVC: a copying cache is a second copy and the remote a third; linked, the cache adds nothing
    assert storage["dvc"] == {"cache_bytes_copy": final["bytes"], "cache_bytes_link": 0,
                              "remote_bytes": final["bytes"]}


def test_peak_resume_state_scales_with_the_profiles_jobs(paper_plan, tmp_path):
    peaks = {}
    for jobs in (2, 4):
        storage = plan_storage(paper_plan, tmp_path, _profile(tmp_path, jobs))
        resume = storage["resume_state"]
        assert resume["profile_jobs"] == resume["concurrent_jobs"] == jobs
        peaks[jobs] = resume["peak_bytes"]
    largest = sorted((r["n_params"] for r in paper_plan["runs"]), reverse=True)
    assert peaks[2] == 12 * sum(largest[:2])  # fp32 weights + AdamW's two moments, the largest runs first
    assert peaks[4] == 12 * sum(largest[:4])
    assert peaks[4] == pytest.approx(2 * peaks[2], rel=0.01)  # the largest runs are all 1B, nearly equal


def test_concurrency_is_capped_by_the_grid_and_read_from_the_profile(tmp_path):
    params = load_params(TEST_PARAMS)
    plan = estimate_plan(params, mfu=0.4, peak_tflops=989.0)
    resume = plan_storage(plan, tmp_path, _profile(tmp_path, 100_000))["resume_state"]
    assert resume["concurrent_jobs"] == len(plan["runs"])
    assert resume["peak_bytes"] == 12 * sum(r["n_params"] for r in plan["runs"])
    # the default: the project's Slurm profile under --root; absent, every job at once
    assert plan_storage(plan, REPO_ROOT)["resume_state"]["profile_jobs"] == profile_jobs(
        REPO_ROOT / "workflow" / "profiles" / "slurm" / "config.yaml") == 100
    absent = plan_storage(plan, tmp_path)["resume_state"]
    assert not absent["profile_found"] and absent["concurrent_jobs"] == len(plan["runs"])
    assert profile_jobs(_profile(tmp_path, "unlimited")) is None
    with pytest.raises(ParamsError, match="jobs must be a positive integer"):
        profile_jobs(_profile(tmp_path, 0))
    with pytest.raises(ParamsError, match="cannot read the Slurm profile"):
        plan_storage(plan, tmp_path, str(tmp_path / "missing.yaml"))


def test_wsd_peak_adds_one_kept_state_per_trunk(tmp_path):
    plan = estimate_plan(load_params(PRESETS / "settle.yaml"), mfu=0.4, peak_tflops=989.0)
    resume = plan_storage(plan, tmp_path, _profile(tmp_path, 2))["resume_state"]
    trunks = {s["trunk"]: 12 * s["n_params"] for s in plan["trunks"]}
    # settle lists at first its 7 arms that wait for no angle (the angle arms do), three learning rates each
    assert len(trunks) == 7 * 3 and resume["kept_trunk_states_bytes"] == sum(trunks.values())
    assert resume["kept_trunk_states_worst_bytes"] == 12 * sum(s["n_params"] for s in plan["trunks"])
    assert resume["peak_bytes"] == resume["running_bytes"] + resume["kept_trunk_states_bytes"]
    # the kept states agree with the sharing summary's (in GB)
    assert resume["kept_trunk_states_bytes"] / 1e9 == pytest.approx(plan["kept_states_steady_gb"])


def test_plan_prints_the_disk_lines_and_json_has_storage(tmp_path, capsys):
    from ngptlab.cli import main

    assert main(["plan", "--params", whole_paper(tmp_path), "--root", str(REPO_ROOT)]) == 0
    out = capsys.readouterr().out
    assert "disk (decimal: 1 GB = 10^9 bytes, 1 TB = 10^12): final checkpoints 6.82 TB" in out  # 15 arms
    assert "0.5B 2.19 TB, 1B 4.63 TB" in out
    assert "resume state at the profile's 100 concurrent jobs" in out and "peak 1.29 TB" in out
    assert "DVC cache (dvc commit): +6.82 TB with cache.type copy" in out
    assert "0 with hardlink/symlink" in out and "remote (dvc push): 6.82 TB" in out
    assert out.index("disk (decimal") < out.index("GPU-hours at 40% MFU")  # the totals stay the last line

    assert main(["plan", "--json", "--params", str(PAPER), "--profile-config", _profile(tmp_path, 3)]) == 0
    storage = json.loads(capsys.readouterr().out)["storage"]
    assert storage["resume_state"]["concurrent_jobs"] == 3
    assert isinstance(storage["final_checkpoints"]["bytes"], int)
    assert storage["final_checkpoints"]["bytes"] == storage["dvc"]["remote_bytes"]


def test_dvc_never_hashes_a_runs_resume_state(tmp_path):
    """A stage that depends on a cell's run directory, as dvc.yaml's evaluate does, stays up to date when an
    interrupted run leaves resume state (or a half-written temporary file) there, or a run writes its
    TensorBoard events, with the project's .dvcignore; a new file that is not ignored does change it."""
    from support.workflow import dvc, git

    assert "runs/${key}" in yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text())[
        "stages"]["evaluate"]["do"]["deps"]
    work = tmp_path / "repo"
    run_dir = work / "runs" / "0.5B-ctx1024" / "0.5B-ctx1024-gpt-t1-lr0.001-s0"
    run_dir.mkdir(parents=True)
    (run_dir / "model.safetensors").write_bytes(b"weights")
    (run_dir / "config.json").write_text("{}")
    shutil.copy2(REPO_ROOT / ".dvcignore", work / ".dvcignore")
    (work / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"evaluate": {
        "cmd": "echo done > evaluate.txt", "deps": ["runs/0.5B-ctx1024"],
        "outs": [{"evaluate.txt": {"cache": False}}]}}}))
    git(work, "init", "-q")
    dvc(work, "init", "-q")
    dvc(work, "repro", "-q")
    lock = yaml.safe_load((work / "dvc.lock").read_text())
    assert lock["stages"]["evaluate"]["deps"][0]["nfiles"] == 2

    state = run_dir / "state" / "ckpt-00000040-1"
    state.mkdir(parents=True)
    (state / "optimizer.safetensors").write_bytes(b"moments")
    (run_dir / "state" / "latest.json").write_text('{"step": 40}')
    (run_dir / ".model.safetensors.abc123.tmp").write_bytes(b"half")
    (run_dir / "tensorboard").mkdir()  # the run's curves, which differ between identical runs
    (run_dir / "tensorboard" / "events.out.tfevents.1700000000.node1.42.0").write_bytes(b"events")
    assert "Data and pipelines are up to date" in dvc(work, "status").stdout
    assert "runs/*/*/state/" in dvc(work, "check-ignore", "-d",
                                   str((run_dir / "state" / "latest.json").relative_to(work))).stdout

    (run_dir / "notes.txt").write_text("not ignored")
    assert "modified" in dvc(work, "status").stdout
