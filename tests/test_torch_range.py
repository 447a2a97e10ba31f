"""The arguments that differ across the supported torch versions are chosen by what the installed torch
accepts: DDP's no-buffer-sync keyword (forward_sync_buffers on torch 2.13, broadcast_buffers on 2.11) and
torchrun's --shutdown-timeout (2.13 has it, 2.11 has not), each shown against a stand-in for the other
torch, and through launch.sh with a stand-in torchrun that records what it was given. Seconds."""

from __future__ import annotations

import argparse
import os
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
import torch.distributed as td

from ngptlab.train import dist, torchrun_args

LAUNCH = Path(__file__).resolve().parents[1] / "workflow" / "scripts" / "launch.sh"


class Recorder:
    """A DDP stand-in with a given __init__: records the keywords dist.ddp passes."""

    given: dict = {}

    def __init__(self, module, **kwargs):
        type(self).given = kwargs


class Torch211DDP(Recorder):
    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 init_sync=True, process_group=None, bucket_cap_mb=None, find_unused_parameters=False,
                 check_reduction=False, gradient_as_bucket_view=False, static_graph=False):
        super().__init__(module, device_ids=device_ids, bucket_cap_mb=bucket_cap_mb,
                         gradient_as_bucket_view=gradient_as_bucket_view, broadcast_buffers=broadcast_buffers)


class Torch213DDP(Recorder):
    def __init__(self, module, device_ids=None, broadcast_buffers=None, bucket_cap_mb=None,
                 gradient_as_bucket_view=False, forward_sync_buffers=None):
        super().__init__(module, device_ids=device_ids, bucket_cap_mb=bucket_cap_mb,
                         gradient_as_bucket_view=gradient_as_bucket_view, broadcast_buffers=broadcast_buffers,
                         forward_sync_buffers=forward_sync_buffers)


CPU = dist.Topology(0, 2, 0, torch.device("cpu"))


@pytest.mark.parametrize(("ddp", "keyword", "unset"), [
    (Torch211DDP, "broadcast_buffers", None), (Torch213DDP, "forward_sync_buffers", "broadcast_buffers")])
def test_ddp_turns_buffer_sync_off_in_the_spelling_its_torch_accepts(monkeypatch, ddp, keyword, unset):
    monkeypatch.setattr(dist, "DistributedDataParallel", ddp)
    dist.ddp(torch.nn.Linear(4, 4), CPU, 100)
    assert ddp.given[keyword] is False
    assert ddp.given["gradient_as_bucket_view"] is True and ddp.given["bucket_cap_mb"] == 25
    if unset:  # the deprecated name is left out where the new one is taken
        assert ddp.given[unset] is None


def test_the_real_ddp_takes_the_keyword_without_a_deprecation_warning(tmp_path):
    """torch 2.13 warns on every DDP built with broadcast_buffers; the chosen spelling never warns, and the
    forward sync is off on this torch whichever spelling it took (broadcast_buffers reads it on both)."""
    td.init_process_group("gloo", store=td.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)
            model = dist.ddp(torch.nn.Linear(4, 4), dist.Topology(0, 1, 0, torch.device("cpu")), 100)
        assert model.broadcast_buffers is False
    finally:
        td.destroy_process_group()


def torch211_parser() -> argparse.ArgumentParser:
    """torchrun's parser as torch 2.11 has it, as far as launch.sh uses it: no --shutdown-timeout."""
    parser = argparse.ArgumentParser()
    for option in ("--standalone", "--nnodes", "--nproc-per-node", "--nproc_per_node", "--max-restarts",
                   "--rdzv-backend", "--rdzv_backend", "--rdzv-endpoint", "--rdzv_endpoint", "--rdzv-id",
                   "--rdzv_id"):
        parser.add_argument(option)
    return parser


def test_torchrun_args_drops_an_option_this_torchrun_lacks_and_says_so(capsys):
    assert torchrun_args.main(["--shutdown-timeout", "120", "--max-restarts", "3"],
                              parser=torch211_parser()) == 0
    out, err = capsys.readouterr()
    assert out == "--max-restarts 3\n"
    assert f"torchrun of torch {torch.__version__} has no --shutdown-timeout: its own default applies" in err


def test_torchrun_args_keeps_an_option_exactly_where_the_installed_torchrun_parses_it(capsys):
    from torch.distributed.run import get_args_parser

    try:
        get_args_parser().parse_args(["--shutdown-timeout", "7", "script.py"])
        parses = True
    except SystemExit:  # argparse's exit on an unknown option
        parses = False
    capsys.readouterr()
    assert torchrun_args.main(["--shutdown-timeout", "7"]) == 0
    out, err = capsys.readouterr()
    assert out == ("--shutdown-timeout 7\n" if parses else "\n")
    assert ("--shutdown-timeout" in err) is not parses


@pytest.mark.parametrize("argv", [["--shutdown-timeout"], ["--shutdown-timeout", "1 2"]])
def test_torchrun_args_refuses_what_launch_sh_could_not_split_back(argv, capsys):
    assert torchrun_args.main(argv, parser=torch211_parser()) == 2
    assert "usage: python -m ngptlab.train.torchrun_args" in capsys.readouterr().err


def executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def fake_bin(tmp_path):
    """A torchrun that records its arguments and exits 0, first on PATH, beside this test's Python."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    executable(bin_dir / "torchrun", f'#!/bin/sh\necho "$@" > {tmp_path / "torchrun.args"}\n')
    executable(bin_dir / "python", f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    return bin_dir


def launched(tmp_path: Path, bin_dir: Path, *endpoint: str) -> list[str]:
    """torchrun's arguments as launch.sh gives them, for 2 processes on one node (or one node's agent of 2
    at `endpoint`)."""
    src = str(Path(torchrun_args.__file__).parents[2])  # this checkout's, for the helper launch.sh runs
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    env = {**os.environ, "NGPTLAB_SHUTDOWN_TIMEOUT": "7", "PATH": path,
           "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))}
    if endpoint:
        env.update(NGPTLAB_RDZV_ENDPOINT=endpoint[0])
    nodes = "2" if endpoint else "1"
    result = subprocess.run(["bash", str(LAUNCH), nodes, "2", "3", "train", "RUN"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return (tmp_path / "torchrun.args").read_text().split()


@pytest.mark.parametrize("endpoint", [(), ("127.0.0.1:29400",)], ids=["one-node", "agent-of-two"])
def test_launch_passes_the_shutdown_timeout_to_a_torchrun_that_has_it(tmp_path, fake_bin, endpoint):
    from torch.distributed.run import get_args_parser

    args = launched(tmp_path, fake_bin, *endpoint)
    has = "--shutdown-timeout" in get_args_parser()._option_string_actions
    assert ("--shutdown-timeout" in args) is has
    if has:
        assert args[args.index("--shutdown-timeout") + 1] == "7"
    assert args[args.index("--max-restarts") + 1] == "3"
    assert args[-4:] == ["-m", "ngptlab.cli", "train", "RUN"]


def test_launch_leaves_the_shutdown_timeout_out_for_a_torchrun_without_it(tmp_path, fake_bin):
    # a Python whose torchrun parser is torch 2.11's, for the helper launch.sh asks
    executable(fake_bin / "python", f"""#!/bin/sh
shift 2  # -m ngptlab.train.torchrun_args
exec {sys.executable} -c 'import sys; sys.path.insert(0, "{Path(__file__).parent}")
from test_torch_range import torch211_parser
from ngptlab.train import torchrun_args
sys.exit(torchrun_args.main(parser=torch211_parser()))' "$@"
""")
    args = launched(tmp_path, fake_bin)
    assert "--shutdown-timeout" not in args
    assert args == ["--standalone", "--nproc_per_node", "2", "--max-restarts", "3", "-m", "ngptlab.cli",
                    "train", "RUN"]
