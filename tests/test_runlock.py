"""The guard against a second training of one run (ngptlab/runlock.py): flock where it works, and the owner
record with its heartbeat where it does not (a real FUSE filesystem whose flock fails, as on NFS without
lockd), with stale records taken over."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import signal
import subprocess
import threading
import time

import pytest
from support.lock import fuse_missing, held_elsewhere, mounted
from support.train import make_params, run_dir, run_name, write_shards

from ngptlab import runlock
from ngptlab.errors import ParamsError
from ngptlab.grid.enumeration import find_run
from ngptlab.settings import Params
from ngptlab.train.loop import train_run

OLD = 3600.0  # a heartbeat an hour old: stale at any interval


@pytest.fixture(scope="module")
def nolock_fs(tmp_path_factory):
    """A directory on which `fcntl.flock` raises OSError(ENOLCK)."""
    if reason := fuse_missing():
        pytest.skip(reason)
    with mounted(tmp_path_factory.mktemp("nolockfs")) as mount:
        yield mount


@pytest.fixture(autouse=True)
def squeue(tmp_path, monkeypatch):
    """A stand-in `squeue` first on PATH (whatever Slurm this machine has), answering what a test sets; by
    default that it cannot reach the controller, so the heartbeat decides."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    script = bin_dir / "squeue"
    script.write_text('#!/bin/sh\nd=$(dirname "$0")\necho "$@" >> "$d/calls"\n'
                      'cat "$d/out"\ncat "$d/err" >&2\nexit "$(cat "$d/rc")"\n')
    script.chmod(0o755)

    def answer(out: str = "", err: str = "", rc: int = 0) -> None:
        for name, text in (("out", out), ("err", err), ("rc", str(rc))):
            (bin_dir / name).write_text(text)

    answer(err="squeue: error: Unable to contact slurm controller (connect failure)", rc=1)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    for name in ("SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_CLUSTER_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(runlock, "_said_no_flock", False)
    answer.calls = bin_dir / "calls"
    return answer


def plant(lock, age_s: float = 0.0, **fields):
    """An owner record of someone else at `lock`, its heartbeat `age_s` old."""
    record = runlock.owner_record(lock)
    lock.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({**runlock.identity(), "token": "planted",
                                  "started": "2020-01-01T00:00:00+00:00", **fields}))
    beat = time.time() - age_s
    os.utime(record, (beat, beat))
    return record


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def taken_over(lock, capsys, holder: str) -> None:
    with runlock.acquire(lock) as held:
        assert json.loads(held.record.read_text())["pid"] == os.getpid()
    assert f"took over the stale lock {lock} of {holder}" in capsys.readouterr().err
    assert not held.record.exists()


# ----------------------------------------------------------------------------------------------------------
# Where flock fails: a real filesystem


def test_a_second_trainer_is_refused_where_flock_fails_and_the_lock_is_free_once_the_holder_ends(
        nolock_fs, capsys):
    lock = nolock_fs / "refused" / "state" / ".lock"
    with held_elsewhere(lock) as holder:
        with pytest.raises(runlock.LockHeld, match=rf"held by pid {holder.pid} on host .*; "
                                                   rf"pid {holder.pid} runs on this host"):
            runlock.acquire(lock)
        assert "flock is not available on the filesystem of" in capsys.readouterr().err
    assert not runlock.owner_record(lock).exists()  # the holder's clean release
    with runlock.acquire(lock):
        pass
    assert "flock is not available" not in capsys.readouterr().err  # said once per process


def test_ngptlab_train_refuses_a_run_being_trained_elsewhere_where_flock_fails(nolock_fs):
    root = nolock_fs / "train"
    write_shards(root)
    params = make_params()
    with held_elsewhere(run_dir(root, run_name()) / "state" / ".lock") as holder:
        with pytest.raises(ParamsError, match=rf"{run_name()} is already being trained by another process "
                                              rf"\(lock .*state/\.lock, held by pid {holder.pid} on host "):
            settings = Params.of(params)
            train_run(find_run(settings, run_name()), settings.train, root=root, progress=False)


def test_the_record_of_a_killed_holder_is_taken_over_where_flock_fails(nolock_fs, capsys):
    lock = nolock_fs / "killed" / ".lock"
    with held_elsewhere(lock) as holder:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        assert runlock.owner_record(lock).exists()  # no clean release
        taken_over(lock, capsys, f"pid {holder.pid} on host")


# ----------------------------------------------------------------------------------------------------------
# Stale records and live ones


def test_a_record_of_a_dead_pid_on_this_machine_is_taken_over_whatever_its_heartbeat(tmp_path, capsys):
    for age in (OLD, 0.0):  # the pid decides on its own machine, so a kill -9 is taken over at once
        pid = dead_pid()
        plant(tmp_path / ".lock", age, pid=pid, pid_start=None)
        taken_over(tmp_path / ".lock", capsys, f"pid {pid} on host")


def test_a_live_pid_with_another_start_time_is_a_reused_pid_and_taken_over(tmp_path, capsys):
    plant(tmp_path / ".lock", pid=os.getppid(), pid_start=1)
    taken_over(tmp_path / ".lock", capsys, f"pid {os.getppid()} on host")


def test_another_hosts_record_refuses_while_its_heartbeat_is_fresh_and_is_taken_over_once_stale(tmp_path,
                                                                                                 capsys):
    lock = tmp_path / ".lock"
    plant(lock, 5.0, host="node-b", pid=4242, slurm_job="777")
    with pytest.raises(runlock.LockHeld, match=r"held by pid 4242 on host node-b, Slurm job 777 \(since "
                                               r"2020-01-01T00:00:00\+00:00\); its heartbeat is \d s old"):
        runlock.acquire(lock)
    plant(lock, OLD, host="node-b", pid=4242, slurm_job="777")
    taken_over(lock, capsys, "pid 4242 on host node-b, Slurm job 777")


def test_a_running_slurm_job_refuses_however_old_its_heartbeat(tmp_path, squeue):
    plant(tmp_path / ".lock", OLD, host="node-b", pid=4242, slurm_job="777")
    squeue(out="RUNNING\n")
    with pytest.raises(runlock.LockHeld, match="Slurm job 777 is RUNNING"):
        runlock.acquire(tmp_path / ".lock")
    assert squeue.calls.read_text().split() == ["-h", "-j", "777", "-o", "%T"]


def test_squeue_is_not_asked_about_a_job_of_another_cluster(tmp_path, squeue, monkeypatch):
    monkeypatch.setenv("SLURM_CLUSTER_NAME", "here")
    plant(tmp_path / ".lock", 5.0, host="node-b", pid=4242, slurm_job="777", slurm_cluster="there")
    squeue(err="slurm_load_jobs error: Invalid job id specified", rc=1)  # here, 777 is no job
    with pytest.raises(runlock.LockHeld, match="heartbeat is"):
        runlock.acquire(tmp_path / ".lock")
    assert not squeue.calls.exists()


def test_a_slurm_job_that_has_ended_is_taken_over_however_fresh_its_heartbeat(tmp_path, squeue, capsys):
    for answer in ({"err": "slurm_load_jobs error: Invalid job id specified", "rc": 1}, {"out": ""},
                   {"out": "PENDING\n"}):  # a requeued job: its process is gone
        plant(tmp_path / ".lock", 0.0, host="node-b", pid=4242, slurm_job="777")
        squeue(**answer)
        taken_over(tmp_path / ".lock", capsys, "pid 4242 on host node-b, Slurm job 777")


def test_a_record_of_this_very_job_step_is_an_earlier_incarnation(tmp_path, squeue, capsys, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "777")
    monkeypatch.setenv("SLURM_STEP_ID", "0")
    plant(tmp_path / ".lock", 0.0, host="node-b", pid=4242, slurm_job="777", slurm_step="0")
    squeue(out="RUNNING\n")  # of course: it is this job
    taken_over(tmp_path / ".lock", capsys, "pid 4242 on host node-b, Slurm job 777")
    assert not squeue.calls.exists()


def test_an_unreadable_record_refuses_while_young_and_is_taken_over_once_old(tmp_path, capsys):
    record = runlock.owner_record(tmp_path / ".lock")
    record.write_text("")  # created, not written yet
    with pytest.raises(runlock.LockHeld, match="being written"):
        runlock.acquire(tmp_path / ".lock")
    os.utime(record, (time.time() - OLD,) * 2)
    taken_over(tmp_path / ".lock", capsys, "an unreadable record")


def test_a_record_that_another_claimant_put_in_place_meanwhile_is_put_back_not_taken_over(tmp_path,
                                                                                          monkeypatch):
    lock, now = tmp_path / ".lock", runlock._now
    plant(lock, OLD, host="node-b", pid=4242)

    def racing(handle):  # while we judge node-b's record stale, node-c takes it over
        if not (tmp_path / "raced").exists():
            (tmp_path / "raced").touch()
            runlock.owner_record(lock).unlink()
            plant(lock, 0.0, host="node-c", pid=4343)
        return now(handle)

    monkeypatch.setattr(runlock, "_now", racing)
    with pytest.raises(runlock.LockHeld, match="pid 4343 on host node-c"):
        runlock.acquire(lock)
    assert json.loads(runlock.owner_record(lock).read_text())["host"] == "node-c"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".lock")) == [".lock",
                                                                                        ".lock.owner.json"]


# ----------------------------------------------------------------------------------------------------------
# The holder's side, and flock where it works


def test_the_record_names_the_holder_beats_and_a_clean_release_removes_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "31337")
    lock = runlock.acquire(tmp_path / "state" / ".lock", heartbeat_s=0.05)
    record = json.loads(lock.record.read_text())
    assert {k: record[k] for k in ("pid", "slurm_job")} == {"pid": os.getpid(), "slurm_job": "31337"}
    assert record["host"] and record["started"]
    os.utime(lock.record, (time.time() - OLD,) * 2)
    time.sleep(0.3)
    assert time.time() - lock.record.stat().st_mtime < 5  # the heartbeat thread touched it
    lock.release()
    lock.release()
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == [".lock"]


def test_the_holder_warns_when_its_record_was_taken_over_and_leaves_the_new_one(tmp_path, capsys):
    with runlock.acquire(tmp_path / ".lock", heartbeat_s=0.05) as lock:
        plant(tmp_path / ".lock", host="node-b", pid=4242)
        time.sleep(0.3)
    assert "now names pid 4242 on host node-b" in capsys.readouterr().err
    assert json.loads(lock.record.read_text())["host"] == "node-b"


def test_flocks_blocking_io_error_still_refuses(tmp_path):
    with open(tmp_path / ".lock", "a") as other, pytest.raises(runlock.LockHeld, match="no owner record"):
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a holder that writes no record
        runlock.acquire(tmp_path / ".lock")
    with held_elsewhere(tmp_path / ".lock") as holder, pytest.raises(runlock.LockHeld,
                                                                     match=f"held by pid {holder.pid} "):
        runlock.acquire(tmp_path / ".lock")
    assert not runlock.owner_record(tmp_path / ".lock").exists()


@pytest.mark.parametrize("code", [errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL])
def test_any_other_flock_error_falls_back_to_the_record_alone(tmp_path, monkeypatch, capsys, code):
    def failing(handle, op):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(runlock.fcntl, "flock", failing)
    with runlock.acquire(tmp_path / ".lock"):
        assert "flock is not available" in capsys.readouterr().err
        with pytest.raises(runlock.LockHeld, match=f"pid {os.getpid()} runs on this host"):
            runlock.acquire(tmp_path / ".lock")


def test_waiting_takes_the_lock_once_its_holder_releases_it(tmp_path):
    first = runlock.acquire(tmp_path / ".lock")
    threading.Timer(0.3, first.release).start()
    with runlock.acquire(tmp_path / ".lock", wait_s=10, heartbeat_s=0.1):
        pass
    with pytest.raises(runlock.LockHeld), runlock.acquire(tmp_path / ".lock"), \
            runlock.acquire(tmp_path / ".lock", wait_s=0.3, heartbeat_s=0.1):
        pass
