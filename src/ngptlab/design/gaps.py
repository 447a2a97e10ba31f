"""What the learning-rate policy costs a speed-up, for the report: ngpt's gap to a planted law.

For each of design.ngpt_speedups (by default 1.5x, 4x and the paper's claim at the grid's contexts) one
noise-free world of the design's loss model (design/loss_model.py: its learning-rate optimum drifts with
tokens) plays the params' protocol through the stages' own functions; ngpt's estimated ln S there minus the
planted ln S is what speedup.lr_policy and the learning-rate grid cost, before any seed noise.
"""

from __future__ import annotations

import math

from ngptlab.design.loss_model import loss_model
from ngptlab.design.protocol import analysed_world
from ngptlab.design.simulate import noise_free_world
from ngptlab.design.truths import Truth, planted_speedups
from ngptlab.settings import Params

ARM = "ngpt"


def policy_gaps(params: Params) -> list[dict]:
    """[{ngpt (planted speed-up), cell, gap (ln S estimated - planted; None: no number, e.g. a bound)}];
    empty when the grid lacks ngpt."""
    if ARM not in params.train.arms:
        return []
    model, rows = loss_model(params), []
    for speedup in planted_speedups(params):
        truth = Truth("account true", speedup)
        world = noise_free_world(params, model, truth, params.design.seed)
        for cell, doc in analysed_world(params, world)["documents"].items():
            estimate = doc.arms[ARM].speedup  # one seed or several: the geometric mean, or a bound
            number = estimate.value is not None and estimate.bound is None
            rows.append({"ngpt": speedup, "cell": cell,
                         "gap": math.log(estimate.value / speedup) if number else None})
    return rows
