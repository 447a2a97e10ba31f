"""`ngptlab train --params params.yaml --run <name>`: train one run of the grid, or one WSD trunk segment.

A name is a run's (`ngptlab plan` lists them) or, with train.schedule wsd, a trunk segment's,
`<trunk>-to<step>` (ngptlab/grid/trunks.py): a WSD run starts from its trunk's kept state where there is one.

Also runs under `torchrun --nproc_per_node N -m ngptlab.cli train --params FILE <run-name>` (DDP; the run
name positional, because torchrun's parser mistakes `--run` for its own `--run-path`).

Exit status: 0 when the run is done (completed or diverged; a rerun of a done run is a no-op), 75
(EX_TEMPFAIL) when SIGTERM/SIGINT stopped it after a checkpoint: run the same command again to resume.
Errors (bad params, corrupt or mismatched shards/checkpoints) exit 2 with one line naming the file or key.
"""

from __future__ import annotations

import argparse

from ngptlab.errors import ParamsError
from ngptlab.settings import Params


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", metavar="NAME",
                        help="run name, e.g. cpu-4l-ctx128-gpt-t8192-lr0.01-s0 (see `ngptlab plan`)")
    # torchrun's own argparse rejects a `--run` anywhere on its command line (ambiguous with its --run-path),
    # so under torchrun give the name as a positional argument instead.
    parser.add_argument("run_name", nargs="?", metavar="RUN", help="the run name, as an alternative to --run")
    parser.add_argument("--root", default=".", metavar="DIR",
                        help="directory holding data/tokens/, runs/ and results/ (default: .)")
    parser.add_argument("--fresh", action="store_true",
                        help="discard this run's checkpoint (e.g. one from other settings) and start over")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace, params: Params) -> int:
    from torch.distributed.elastic.multiprocessing.errors import record

    from ngptlab.train.jobs import find_job  # torch and the models load only for this verb
    from ngptlab.train.loop import train_run

    names = {name for name in (args.run, args.run_name) if name}
    if len(names) != 1:
        raise ParamsError("name one run: `--run NAME` or a positional NAME (under torchrun: positional)")
    spec = find_job(params, names.pop())
    # record: under torchrun, a process's exception goes to torchrun's error file, and so with its rank, host
    # and exit code into the failure summary that ends the log (on any node); outside torchrun a no-op.
    return record(train_run)(spec, params.train, root=args.root, fresh=args.fresh,
                             progress=not args.no_progress, condition=params.condition)
