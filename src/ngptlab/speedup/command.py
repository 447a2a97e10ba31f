"""`ngptlab speedup CELL`: the token speed-up of every arm in one (scale, context) cell
(speedup/cell.py), and its untuned sweeps named."""

from __future__ import annotations

import argparse

from ngptlab import options
from ngptlab.settings import Params
from ngptlab.speedup.cell import output_path, speedup_cell
from ngptlab.speedup.reading import short


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = options.examples(f"ngptlab speedup {options.EXAMPLE_CELL}")
    options.add_subject(parser, "cell")
    options.add_root(parser)


def run(args: argparse.Namespace, params: Params) -> int:
    args.cell = options.subject(args, "cell", "speedup")
    doc = speedup_cell(params, args.cell, args.root)
    parts = [f"{arm} {entry['speedup']['display']}" for arm, entry in doc["arms"].items()]
    print(f"{args.cell}: speed-up vs {doc['baseline']}: {', '.join(parts)} "
          f"-> {output_path(args.root, args.cell)}")
    accounts = doc["reading"].get("accounts", {})
    if accounts:
        sources = {name: f" ({a['source']})" if "source" in a else "" for name, a in accounts.items()}
        read = "; ".join(f"{name} account {short(a['reading'])}{sources[name]}"
                         for name, a in accounts.items())
        print(f"  reading: {read}")
    for baseline, further in doc.get("by_baseline", {}).items():
        parts = [f"{arm} {entry['speedup']['display']}" for arm, entry in further["arms"].items()]
        print(f"  speed-up vs {baseline}: {', '.join(parts)}")
    for e in doc["tuning"]["edges"]:
        if e["edge"] in ("top", "bottom"):
            print(f"  untuned: {e['arm']} at budget {e['budget']} (seed {e['seed']}): best lr "
                  f"{e['best_lr']:g} is the {e['edge']} of its "
                  f"{'pruned window' if e['pruned'] else 'sweep'}; "
                  "`ngptlab plan --extend-sweeps` adds its neighbour")
    return 0
