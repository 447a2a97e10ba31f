"""The rendezvous port of a run over several nodes (workflow/scripts/rdzv_port.sh, called by launch.sh):
derived from the Slurm job id and below the kernel's ephemeral port range, where no outgoing connection can
hold it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from support.workflow import REPO, SLURM_MARKS, run

PORT = REPO / "workflow" / "scripts" / "rdzv_port.sh"
LAUNCH = REPO / "workflow" / "scripts" / "launch.sh"
RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def port(job: int | str, *range_file: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(PORT), str(job), *map(str, range_file)], capture_output=True,
                          text=True, timeout=30)


def range_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ip_local_port_range"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("ranges", "low", "high"), [
    ("32768\t60999\n", 20000, 32768),  # Linux's default
    ("49152 65535\n", 20000, 49152),  # IANA's dynamic ports
    ("15000 60999\n", 1024, 15000),  # too few ports above 20000
])
def test_the_port_is_below_the_ephemeral_range_and_differs_between_neighbouring_jobs(tmp_path, ranges, low,
                                                                                     high):
    path = range_file(tmp_path, ranges)
    jobs = range(1_234_560, 1_234_580)
    ports = [int(port(job, path).stdout) for job in jobs]
    assert all(low <= p < high for p in ports)
    assert len(set(ports)) == len(ports)
    # the old formula, 20000 + id % 20000, put this job's port at 35000: inside Linux's default range
    assert int(port(15000, range_file(tmp_path, "32768 60999")).stdout) == 20000 + 15000 % 12768


@pytest.mark.skipif(not RANGE.exists(), reason="no /proc ephemeral range on this machine")
def test_the_port_read_from_this_machine_is_below_its_ephemeral_range():
    ephemeral = int(RANGE.read_text().split()[0])
    assert all(int(port(job).stdout) < ephemeral for job in (0, 12_767, 12_768, 99_999, 7_654_321))


def test_without_the_range_file_it_keeps_below_linux_s_default(tmp_path):
    assert int(port(40_000, tmp_path / "absent").stdout) == 20000 + 40_000 % 12768


@pytest.mark.parametrize(("args", "message"), [
    (["x1"], "usage"),
    (["12", "RANGE:abc 60999"], "does not start with a port number"),
    (["12", "RANGE:2048 60999"], "too low to keep a rendezvous port below it"),
])
def test_bad_input_is_refused_with_what_is_wrong(tmp_path, args, message):
    args = [str(range_file(tmp_path, a.removeprefix("RANGE:"))) if a.startswith("RANGE:") else a
            for a in args]
    result = subprocess.run(["bash", str(PORT), *args], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and message in result.stderr and result.stdout == ""


def on_slurm(test):
    for mark in SLURM_MARKS:
        test = mark(test)
    return test


@on_slurm
@pytest.mark.skipif(not RANGE.exists(), reason="no /proc ephemeral range on this machine")
def test_launch_over_two_slurm_nodes_meets_at_a_port_below_the_ephemeral_range(tmp_path):
    # the run itself fails at once (no params file): the rendezvous is announced before the agents start
    result = run(["salloc", "--partition", "multi", "--nodes", "2", "--time", "3", "--mem", "100", "bash",
                  str(LAUNCH), "2", "1", "0", "train", "--params", "missing.yaml", "some-run"], tmp_path,
                 check=False)
    [endpoint] = re.findall(r"rendezvous at \S+ \((\S+)\)", result.stderr)
    assert int(endpoint.rsplit(":", 1)[1]) < int(RANGE.read_text().split()[0]), result.stderr[-3000:]
