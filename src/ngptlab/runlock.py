"""One holder at a time of a run's training (or of a token directory's prepare), on any filesystem.

`fcntl.flock` is the best guard where it works: the kernel drops it when its holder dies. But on some
network filesystems (NFS without lockd, some Lustre, GPFS or BeeGFS mounts) it is node-local, so that two
nodes both get it, or it fails with OSError. So the holder also creates an owner record beside the lock
file, `<lock>.owner.json`, with O_CREAT | O_EXCL (atomic on NFSv3+ and cluster filesystems), naming its
host, pid and Slurm job; a daemon thread touches it every `heartbeat_s` seconds (NGPTLAB_LOCK_HEARTBEAT_S,
default 30; its mtime is the heartbeat), and a clean release removes it. Whoever finds a record refuses
while its holder is alive:

- on the same machine (host, boot and pid namespace), the pid decides: it exists, with the same start time;
- else, where the record names a Slurm job of the claimant's cluster and `squeue` answers, the job's
  state decides (RUNNING, COMPLETING, SUSPENDED, ...: alive; ended, unknown or requeued: stale); a record
  of the claimant's own job step is an earlier incarnation that has stopped (a torchrun restart);
- else the heartbeat decides: alive while younger than `stale_s` (three heartbeats), measured against the
  filesystem's own clock, so that clock skew between nodes does not count.

Otherwise the record is stale (a killed job, a dead node): it is renamed aside and created anew, and the
log says whose lock was taken over.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ngptlab.errors import NgptlabError

HEARTBEAT_ENV = "NGPTLAB_LOCK_HEARTBEAT_S"
DEFAULT_HEARTBEAT_S = 30.0
STALE_BEATS = 3
RECORD_FORMAT = "ngptlab.lock-owner/1"
SLURM_ALIVE = {"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "RESIZING"}
_CLAIM_TRIES = 5

_said_no_flock = False


class LockHeld(NgptlabError):
    """Another live process holds the lock; `holder` says who, as far as its owner record tells."""

    def __init__(self, path: Path, holder: str):
        super().__init__(f"{path} is held by {holder}")
        self.path, self.holder = path, holder


def owner_record(lock: Path) -> Path:
    return lock.with_name(lock.name + ".owner.json")


def heartbeat_interval() -> float:
    """Seconds between heartbeats: NGPTLAB_LOCK_HEARTBEAT_S, default 30."""
    return float(os.environ.get(HEARTBEAT_ENV) or DEFAULT_HEARTBEAT_S)


class RunLock:
    """A held lock: flock where the filesystem has it, and the owner record with its heartbeat thread."""

    def __init__(self, path: Path, handle, token: str, heartbeat_s: float):
        self.path, self.record, self._handle, self._token = path, owner_record(path), handle, token
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, args=(heartbeat_s,), daemon=True,
                                        name=f"heartbeat {path}")
        self._thread.start()

    def _beat(self, every: float) -> None:
        while not self._stop.wait(every):
            try:
                holder, raw, _ = _read(self.record)
                if raw is None:
                    return  # removed with the run's state directory (or being taken over)
                if holder is None or holder.get("token") != self._token:
                    whose = describe(holder) if holder else "another process (being written)"
                    _say(f"WARNING: {self.record} now names {whose}: this process's heartbeat was late and "
                         f"another process took the lock over; both may now be writing")
                    return
                os.utime(self.record)
            except FileNotFoundError:
                return
            except OSError:
                continue  # a network filesystem's hiccup: the next beat tries again

    def release(self) -> None:
        """Stop the heartbeat, remove the record if it is still ours, drop the flock. Idempotent."""
        if self._handle is None:
            return
        self._stop.set()
        self._thread.join(timeout=5)
        with contextlib.suppress(OSError):
            holder = _read(self.record)[0]
            if holder is not None and holder.get("token") == self._token:
                self.record.unlink()
        self._handle.close()
        self._handle = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def acquire(path: Path, *, heartbeat_s: float | None = None, wait_s: float = 0.0) -> RunLock:
    """Take the lock at `path` (creating its directory), or raise LockHeld naming the live holder; with
    `wait_s`, retry that long first."""
    heartbeat_s = heartbeat_s or heartbeat_interval()
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return _acquire_once(path, heartbeat_s)
        except LockHeld:
            if time.monotonic() >= deadline:
                raise
            time.sleep(min(0.5, heartbeat_s))


def _acquire_once(path: Path, heartbeat_s: float) -> RunLock:
    handle = open(path, "a")  # noqa: SIM115 (held until release)
    try:
        _flock(handle, path)
        token = _claim(path, handle, STALE_BEATS * heartbeat_s)
    except BaseException:
        handle.close()
        raise
    return RunLock(path, handle, token, heartbeat_s)


def _flock(handle, path: Path) -> None:
    global _said_no_flock
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _read(owner_record(path))[0]
        raise LockHeld(path, describe(holder) if holder else "another process (no owner record)") from None
    except OSError as err:  # ENOLCK, EOPNOTSUPP, ENOSYS, EINVAL: a filesystem without (working) flock
        if not _said_no_flock:
            _said_no_flock = True
            _say(f"flock is not available on the filesystem of {path} "
                 f"({errno.errorcode.get(err.errno, err.errno)}: {err.strerror}); the owner record "
                 f"{owner_record(path).name} beside it is the only guard against a second process")


def _claim(path: Path, handle, stale_s: float) -> str:
    """Create our owner record, taking over a stale one; return its token."""
    record = owner_record(path)
    mine = {**identity(), "token": uuid.uuid4().hex,
            "started": datetime.now(UTC).isoformat(timespec="seconds")}
    for _ in range(_CLAIM_TRIES):
        if _create(record, mine):
            return mine["token"]
        holder, raw, mtime = _read(record)
        if raw is None:
            continue  # removed meanwhile: try to create it again
        age = _now(handle) - mtime
        alive = _alive(holder, age, stale_s)
        if alive:
            raise LockHeld(path, f"{describe(holder)}; {alive}" if holder else
                           f"a process whose owner record {record} is being written ({age:.0f} s old)")
        aside = record.with_name(f"{record.name}.stale-{mine['token']}")
        try:
            os.rename(record, aside)
        except FileNotFoundError:
            continue  # another claimant took it over first
        if _read(aside)[1] != raw:  # what we moved is newer than what we judged: put it back
            try:
                os.link(aside, record)  # fails where a record was created meanwhile, unlike a rename
            except FileExistsError:
                pass
            except OSError:  # a filesystem without hard links
                os.rename(aside, record)
            aside.unlink(missing_ok=True)
            continue
        aside.unlink(missing_ok=True)
        _say(f"took over the stale lock {path} of {describe(holder) if holder else 'an unreadable record'} "
             f"(heartbeat {age:.0f} s old)")
    raise LockHeld(path, f"others claiming {record} at the same time")


def _create(record: Path, content: dict) -> bool:
    try:
        fd = os.open(record, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as out:
        out.write(json.dumps(content) + "\n")
    return True


def _read(record: Path) -> tuple[dict | None, bytes | None, float]:
    """The record (None where unreadable, e.g. being written), its bytes (None: no record), its mtime."""
    try:
        with open(record, "rb") as f:
            raw, mtime = f.read(), os.fstat(f.fileno()).st_mtime
    except FileNotFoundError:
        return None, None, 0.0
    try:
        holder = json.loads(raw)
    except ValueError:
        return None, raw, mtime
    return (holder if isinstance(holder, dict) else None), raw, mtime


def _now(handle) -> float:
    """The filesystem's clock: the mtime of the lock file once touched (a record's mtime is on that clock)."""
    try:
        os.utime(handle.fileno())
        return os.fstat(handle.fileno()).st_mtime
    except OSError:
        return time.time()


def _alive(holder: dict | None, age: float, stale_s: float) -> str | None:
    """Why the record's holder counts as alive, or None where it is stale."""
    if holder is None:  # unreadable: only a record being written right now is young
        return "its record is being written" if age < stale_s else None
    me = identity()
    if all(holder.get(k) == me[k] for k in ("host", "boot_id", "pid_ns")):
        pid, start = holder.get("pid"), holder.get("pid_start")
        return f"pid {pid} runs on this host" if isinstance(pid, int) and _pid_alive(pid, start) else None
    job = holder.get("slurm_job")
    if job:
        if job == me["slurm_job"] and holder.get("slurm_step") == me["slurm_step"]:
            return None  # an earlier incarnation in this very job step, stopped before this one started
        # squeue speaks for its own cluster only; our own job is running, which says nothing of the holder
        if job != me["slurm_job"] and holder.get("slurm_cluster") == me["slurm_cluster"]:
            state = slurm_state(str(job))
            if state is not None:
                return f"Slurm job {job} is {state}" if state in SLURM_ALIVE else None
    return f"its heartbeat is {age:.0f} s old (stale after {stale_s:.0f} s)" if age < stale_s else None


def slurm_state(job: str) -> str | None:
    """The job's state per `squeue`; "GONE" where Slurm no longer knows it; None where squeue cannot say."""
    squeue = shutil.which("squeue")
    if squeue is None:
        return None
    try:
        out = subprocess.run([squeue, "-h", "-j", job, "-o", "%T"], capture_output=True, text=True,
                             timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return "GONE" if "invalid job id" in out.stderr.lower() else None
    return (out.stdout.split() or ["GONE"])[0]


def identity() -> dict[str, Any]:
    """Who this process is, for its owner record and for comparing against another's."""
    pid = os.getpid()
    return {"format": RECORD_FORMAT, "host": socket.gethostname(), "pid": pid, "pid_start": _pid_start(pid),
            "boot_id": _read_text("/proc/sys/kernel/random/boot_id"), "pid_ns": _pid_ns(),
            "slurm_job": os.environ.get("SLURM_JOB_ID"), "slurm_step": os.environ.get("SLURM_STEP_ID"),
            "slurm_cluster": os.environ.get("SLURM_CLUSTER_NAME")}


def describe(holder: dict) -> str:
    job = f", Slurm job {holder['slurm_job']}" if holder.get("slurm_job") else ""
    return (f"pid {holder.get('pid')} on host {holder.get('host')}{job} "
            f"(since {holder.get('started', '?')})")


def _pid_alive(pid: int, start: int | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    stat = _proc_stat(pid)
    if stat is None:
        return True  # no /proc to say more
    state, started = stat
    # a zombie has let go of everything; the same pid with another start time reused the number
    return state != "Z" and (start is None or started == start)


def _pid_start(pid: int) -> int | None:
    stat = _proc_stat(pid)
    return stat[1] if stat else None


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """The process's state letter and start time (clock ticks since boot), from Linux's /proc."""
    stat = _read_text(f"/proc/{pid}/stat")
    if stat is None:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # the command name in parentheses may hold spaces
    return fields[0], int(fields[19])


def _pid_ns() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _read_text(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _say(line: str) -> None:
    print(f"ngptlab: {line}", file=sys.stderr, flush=True)
