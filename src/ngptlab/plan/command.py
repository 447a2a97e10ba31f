"""`ngptlab plan`: validate a params file and print the runs it describes, with their size and cost
(plan/printout.py); or edit the grid (plan/growth.py) and write the grid file that dvc.yaml reads
(plan/gridfile.py); or accept a refactor on golden traces (plan/accept.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ngptlab import options
from ngptlab.errors import ParamsError
from ngptlab.models.arms import names as arm_names
from ngptlab.plan.accept import accept_code
from ngptlab.plan.closure import VERB_OF_STAGE, explain
from ngptlab.plan.estimate import MFU, PEAK_TFLOPS
from ngptlab.plan.extend import DEFAULT_CAP
from ngptlab.plan.grid import check_grid_file
from ngptlab.plan.gridfile import write_plan
from ngptlab.plan.growth import check_tuning, extend, match, prune, seed, set_keys
from ngptlab.plan.memory import GPU_MEMORY_GB
from ngptlab.plan.printout import print_plan
from ngptlab.plan.prune import DEFAULT_KEEP
from ngptlab.plan.storage import PROFILE
from ngptlab.settings import Params

FROM_PROTOCOL = -1  # `--prune-sweeps` or `--add-seeds` without a number: the params file's train.protocol


def configure(parser: argparse.ArgumentParser) -> None:
    options.add_json(parser)
    parser.add_argument("--mfu", type=float, default=MFU,
                        help=f"model FLOPs utilisation assumed (default {MFU:g})")
    parser.add_argument("--peak-tflops", type=float, default=PEAK_TFLOPS,
                        help=f"peak accelerator throughput in TFLOP/s (default {PEAK_TFLOPS:g}: "
                             "H100/H200 dense bf16)")
    parser.add_argument("--gpu-memory-gb", type=float, default=GPU_MEMORY_GB,
                        help=f"memory of one GPU, for the memory check (default {GPU_MEMORY_GB:g}: an H100; "
                             "141 for an H200)")
    parser.add_argument("--profile-config", metavar="FILE",
                        help="the Snakemake profile whose `jobs` bound how many runs train at once, for the "
                             f"disk their resume state takes (default: {PROFILE} under --root)")
    parser.add_argument("--write", metavar="FILE",
                        help="write the resolved grid (runs, cells) and the stages' lineage keys (their "
                             "code: --root's src/) to FILE, which dvc.yaml reads")
    parser.add_argument("--within-grid", action="store_true",
                        help="with --write: fail (after writing) when the runs, cells or source differ from "
                             "FILE's, for dvc.yaml's plan stage: DVC resolved its stages from the old grid")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="set a params key (dotted, the value as YAML, as `dvc exp run -S`) in the "
                             "params file in place, then rewrite the grid file (--write, default "
                             "results/plan.json): how to change the grid before `dvc exp run`; repeatable")
    parser.add_argument("--check", metavar="FILE",
                        help="fail unless FILE (from --write) still matches the params file")
    parser.add_argument("--extend-sweeps", action="store_true",
                        help="add the x2 / /2 neighbouring learning rate to every sweep whose best is at an "
                             "edge (results under --root), edit the params file in place and rewrite the "
                             "grid file (--write, default results/plan.json)")
    parser.add_argument("--prune-sweeps", type=int, nargs="?", const=FROM_PROTOCOL, metavar="K",
                        help="successive halving: once every budget up to B has results (results under "
                             "--root; B is train.protocol's when it names one), the budgets above B keep "
                             "each arm's K best learning rates (without K: train.protocol.prune_sweeps.keep, "
                             f"else {DEFAULT_KEEP}: the best and the one below it); edits the params file "
                             "and rewrites the grid file")
    parser.add_argument("--add-seeds", type=int, nargs="?", const=FROM_PROTOCOL, metavar="N",
                        help="once train.seeds have results, add N seeds (without N: "
                             "train.protocol.add_seeds) at the learning rates and up to the budgets "
                             "speedup.lr_policy chooses on their sweep; edits the params file and rewrites "
                             "the grid file")
    parser.add_argument("--allow-untuned", action="store_true",
                        help="with --prune-sweeps or --add-seeds: go on where an arm's best learning rate "
                             "sits at an edge of its sweep (an untuned sweep), which they otherwise refuse")
    parser.add_argument("--check-tuning", action="store_true",
                        help="print each arm's best learning rate at each budget of the grid (results under "
                             "--root) and whether it lies inside its sweep; exit 1 unless every one does "
                             "(run it before --prune-sweeps and --add-seeds)")
    parser.add_argument("--match-angles", action="store_true",
                        help="once the arms the angle arms are matched to have results, write the angle "
                             "per step their chosen runs turn (per cell and matrix kind) into train.angles; "
                             "edits the params file and rewrites the grid file (plan/angles.py)")
    options.add_root(parser)  # its src/ is the code --write fingerprints; its results/ the growth's input
    parser.add_argument("--explain", choices=VERB_OF_STAGE, metavar="STAGE",
                        help="print the files whose code a stage's lineage key covers (the import closure of "
                             f"its command; one of {', '.join(VERB_OF_STAGE)}) and those left out, and exit; "
                             "with --arm, a run's: its arm's module and its row of the table of arms")
    parser.add_argument("--arm", choices=arm_names(), metavar="ARM",
                        help="with --explain: the job of this arm (default: every arm's modules and rows)")
    parser.add_argument("--accept-code", action="store_true",
                        help="accept an edit of the code meant to change no number (a refactor): where "
                             "golden traces, tiny deterministic CPU runs of every arm whose trunk, train or "
                             "condition code it changes, are bit-identical at --against and in --root's "
                             "working tree, record the new code as equivalent (results/accepted-code.json), "
                             "so that no lineage key moves; else refuse, naming what differs")
    parser.add_argument("--against", default="HEAD", metavar="REV",
                        help="with --accept-code: the git revision whose code the working tree's is compared "
                             "with (default HEAD)")
    parser.add_argument("--max-sweep", type=int, default=DEFAULT_CAP, metavar="N",
                        help=f"with --extend-sweeps: learning rates per sweep at most "
                             f"(default {DEFAULT_CAP})")


def run(args: argparse.Namespace, params: Params) -> int:
    if args.explain:
        print(explain(args.explain, args.root, args.arm))
        return 0
    if args.accept_code:
        return accept_code(params, args.params, args.root, args.against)
    if args.check_tuning:
        return check_tuning(params, args.root, args.json)
    plan_file = args.write or str(Path(args.root) / "results" / "plan.json")  # of --set, --extend-sweeps
    if args.set:
        params = set_keys(args.params, args.set)
        args.write = plan_file
    if args.extend_sweeps:
        return extend(args.params, args.root, plan_file, args.max_sweep)
    if args.prune_sweeps is not None:
        keep = args.prune_sweeps
        if keep == FROM_PROTOCOL:
            pruning = params.train.protocol.prune_sweeps
            keep = pruning.keep if pruning else DEFAULT_KEEP
        return prune(args.params, args.root, plan_file, keep, args.allow_untuned)
    if args.add_seeds is not None:
        seeds = params.train.protocol.add_seeds if args.add_seeds == FROM_PROTOCOL else args.add_seeds
        if seeds is None:
            raise ParamsError(f"ngptlab plan --add-seeds without N takes train.protocol.add_seeds, which "
                              f"{args.params} does not set: give N")
        return seed(args.params, args.root, plan_file, seeds, args.allow_untuned)
    if args.match_angles:
        return match(args.params, args.root, plan_file)
    if args.write:
        # `--set` prepares a DVC experiment, which runs the plan stage itself (and a queued one must leave
        # dvc.lock as it was): only `--write` records the plan stage
        return write_plan(params, args.params, args.write, args.root, args.within_grid, record=not args.set)
    if args.check:
        check_grid_file(params, args.check, args.root)
        return 0
    return print_plan(params, args.params, args.root, args.mfu, args.peak_tflops, args.gpu_memory_gb,
                      args.profile_config, args.json)
