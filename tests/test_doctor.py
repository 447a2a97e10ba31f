"""`ngptlab doctor` on this CPU: one line per fact (torch and its build, Python, GPUs, packages, MFU's
peak, the SDPA kernel at every preset's shapes), exit 0 here; a dependency that does not import, or whose
version is outside the declared one, is named with the pip commands that carry it, and exits 1; it starts
where jsonschema (the params validation's) is missing. The version reading it compares with. Seconds, but
the real import of every dependency takes some."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from ngptlab.cli import main
from ngptlab.doctor import command, packages
from ngptlab.doctor.packages import Requirement
from ngptlab.train import dist

REPO = Path(__file__).resolve().parents[1]


def doctor(capsys, *argv: str) -> tuple[int, list[str]]:
    code = main(["doctor", *argv])
    return code, capsys.readouterr().out.splitlines()


def labelled(lines: list[str], label: str) -> list[str]:
    return [line[10:] for line in lines if line.split(" ", 1)[0] == label and line[:10].rstrip() == label]


@pytest.fixture
def imports_fake(monkeypatch):
    """Imports that pass at once (the real ones of every dependency take seconds), except those named."""
    failing: dict[str, Exception] = {}

    def fake(module: str) -> object:
        if module in failing:
            raise failing[module]
        return sys.modules.get(module)

    monkeypatch.setattr(packages, "import_dependency", fake)
    return failing


def test_the_doctor_prints_every_fact_and_exits_0_where_all_is_there(capsys):
    code, lines = doctor(capsys, "--params", str(REPO / "params.yaml"))
    assert code == 0, lines
    assert labelled(lines, "torch") == [f"{torch.__version__}, build cpu; declared >=2.11"]
    assert labelled(lines, "python")[0].startswith(f"{platform.python_version()} ({sys.executable}); "
                                                   "declared >=3.11,<3.13")
    assert labelled(lines, "gpu") == ["none (torch sees no CUDA device)"]
    assert labelled(lines, "packages") == [f"all 20 dependencies import ({REPO / 'pyproject.toml'})"]
    assert labelled(lines, "peak") == ["none: unknown (cpu); declare train.peak_tflops for an MFU"]
    assert not labelled(lines, "missing") and not labelled(lines, "version")
    sdpa = lines[lines.index(next(line for line in lines if line.startswith("sdpa"))):]
    assert sdpa[0] == "sdpa      on the CPU (no GPU: CPU kernels only), float32, causal, as a run calls it:"
    # every preset's (scale, context) once, with the presets that train there, and the params file's own
    expected = set()
    for preset in [*sorted((REPO / "workflow" / "presets").glob("*.yaml")), REPO / "params.yaml"]:
        train = yaml.safe_load(preset.read_text())["train"]
        expected |= {(scale, context) for scale in train["scales"] for context in train["contexts"]}
    rows = sdpa[1:]
    assert len(rows) == len(expected)
    assert any("gpu-small at 1024 tokens (12 heads of 64): " in row and row.endswith("[first-light, small]")
               for row in rows)
    assert any("1B at 8192 tokens (20 heads of 64): " in row and row.endswith("[paper]") for row in rows)
    assert any("cpu-4l at 128 tokens (4 heads of 16): " in row and row.endswith("[params]") for row in rows)
    assert all(row.split(": ")[1].split(" [")[0] in ("flash", "math") for row in rows)  # a CPU's two kernels


def test_a_dependency_that_does_not_import_is_named_with_the_wheels_to_carry(capsys, imports_fake):
    imports_fake["jsonschema"] = ModuleNotFoundError("No module named 'rpds'")
    code, lines = doctor(capsys)
    assert code == 1
    assert labelled(lines, "missing") == [
        "jsonschema: does not import (ModuleNotFoundError: No module named 'rpds')"]
    carry = labelled(lines, "carry")[0]
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert carry.startswith("on a machine with network: pip download --only-binary=:all: --python-version "
                            f"{python} --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64")
    assert carry.endswith(" -d wheels/ jsonschema")
    assert lines[lines.index(next(line for line in lines if line.startswith("carry"))) + 1].strip() == (
        "then, with wheels/ copied here: pip install --no-index --find-links wheels/ jsonschema")
    assert lines[-1] == "ngptlab doctor: 1 problem: jsonschema"
    assert not labelled(lines, "packages")


def test_a_version_outside_the_declared_one_is_a_problem_too(capsys, imports_fake, monkeypatch):
    declared = packages.declared()
    monkeypatch.setattr(packages, "declared", lambda: packages.Declared(
        [Requirement("torch", ">=99"), *declared.requirements[1:]], ">=3.0,<3.1", declared.source))
    code, lines = doctor(capsys)
    assert code == 1
    assert labelled(lines, "version") == [f"torch: {torch.__version__} installed, declared >=99"]
    assert labelled(lines, "python")[0].endswith("declared >=3.0,<3.1: OUTSIDE the range")
    assert "'torch>=99'" in labelled(lines, "carry")[0]
    assert lines[-1] == f"ngptlab doctor: 2 problems: python {platform.python_version()}, torch"


def test_the_doctor_starts_where_jsonschema_does_not_import(tmp_path):
    """A `jsonschema` that fails to import, first on the path: the command line still starts, the doctor
    names it and exits 1 (the other verbs' params validation would fail at its import)."""
    (tmp_path / "jsonschema.py").write_text("raise ImportError('jsonschema stands missing here')\n")
    code = ("import sys; from ngptlab.doctor import packages; real = packages.import_dependency; "
            "packages.import_dependency = lambda module: real(module) if module == 'jsonschema' else None; "
            "from ngptlab.cli import main; sys.exit(main(['doctor']))")  # the others: fast stand-ins
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO / 'src'}"}
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 1, result.stderr
    assert ("missing   jsonschema: does not import (ImportError: jsonschema stands missing here)"
            in result.stdout.splitlines())
    assert result.stdout.splitlines()[-1] == "ngptlab doctor: 1 problem: jsonschema"


@pytest.mark.parametrize(("version", "specifier", "meets"), [
    ("2.11.0+cu130", ">=2.11", True), ("2.10.1", ">=2.11", False), ("2.13.0+cpu", ">=2.11", True),
    ("2.14.0.dev20260101", ">=2.11,<2.14", False), ("2.11", "==2.11.0", True), ("0.4.12", "==0.4.13", False),
    ("3.12.1", ">=3.11,<3.13", True), ("3.13.0", ">=3.11,<3.13", False), ("1.0", "", True)])
def test_versions_are_read_as_pep_440_reads_these_operators(version, specifier, meets):
    assert packages.satisfies(version, specifier) is meets


def test_an_operator_the_reading_does_not_know_is_an_error():
    with pytest.raises(ValueError, match="~=2.11"):
        packages.satisfies("2.11", "~=2.11")


def test_declared_requirements_read_names_specifiers_and_leave_out_extras():
    assert packages.parse_requirement("lm-eval==0.4.13") == Requirement("lm-eval", "==0.4.13")
    assert packages.parse_requirement("torch >= 2.11") == Requirement("torch", ">=2.11")
    assert packages.parse_requirement("pytest; extra == 'test'") is None
    assert [r.module for r in map(packages.parse_requirement, ("pyyaml", "dvc-ssh", "lm-eval"))] == [
        "yaml", "dvc_ssh", "lm_eval"]
    names = [r.name for r in packages.declared().requirements]
    assert names[0] == "torch" and "jsonschema" in names and "pytest" not in names


@pytest.mark.parametrize(("glibc", "minors"), [
    ("2.36", [17, 24, 27, 28, 31, 34, 36]), ("2.28", [17, 24, 27, 28]), ("2.17", [17])])
def test_the_wheels_are_asked_for_every_manylinux_tag_up_to_this_glibc(monkeypatch, glibc, minors):
    """pip download takes exactly the platform tags it is given (and the legacy manylinux2014's older ones):
    an older glibc's wheels (rpds-py's are manylinux_2_17) must be named beside the newest."""
    monkeypatch.setattr(packages.platform, "libc_ver", lambda: ("glibc", glibc))
    monkeypatch.setattr(packages.platform, "machine", lambda: "x86_64")
    assert packages.target_platforms() == ["manylinux2014_x86_64",
                                           *(f"manylinux_2_{minor}_x86_64" for minor in minors)]


def test_the_presets_the_doctor_reads_are_the_repositorys():
    assert command.PRESETS == REPO / "workflow" / "presets" and len(list(command.PRESETS.glob("*.yaml"))) >= 5


def test_the_nccl_line_names_the_collective_settings_that_are_set_and_the_network_keys_that_are_not(
        capsys, monkeypatch):
    for key in [k for k in os.environ if k.startswith(("NCCL_", "TORCH_NCCL_", "GLOO_"))]:
        monkeypatch.delenv(key)
    _, lines = doctor(capsys, "--params", str(REPO / "params.yaml"))
    [unset] = labelled(lines, "nccl")
    assert unset.startswith("no NCCL_*/TORCH_NCCL_*/GLOO_* set; NCCL_SOCKET_IFNAME and NCCL_IB_HCA unset: "
                            "NCCL chooses by itself")
    names = [name for _, name in socket.if_nameindex()]
    assert unset.endswith(f" (interfaces here: {', '.join(names)})") and "lo" in names

    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "=eth0")
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "eth0")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    _, lines = doctor(capsys, "--params", str(REPO / "params.yaml"))
    [line] = labelled(lines, "nccl")
    assert line.startswith("GLOO_SOCKET_IFNAME=eth0 NCCL_DEBUG=INFO NCCL_SOCKET_IFNAME==eth0; "
                           "NCCL_IB_HCA unset: NCCL chooses by itself (interfaces here: ")

    monkeypatch.setenv("NCCL_IB_HCA", "mlx5_0,mlx5_1")
    _, lines = doctor(capsys, "--params", str(REPO / "params.yaml"))
    assert labelled(lines, "nccl")[0].startswith(
        "GLOO_SOCKET_IFNAME=eth0 NCCL_DEBUG=INFO NCCL_IB_HCA=mlx5_0,mlx5_1 NCCL_SOCKET_IFNAME==eth0 "
        "(interfaces")


def test_each_rank_s_log_line_ends_with_the_collective_settings(monkeypatch):
    topology = dist.Topology(rank=0, world_size=1, local_rank=0, device=torch.device("cpu"))
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "ib0")
    monkeypatch.setenv("NCCL_IB_HCA", "mlx5_0")
    assert dist.visibility(topology).endswith(", on cpu; NCCL_IB_HCA=mlx5_0 NCCL_SOCKET_IFNAME=ib0")
