"""`ngptlab speedup --cell CELL`: the token speed-up of every arm in one (scale, context) cell.

Reads results/train/<cell>/<run>/summary.json and metrics.jsonl of every run of the cell in the grid (a
missing one is an error: the speed-up of a partial grid would silently change), writes
results/speedup/<cell>.json.
Method: ngptlab.speedup.estimator (module docstring).

results/speedup/<cell>.json (strict JSON; "inf" / null encoding as in ngptlab/results.py):
  cell, scale, context, baseline, method (text), bootstrap{resamples, seed, level},
  seeds [int], budgets [int], arms_order [arm; baseline first],
  targets [{seed, arm, budget, loss, lr, run, at_largest_budget, measurable [lo, hi]}]
                                   per seed, the baseline's best loss at the largest budget where it has a
                                   completed run (at_largest_budget false: the grid's largest budget had
                                   none); measurable = the speed-ups this grid can give as numbers
  arms{<arm>: {
     speedup{value, bound, display, interval [lo, hi] | null, level, n_seeds, note}
                                      value = mean over seeds; bound null (point estimate), ">" (true speed-up
                                      is larger) or "<" (smaller); display e.g. "4.2", ">8", "<0.5"
     per_seed [{seed, tokens_to_target{value, bound, display}, speedup{value, bound, display},
                best [{budget, lr, loss, run}]}]   the best-over-lr run at every budget that entered
     cheap{method (text), speedup{...as above}, per_seed [{seed, run, tokens_to_target, speedup}]}}}
  runs [{run, scale, context, arm, budget, lr, seed, status, final_val_loss, best_lr_for_budget,
         within_run: {tokens_to_target, speedup} | null}]      every run of the cell; within_run = the per-run
                                                               cheaper estimate from its own validation curve
  ignored [{run, reason}]                                       diverged runs, left out of every estimate
  tuning{edges [{arm, budget, seed, sweep, best_lr, edge}], tuned {<arm>: bool}}
                                   edge "top" / "bottom": the best lr is at that edge of its sweep (untuned;
                                   `ngptlab plan --extend-sweeps` extends it), null: interior; an arm is
                                   tuned when none of its (budget, seed) is at an edge (speedup/tuning.py)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ngptlab import layout
from ngptlab.errors import ParamsError
from ngptlab.params import compared_runs, enumerate_cells, lr_sweep
from ngptlab.results import read_run_result, write_json
from ngptlab.speedup.estimator import estimate_cell
from ngptlab.speedup.tuning import sweep_edges, tuned_arms

METHOD = ("best final validation loss over the learning-rate sweep per arm and budget (diverged runs "
          "ignored); target = baseline's best loss at the largest budget where it has a completed run; "
          "tokens to target interpolated in log tokens between bracketing budgets, bounds instead of "
          "extrapolation; speed-up = baseline tokens / arm tokens; per seed, then mean and percentile "
          "bootstrap over seeds")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cell", required=True, help="scale x context cell, e.g. cpu-4l-ctx64")
    parser.add_argument("--root", default=".", help="directory holding results/ (default: .)")


def output_path(root: str | Path, cell: str) -> Path:
    return Path(root) / layout.speedup_file(cell)


def speedup_cell(params: dict, cell: str, root: str | Path) -> dict:
    """Estimate one cell from the train results under root and write its JSON; return the document."""
    cells = enumerate_cells(params)
    if cell not in cells:
        raise ParamsError(f"cell {cell!r} is not in the grid of this params file; cells: {', '.join(cells)}")
    specs = [s for s in compared_runs(params) if s.cell == cell]
    results = [read_run_result(root, s) for s in specs]
    cfg = params["speedup"]
    estimate = estimate_cell(results, cfg["baseline"], int(cfg["bootstrap"]), int(cfg["seed"]))
    scale, context = specs[0].scale, specs[0].context
    edges = sweep_edges(results, lambda arm: lr_sweep(params["train"], scale, context, arm), specs)
    document = {"cell": cell, "scale": scale, "context": context, "method": METHOD,
                "bootstrap": {"resamples": int(cfg["bootstrap"]), "seed": int(cfg["seed"]), "level": 0.95},
                **estimate, "tuning": {"edges": edges, "tuned": tuned_arms(edges)}}
    write_json(output_path(root, cell), document)
    return document


def run(args: argparse.Namespace, params: dict) -> int:
    doc = speedup_cell(params, args.cell, args.root)
    parts = [f"{arm} {entry['speedup']['display']}" for arm, entry in doc["arms"].items()]
    print(f"{args.cell}: speed-up vs {doc['baseline']}: {', '.join(parts)} "
          f"-> {output_path(args.root, args.cell)}")
    for e in doc["tuning"]["edges"]:
        if e["edge"] in ("top", "bottom"):
            print(f"  untuned: {e['arm']} at budget {e['budget']} (seed {e['seed']}): best lr "
                  f"{e['best_lr']:g} is the {e['edge']} of its sweep; "
                  "`ngptlab plan --extend-sweeps` adds its neighbour")
    return 0
