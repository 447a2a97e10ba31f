"""How `make test` spreads the suite over two processes (pytest-xdist, `-n 2`; the Makefile's TEST_WORKERS).

The unit of work is a test module, so its module-scoped fixtures (a trained run, a rendered report) are built
once. The tests that compare against the one local run of the end-to-end grid
(support.workflow.local_smoke_run) are one unit, so that run is trained once. Units go out in collection
order, which this file sets: that unit first, the cluster recipe second (on the other worker), then the
modules with slow tests, so that no long unit starts last and leaves the other worker idle.

xdist's `--dist loadgroup` would say the same with marks, but pytest 9.2's structured node ids broke it
(pytest-xdist issue 1386): the units are named here, from the node ids, by a scheduler of xdist's own kind.
"""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadScopeScheduling

LOCAL_SMOKE_RUN = "local-smoke-run"
# The longest unit of its own, started at once on the other worker: the cluster page's recipe.
CLUSTER_RECIPE = "tests/test_cluster_recipe.py"
LOCAL_SMOKE_RUN_TESTS = ("tests/test_dvc.py::", "tests/test_slurm.py::", "tests/test_experiments.py::",
                         "tests/test_workflow.py::test_smoke_pipeline_runs_end_to_end_locally")


def unit(nodeid: str) -> str:
    """The unit of work a test belongs to: the local end-to-end run's, or its module."""
    return LOCAL_SMOKE_RUN if nodeid.startswith(LOCAL_SMOKE_RUN_TESTS) else nodeid.split("::", 1)[0]


class ByUnit(LoadScopeScheduling):
    def _split_scope(self, nodeid: str) -> str:
        return unit(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log) -> ByUnit:
    return ByUnit(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Whole units move, in their own order, so a plain `pytest` still sets each module's fixtures up once.
    slow = {unit(item.nodeid) for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: (unit(item.nodeid) != LOCAL_SMOKE_RUN, unit(item.nodeid) != CLUSTER_RECIPE,
                                 unit(item.nodeid) not in slow))


@pytest.fixture(scope="module")
def one_torch_thread():
    """For a module of many small SVDs (the report's synthetic analysis): one thread is fastest on a shared
    2-core machine."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
