"""Sharing results through a real DVC remote on a real SSH server (127.0.0.1, key auth, `.ci/setup-sshd.sh`):
after a Snakemake run, `dvc commit` + `dvc push` record and share it; a fresh clone re-renders the report
from the committed results and the pulled spectra tables (no checkpoint downloaded, nothing retrained),
byte-identical to the pushed one; another, after a change of the report's settings, reruns exactly the plan
and the report with `dvc repro --pull --allow-missing`, pulling only the spectra tables; and after a full
`dvc pull`, `snakemake -n` has nothing to do. These are docs/cluster.md's documented paths, run as written.
"""

from __future__ import annotations

import uuid
from collections import Counter

import pytest
from support.workflow import (
    SSH_ENV,
    copy_run,
    default_params,
    dvc,
    git,
    job_counts,
    local_smoke_run,
    on_server,
    ran_stages,
    set_params,
    snakemake,
    tree,
)

pytestmark = [
    pytest.mark.ssh,
    pytest.mark.slow,
    pytest.mark.skipif(not SSH_ENV.is_file(),
                       reason=f"no SSH server here (no {SSH_ENV}); `bash .ci/setup-sshd.sh` starts one"),
]


@pytest.fixture(scope="module")
def ssh() -> dict[str, str]:
    return dict(line.split("=", 1) for line in SSH_ENV.read_text().split())


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    return local_smoke_run(tmp_path_factory.getbasetemp())




@pytest.fixture
def remote_path(ssh):
    """A fresh directory on the server for this test's remote, removed afterwards (checkpoints, ~1 GB)."""
    path = f"{ssh['NGPTLAB_SSH_ROOT']}/{uuid.uuid4().hex}"
    yield path
    on_server(ssh, f"rm -rf {path}")


def test_push_clone_pull_rerender_and_nothing_left_to_do(smoke, ssh, remote_path, tmp_path):
    origin = copy_run(smoke.work, tmp_path / "origin")
    tokens = f"data/tokens/{default_params()['prepare']['source']['name']}"
    url = f"ssh://{ssh['NGPTLAB_SSH_USER']}@{ssh['NGPTLAB_SSH_HOST']}:{ssh['NGPTLAB_SSH_PORT']}{remote_path}"

    # After a Snakemake run: record it (dvc commit), commit to git, share it (dvc push).
    git(origin, "init", "-q")
    dvc(origin, "remote", "add", "--default", "lab", url)
    dvc(origin, "remote", "modify", "lab", "keyfile", ssh["NGPTLAB_SSH_KEY"])
    dvc(origin, "commit", "--force")
    assert "Data and pipelines are up to date" in dvc(origin, "status").stdout
    git(origin, "add", "-A")
    committed = git(origin, "ls-files").stdout.split()
    assert f"{tokens}/meta.json" in committed, \
        "meta.json must be committed: .gitignore /data/tokens/**, !/data/tokens/*/, !/data/tokens/*/meta.json"
    # the report's headline numbers (reports/metrics/<cell>/<arm>.json, DVC's metrics) are small: in git
    assert any(path.startswith("reports/metrics/") for path in committed)
    assert not any(path.startswith(("runs/", "reports/")) or path.endswith((".bin", ".parquet"))
                   for path in committed if not path.startswith("reports/metrics/"))
    git(origin, "commit", "-q", "-m", "smoke run")
    dvc(origin, "push")
    assert int(on_server(ssh, f"find {remote_path} -type f | wc -l")) > 0
    assert "in sync" in dvc(origin, "status", "--cloud").stdout

    # A fresh clone has the small results (git) and none of the large files.
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    assert (clone / "results" / "speedup").is_dir() and not (clone / "runs").exists()
    assert not (clone / "reports" / "report.md").exists()

    # Re-render the report (README): the spectra tables come from the remote, no checkpoint, no retraining.
    dvc(clone, "pull", "condition")
    assert sorted(clone.glob("results/conditioning/*.spectra.parquet"))
    dvc(clone, "repro", "--force", "--single-item", "report")
    assert not (clone / "runs").exists() and not (clone / "logs" / "train").exists()
    assert not (clone / tokens / "train.bin").exists()
    rendered = tree(clone / "reports")
    assert "tables/runs.csv" in rendered and "provenance.json" in rendered
    assert rendered == tree(origin / "reports"), "a fresh-clone re-render must be byte-identical"
    assert git(clone, "status", "--porcelain", "dvc.lock").stdout == "", "re-rendering changed dvc.lock"

    # After a change, in another fresh clone: `dvc repro --pull --allow-missing` reruns what changed (the plan
    # and the report) and pulls only the inputs of what it runs, the report's spectra tables, each of which
    # the report stage names; the stages whose data alone is missing are skipped, no checkpoint is pulled.
    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", str(origin), str(fresh))
    set_params(fresh, "report.title=After a change")
    out = dvc(fresh, "repro", "--pull", "--allow-missing", timeout=1800)
    assert ran_stages(out.stdout) == Counter(plan=1, report=1), out.stdout[-3000:]
    spectra = sorted(path.name for path in fresh.glob("results/conditioning/*.spectra.parquet"))
    assert spectra == sorted(path.name for path in origin.glob("results/conditioning/*.spectra.parquet"))
    assert not (fresh / "runs").exists() and not (fresh / tokens / "train.bin").exists()
    assert "After a change" in (fresh / "reports" / "report.md").read_text()
    out = dvc(fresh, "repro", "--pull", "--allow-missing")
    assert ran_stages(out.stdout) == Counter(), out.stdout[-3000:]  # nothing left to run

    # Everything: the pulled files have new times, and still neither tool has anything to do.
    dvc(clone, "pull")
    assert "Data and pipelines are up to date" in dvc(clone, "status").stdout
    out = snakemake(clone, "--dry-run")
    assert job_counts(out.stdout) == {} and "Nothing to be done" in out.stdout + out.stderr
