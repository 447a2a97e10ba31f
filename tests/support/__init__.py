"""What the tests share and are not tests themselves: the workflow's scratch copies and end-to-end grid
(workflow.py), tiny token shards and params files for training (train.py), the prepare stage's cached
tokenizer and documents (prepare.py), a filesystem and a lock held elsewhere for the run lock (lock.py), and
results, trees and files written as the stages would (synthetic.py), and checks on the report's figures as
matplotlib drew them (figures.py); and here, the params file they all start from (TEST_PARAMS)."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
# The tests' own params file (the snakemake-workflows `.test/` convention): every test whose fixture is a
# params file starts from this one, never from the researcher's params.yaml, which can change freely.
TEST_PARAMS = REPO / ".test" / "params.yaml"


@cache
def _fixture_params() -> dict:
    return yaml.safe_load(TEST_PARAMS.read_text())


def fixture_params() -> dict:
    """The tests' own params (TEST_PARAMS) as a mapping, a fresh copy to edit."""
    return copy.deepcopy(_fixture_params())
