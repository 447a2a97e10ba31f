"""Support for tests/test_runlock.py: a real filesystem on which flock fails, and a second process holding a
lock.

The filesystem is a passthrough FUSE filesystem (mfusepy over libfuse 3) whose flock and POSIX-lock
operations answer ENOLCK, as NFS without lockd does. The kernel forwards flock to a FUSE filesystem only
when the filesystem implements it (libfuse then asks for FUSE_FLOCK_LOCKS), so `fcntl.flock` on a file in
the mount really raises OSError; `mounted` checks that before handing the mount out.

    python tests/support/lock.py serve BACKING MOUNTPOINT     serves the filesystem until unmounted
    python tests/support/lock.py hold LOCK HEARTBEAT_S        holds runlock's lock until stdin closes
"""

from __future__ import annotations

import contextlib
import ctypes.util
import errno
import fcntl
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve()
SRC = HERE.parents[2] / "src"
INSTALL = "apt-get install fuse3 (libfuse3 and fusermount3), pip install mfusepy"


def fuse_missing() -> str | None:
    """Why no FUSE filesystem can be mounted here, or None."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse on this machine"
    if importlib.util.find_spec("mfusepy") is None:
        return f"mfusepy is not installed ({INSTALL})"
    if not (ctypes.util.find_library("fuse3") or ctypes.util.find_library("fuse")):
        return f"libfuse is not installed ({INSTALL})"
    if os.geteuid() != 0 and not shutil.which("fusermount3"):
        return f"fusermount3 is missing, needed to mount without root ({INSTALL})"
    return None


@contextlib.contextmanager
def mounted(base: Path) -> Iterator[Path]:
    """A mount of the no-lock filesystem over `base`/backing at `base`/mnt; skips where it cannot mount."""
    import pytest

    backing, mount = base / "backing", base / "mnt"
    backing.mkdir(parents=True)
    mount.mkdir()
    log = base / "fuse.log"
    with open(log, "w") as out:
        server = subprocess.Popen([sys.executable, str(HERE), "serve", str(backing), str(mount)],
                                  stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 15
        while not os.path.ismount(mount):
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.skip(f"the FUSE filesystem could not be mounted: {log.read_text()[-500:]}")
            time.sleep(0.05)
        with open(mount / ".probe", "w") as probe:
            try:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                assert err.errno == errno.ENOLCK, err
            else:
                pytest.fail("flock succeeded on the no-lock FUSE filesystem: the kernel did not forward it")
        (mount / ".probe").unlink()
        yield mount
    finally:
        unmount, lazy = (["umount"], "-l") if os.geteuid() == 0 else (["fusermount3", "-u"], "-z")
        if subprocess.run([*unmount, str(mount)], capture_output=True, check=False).returncode != 0:
            # busy: a failed test left a file open in it; detach it now, the kernel ends it when closed
            subprocess.run([*unmount, lazy, str(mount)], capture_output=True, check=False)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@contextlib.contextmanager
def held_elsewhere(lock: Path, heartbeat_s: float = 0.2) -> Iterator[subprocess.Popen]:
    """runlock's lock at `lock`, held by another process until the block ends."""
    path = os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))
    holder = subprocess.Popen([sys.executable, str(HERE), "hold", str(lock), str(heartbeat_s)],
                              env={**os.environ, "PYTHONPATH": path}, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = holder.stdout.readline()
        assert line.strip() == "held", f"the holder did not take the lock: {line}{holder.stderr.read()}"
        yield holder
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)


def _hold(lock: str, heartbeat_s: str) -> None:
    from ngptlab import runlock

    with runlock.acquire(Path(lock), heartbeat_s=float(heartbeat_s)):
        print("held", flush=True)
        sys.stdin.read()  # until the test closes our stdin


def _serve(backing: str, mount: str) -> None:
    import mfusepy as fuse

    utime_now, utime_omit = (1 << 30) - 1, (1 << 30) - 2  # the kernel's special tv_nsec values

    class NoLock(fuse.Operations):
        """Everything passes through to `backing`, except locks: ENOLCK, as NFS without lockd."""

        use_ns = True

        def __init__(self, root: str):
            self.root = root

        def _p(self, path: str) -> str:
            return os.path.join(self.root, path.lstrip("/"))

        def getattr(self, path, fh=None):
            st = os.lstat(self._p(path))
            return {"st_mode": st.st_mode, "st_nlink": st.st_nlink, "st_uid": st.st_uid, "st_gid": st.st_gid,
                    "st_size": st.st_size, "st_atime": st.st_atime_ns, "st_mtime": st.st_mtime_ns,
                    "st_ctime": st.st_ctime_ns}

        def readdir(self, path, fh):
            return [".", "..", *os.listdir(self._p(path))]

        def mkdir(self, path, mode):
            os.mkdir(self._p(path), mode)

        def rmdir(self, path):
            os.rmdir(self._p(path))

        def unlink(self, path):
            os.unlink(self._p(path))

        def rename(self, old, new):
            os.rename(self._p(old), self._p(new))

        def link(self, target, source):
            os.link(self._p(source), self._p(target))

        def chmod(self, path, mode):
            os.chmod(self._p(path), mode)

        def create(self, path, mode, flags=os.O_WRONLY):
            return os.open(self._p(path), flags | os.O_CREAT, mode)

        def open(self, path, flags):
            return os.open(self._p(path), flags)

        def read(self, path, size, offset, fh):
            return os.pread(fh, size, offset)

        def write(self, path, data, offset, fh):
            return os.pwrite(fh, data, offset)

        def truncate(self, path, length, fh=None):
            os.truncate(self._p(path), length)

        def flush(self, path, fh):
            return 0

        def fsync(self, path, datasync, fh):
            os.fsync(fh)

        def release(self, path, fh):
            os.close(fh)

        def utimens(self, path, times=None):
            st, now = os.lstat(self._p(path)), time.time_ns()
            atime, mtime = times or (utime_now, utime_now)
            pick = {utime_now: lambda cur: now, utime_omit: lambda cur: cur}
            os.utime(self._p(path), ns=(pick.get(atime, lambda cur: atime)(st.st_atime_ns),
                                        pick.get(mtime, lambda cur: mtime)(st.st_mtime_ns)))

        def statfs(self, path):
            st = os.statvfs(self._p(path))
            return {k: getattr(st, k) for k in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail",
                                                 "f_files", "f_ffree", "f_favail", "f_namemax")}

        def flock(self, path, fh, op):
            return -errno.ENOLCK

        def lock(self, path, fh, cmd, lock):
            return -errno.ENOLCK

    fuse.FUSE(NoLock(os.path.abspath(backing)), mount, foreground=True, attr_timeout=0, entry_timeout=0)


if __name__ == "__main__":
    {"serve": _serve, "hold": _hold}[sys.argv[1]](*sys.argv[2:])
