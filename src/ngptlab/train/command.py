"""`ngptlab train --params params.yaml RUN`: train one run of the grid, or one WSD trunk segment.

A name is a run's (`ngptlab plan` lists them) or, with train.schedule wsd, a trunk segment's,
`<trunk>-to<step>` (ngptlab/grid/trunks.py): a WSD run starts from its trunk's kept state where there is one.

Also runs under `torchrun --nproc_per_node N -m ngptlab.cli train --params FILE RUN` (DDP; torchrun's parser
would mistake the old `--run` for its own `--run-path`, one more reason the name is positional).

Exit status: 0 when the run is done (completed or diverged; a rerun of a done run is a no-op), 75
(EX_TEMPFAIL) when SIGTERM/SIGINT stopped it after a checkpoint: run the same command again to resume.
Errors (bad params, corrupt or mismatched shards/checkpoints) exit 2 with one line naming the file or key.
"""

from __future__ import annotations

import argparse

from ngptlab import options
from ngptlab.settings import Params


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("RUN may also be a WSD trunk segment, <trunk>-to<step>.\n\n"
                     + options.examples(f"ngptlab train {options.EXAMPLE_RUN}",
                                        f"ngptlab train --fresh {options.EXAMPLE_RUN}  # start it over"))
    options.add_subject(parser, "run")
    options.add_root(parser)
    parser.add_argument("--fresh", action="store_true",
                        help="discard this run's checkpoint (e.g. one from other settings) and start over")
    options.add_no_progress(parser)


def run(args: argparse.Namespace, params: Params) -> int:
    from torch.distributed.elastic.multiprocessing.errors import record

    from ngptlab.train.jobs import find_job  # torch and the models load only for this verb
    from ngptlab.train.loop import train_run

    spec = find_job(params, options.subject(args, "run", "train"))
    # record: under torchrun, a process's exception goes to torchrun's error file, and so with its rank, host
    # and exit code into the failure summary that ends the log (on any node); outside torchrun a no-op.
    return record(train_run)(spec, params.train, root=args.root, fresh=args.fresh,
                             progress=not args.no_progress, condition=params.condition, params=params)
