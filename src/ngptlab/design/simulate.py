"""Every planted truth (design/truths.py) over design.worlds worlds each, spread over processes.

World w of truth i draws from numpy's generator seeded [design.seed, *stream, i, w], so its runs are the
same whichever process plays it and however many there are; `stream` (none for the label-based truths) keeps
another set of truths, the dose-response worlds at each noise level, from drawing the same numbers.

Each truth also plays one noise-free world (seed, trunk and run sd 0) through the same protocol: what its
documents estimate is the estimand's value in that truth, the speed-up at the learning rates the policy
chooses, which differs from the planted law's speed-up where the chosen learning rate costs an arm more at
the budgets it reaches the target at than the baseline at the reference (learning-rate drift under a
per-trunk choice). Coverage and bias are measured against it (design/outcome.py with_estimand).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
from collections.abc import Callable, Iterable

import numpy as np

from ngptlab.design.loss_model import LossModel
from ngptlab.design.outcome import with_estimand, world_outcome
from ngptlab.design.protocol import analysed_world
from ngptlab.design.truths import Truth
from ngptlab.design.world import World
from ngptlab.settings import Params

_shared: dict = {}  # a worker's params, model and truths (set once per process, not sent per world)


def planted_world(params: Params, model: LossModel, truth: Truth, seed: int, truth_index: int,
                  world_index: int, stream: tuple[int, ...] = ()) -> World:
    """World world_index of truth truth_index: its generator seeded [seed, *stream, truth_index,
    world_index]."""
    rng = np.random.default_rng([seed, *stream, truth_index, world_index])
    return World(model, truth, params.train.eval_every_tokens, rng)


def _play(task: tuple[int, int]) -> tuple[int, dict]:
    truth_index, world_index = task
    params, model, truths, seed, stream = (_shared[k] for k in ("params", "model", "truths", "seed",
                                                                "stream"))
    truth = truths[truth_index]
    world = planted_world(params, model, truth, seed, truth_index, world_index, stream)
    return truth_index, world_outcome(analysed_world(params, world), truth)


def _share(params: Params, model: LossModel, truths: list[Truth], seed: int, stream: tuple[int, ...]) -> None:
    _shared.update(params=params, model=model, truths=truths, seed=seed, stream=stream)


def _collect(played: Iterable[tuple[int, dict]], n_truths: int, worlds: int,
             on_truth: Callable[[int], None] | None) -> list[list[dict]]:
    outcomes: list[list[dict]] = [[] for _ in range(n_truths)]
    for truth_index, outcome in played:
        outcomes[truth_index].append(outcome)
        if on_truth and len(outcomes[truth_index]) == worlds:
            on_truth(truth_index)
    return outcomes


def noise_free_world(params: Params, model: LossModel, truth: Truth, seed: int) -> World:
    """The truth's world without seed, trunk or run noise: what it estimates is the estimand."""
    noise_free = dataclasses.replace(model, seed_sd=0.0, trunk_sd=0.0, run_sd=0.0, kappa_sd=0.0, angle_sd=0.0)
    return World(noise_free, truth, params.train.eval_every_tokens, np.random.default_rng(seed))


def simulate(params: Params, model: LossModel, truths: list[Truth], worlds: int, seed: int,
             jobs: int | None = None, on_truth: Callable[[int], None] | None = None,
             stream: tuple[int, ...] = ()) -> tuple[list[list[dict]], list[dict]]:
    """([truth index][world] -> world_outcome, [truth index] -> its noise-free world's analysed_world); jobs
    processes (default: the CPUs this process may use); on_truth(i) once truth i's worlds are all played;
    stream: the module docstring's."""
    tasks = [(i, w) for i in range(len(truths)) for w in range(worlds)]
    jobs = min(jobs or len(os.sched_getaffinity(0)), len(tasks))
    if jobs <= 1:
        _share(params, model, truths, seed, stream)
        outcomes = _collect(map(_play, tasks), len(truths), worlds, on_truth)
    else:
        shared = (params, model, truths, seed, stream)
        with multiprocessing.get_context("fork").Pool(jobs, _share, shared) as pool:
            # in task order, truth after truth: a truth is done when its last world comes back
            outcomes = _collect(pool.imap(_play, tasks, chunksize=4), len(truths), worlds, on_truth)
    played_noise_free = []
    for truth_index, truth in enumerate(truths):
        analysed = analysed_world(params, noise_free_world(params, model, truth, seed))
        with_estimand(outcomes[truth_index], world_outcome(analysed, truth))
        played_noise_free.append(analysed)
    return outcomes, played_noise_free
