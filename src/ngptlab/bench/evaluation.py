"""`ngptlab bench evaluation`: a run's final evaluation with the LM head in row chunks (train/evaluation.py)
against the whole micro-batch's logits, per arm, in one run, and whether the losses are the same bits.

Each arm's model (step-0 weights, the real vocabulary) scores the final-eval windows of a seeded random val
split both ways, in turn, `--repeats` times; the ratio of the medians is what to read.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import numpy as np
import torch

from ngptlab import options
from ngptlab.bench.step import DEFAULT_VOCAB
from ngptlab.settings import Params


def configure(parser: argparse.ArgumentParser) -> None:
    options.add_arms(parser)
    parser.add_argument("--repeats", type=int, default=3, help="timed evaluations each way per arm")
    parser.add_argument("--vocab-size", type=int, default=DEFAULT_VOCAB)


def run(args: argparse.Namespace, params: Params) -> int:
    from ngptlab.models.registry import build_seeded
    from ngptlab.train import final_eval
    from ngptlab.train.batches import split_batch
    from ngptlab.train.dist import Topology
    from ngptlab.train.evaluation import Evaluator
    from ngptlab.train.trainer import run_shape

    train = params.train
    scale, context = train.scales[0], train.contexts[0]
    shape = run_shape(train, scale)
    micro_seqs = split_batch(train.batch_sequences, train.micro_batch_tokens, context, 1).micro_seqs
    topo = Topology(rank=0, world_size=1, local_rank=0, device=torch.device("cpu"))
    val = np.random.default_rng(0).integers(0, args.vocab_size, 100_000).astype(np.uint16)
    offsets = final_eval.windows(train, len(val), context)
    print(f"final evaluation of {len(offsets)} windows at {scale} ctx {context}, {micro_seqs} a pass, on "
          f"{torch.get_num_threads()} thread(s): whole logits vs the head in row chunks")
    for arm in args.arms or train.arms:
        model, _ = build_seeded(arm, shape, args.vocab_size, context, seed=0)
        whole = Evaluator(model, val, args.vocab_size, context, micro_seqs, contextlib.nullcontext(), topo)
        chunked = Evaluator(model, val, args.vocab_size, context, micro_seqs, contextlib.nullcontext(), topo,
                            model=model)
        seconds: dict[str, list[float]] = {"whole": [], "chunked": []}
        losses = {}
        for _ in range(args.repeats):
            for name, evaluator in (("whole", whole), ("chunked", chunked)):
                started = time.perf_counter()
                losses[name] = evaluator.loss(offsets)
                seconds[name].append(time.perf_counter() - started)
        before, after = (statistics.median(seconds[name]) for name in ("whole", "chunked"))
        same = "same bits" if losses["whole"] == losses["chunked"] else "DIFFERENT LOSSES"
        print(f"  {arm:12s} whole {before:6.2f} s  chunked {after:6.2f} s  ratio {after / before:.2f}  "
              f"{same}")
    return 0
