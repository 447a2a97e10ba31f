"""ngptlab.train.restore: rank 0 alone reads where a job starts and broadcasts it; every rank checks the step.

The end-to-end resume over two processes is in tests/test_dist_nodes.py; here two gloo processes call
restore() directly (rank 1's read would fail if called), and the step check gets planted steps.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed as torch_dist
import torch.multiprocessing as mp

from ngptlab.errors import CheckpointError
from ngptlab.train.dist import Topology
from ngptlab.train.progress import Progress
from ngptlab.train.restore import Start, check_same_step, restore


def test_the_step_check_passes_when_every_rank_agrees():
    assert check_same_step([40, 40, 40]) == 40
    assert check_same_step([0]) == 0


def test_the_step_check_names_the_ranks_and_steps_that_differ():
    with pytest.raises(CheckpointError, match=r"the 4 ranks would start at different steps \(step 0: rank 2; "
                                              r"step 40: ranks 0, 1, 3\); every rank must resume from the "
                                              r"same checkpoint"):
        check_same_step([40, 40, 0, 40])
    with pytest.raises(CheckpointError, match=r"\(step 8: ranks 0, 1, 2, 3, 4, 5, 6, 7 and 2 more; "
                                              r"step 16: rank 10\)"):
        check_same_step([8] * 10 + [16])


def model_and_optimizer(seed: int) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def rank_main(rank: int, store_path: str, out: str) -> None:
    torch_dist.init_process_group("gloo", store=torch_dist.FileStore(store_path, 2), rank=rank, world_size=2)
    topo = Topology(rank, 2, rank, torch.device("cpu"))
    model, optimizer = model_and_optimizer(seed=rank)  # different weights on each rank until the broadcast

    def read() -> Start:  # what rank 0 finds in its checkpoint: two steps' moments, its RNG
        assert rank == 0, "only rank 0 reads"
        for _ in range(2):
            model(torch.ones(1, 4)).sum().backward()
            optimizer.step()
        torch.manual_seed(7)
        return Start(Progress(step=2, metrics_rows=2), Path("state"), loaded=True)

    def unreadable() -> Start:
        raise CheckpointError("x.safetensors: corrupt")

    start = restore(topo, model, optimizer, read)
    failed = None
    try:
        restore(topo, model, optimizer, unreadable)
    except CheckpointError as err:
        failed = str(err)
    torch.save({"progress": start.progress.to_dict(), "weights": model.state_dict(), "rng": torch.rand(3),
                "failed": failed, "optimizer": optimizer.state_dict()["state"]}, f"{out}/rank{rank}.pt")
    torch_dist.destroy_process_group()


def test_rank_0_reads_and_every_rank_gets_its_weights_moments_and_rng(tmp_path):
    mp.spawn(rank_main, args=(str(tmp_path / "store"), str(tmp_path)), nprocs=2)
    zero, one = (torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in (0, 1))
    assert one["progress"] == zero["progress"] == Progress(step=2, metrics_rows=2).to_dict()
    for name in zero["weights"]:
        assert torch.equal(one["weights"][name], zero["weights"][name]), name
    assert zero["optimizer"].keys() == one["optimizer"].keys() == {0, 1, 2, 3}
    for index, state in zero["optimizer"].items():
        for key, value in state.items():
            got = one["optimizer"][index][key]
            assert got.device == value.device and got.dtype == value.dtype and torch.equal(got, value), key
    assert torch.equal(one["rng"], zero["rng"])
    # rank 0 cannot read: it raises its own error, and the other rank does not wait forever or start alone
    assert zero["failed"] == "x.safetensors: corrupt"
    assert one["failed"] == ("rank 0 could not read where this job starts, so rank 1 does not start either: "
                             "x.safetensors: corrupt")
