"""`ngptlab plan --extend-sweeps`: add the neighbouring learning rate wherever a best one sits at an edge.

For every (scale, context, arm) with an (arm, budget, seed) whose best learning rate is the top (bottom)
of its sweep (speedup/tuning.py), add twice the top (half the bottom) to that sweep in the params file,
unless the sweep already holds `cap` values; then rewrite the resolved grid (results/plan.json), so
Snakemake and `dvc repro` train exactly the new runs (learning rates are not among the settings that
retrain existing runs). A sweep with results still missing is left alone, so calling this again before
the new runs are trained adds nothing, and once every best is interior neither does it.

The params file is edited in place with its comments and layout kept (ruamel.yaml round trip). An arm
whose sweep is one list for every context gets a per-context mapping first when only some contexts need
the new value (so no run is added that the rule does not ask for).
"""

from __future__ import annotations

from pathlib import Path

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from ngptlab.config.load import load_params
from ngptlab.grid.enumeration import compared_runs, enumerate_cells
from ngptlab.grid.sweeps import lr_sweep
from ngptlab.plan.edit import edit_params_file
from ngptlab.plan.grid import write_grid_file
from ngptlab.results import read_run_result, train_dir
from ngptlab.settings import Params
from ngptlab.speedup.tuning import neighbour, sweep_edges

DEFAULT_CAP = 6  # learning rates per sweep at most: beyond that, a sweep that still hits an edge is reported


def proposed_extensions(params: Params, root: str | Path, cap: int) -> tuple[list[dict], list[dict]]:
    """([{scale, context, arm, edge, lr}] to add, [{scale, context, arm, edge}] held back by the cap)."""
    train = params.train
    # seeds added beyond train.seeds (plan/seeds.py) run one learning rate: they have no sweep to extend
    runs = [run for run in compared_runs(params) if run.seed in train.seeds]
    added: dict[tuple, dict] = {}
    capped: dict[tuple, dict] = {}
    for cell in enumerate_cells(params):
        specs = [s for s in runs if s.cell == cell]
        scale, context = specs[0].scale, specs[0].context
        results = [read_run_result(root, s, with_curve=False)
                   if (train_dir(root, s) / "summary.json").is_file() else None for s in specs]
        # the whole sweep at every budget: a best inside it, at a pruned window's edge, is no reason to extend
        def sweep_of(arm: str, budget: int, scale: str = scale, context: int = context) -> list[float]:
            return lr_sweep(train, scale, context, arm)

        for e in sweep_edges(results, sweep_of, specs):
            if e["edge"] not in ("top", "bottom"):
                continue
            key = (scale, context, e["arm"], e["edge"])
            if len(e["sweep"]) >= cap:
                capped[key] = {"scale": scale, "context": context, "arm": e["arm"], "edge": e["edge"]}
            else:
                added[key] = {"scale": scale, "context": context, "arm": e["arm"], "edge": e["edge"],
                              "lr": neighbour(e["edge"], e["sweep"])}
    return list(added.values()), list(capped.values())


def _flow(values: list) -> CommentedSeq:
    seq = CommentedSeq(values)
    seq.fa.set_flow_style()
    return seq


def apply_extensions(document: CommentedMap, additions: list[dict]) -> None:
    """Add each learning rate to its sweep in the round-trip document, in sorted position."""
    train = document["train"]
    contexts = list(train["contexts"])
    for a in additions:
        arms = train["learning_rates"][a["scale"]]
        sweep = arms[a["arm"]]
        if not isinstance(sweep, dict) and len(contexts) > 1:
            per_context = CommentedMap((f"ctx{c}", _flow(list(sweep))) for c in contexts)
            per_context.fa.set_flow_style()
            arms[a["arm"]] = sweep = per_context
        target = sweep[f"ctx{a['context']}"] if isinstance(sweep, dict) else sweep
        if a["lr"] not in target:
            target.insert(sum(1 for lr in target if lr < a["lr"]), a["lr"])


def extend_sweeps(params_path: str | Path, root: str | Path, plan_file: str | Path,
                  cap: int = DEFAULT_CAP) -> tuple[list[dict], list[dict]]:
    """Extend the sweeps of the params file in place and rewrite plan_file; return (added, capped)."""
    params = load_params(params_path)
    additions, capped = proposed_extensions(params, root, cap)
    if additions:
        edit_params_file(params_path, lambda document: apply_extensions(document, additions))
        params = load_params(params_path)
    write_grid_file(params, plan_file, root)
    return additions, capped
