"""Edits of the params file that change the grid, each printing what it did and rewriting the grid file:
keys set by hand (`--set`, as `dvc exp run -S`), sweeps extended at their edges (plan/extend.py), pruned by
successive halving (plan/prune.py), seeds added at the chosen learning rates (plan/seeds.py), and the angle
arms' targets measured on the arms they are matched to (plan/angles.py); and the check that the sweeps they
grow from are tuned (`--check-tuning`, plan/tuned.py), which writes nothing."""

from __future__ import annotations

import json

from ngptlab.config.load import load_params
from ngptlab.plan.angles import match_angles
from ngptlab.plan.edit import edit_params_file, parse_assignment, set_value
from ngptlab.plan.extend import extend_sweeps
from ngptlab.plan.prune import prune_sweeps
from ngptlab.plan.seeds import add_seeds
from ngptlab.plan.sweeps import on_disk
from ngptlab.plan.tuned import grid_bests, summary
from ngptlab.settings import Params


def set_keys(params_file: str, assignments: list[str]) -> Params:
    """Set each KEY=VALUE in the params file in place; the params as they are now."""
    parsed = [parse_assignment(a) for a in assignments]
    edit_params_file(params_file, lambda document: [set_value(document, k, v) for k, v in parsed])
    params = load_params(params_file)
    print(f"set {', '.join(k for k, _ in parsed)} in {params_file}")
    return params


def extend(params_file: str, root: str, plan_file: str, max_sweep: int) -> int:
    added, capped = extend_sweeps(params_file, root, plan_file, cap=max_sweep)
    for a in added:
        print(f"{a['scale']} ctx{a['context']} {a['arm']}: best lr at the {a['edge']} of its sweep; "
              f"added {a['lr']:g}")
    for c in capped:
        print(f"{c['scale']} ctx{c['context']} {c['arm']}: best lr at the {c['edge']} of its sweep, "
              f"which already has {max_sweep} values (--max-sweep); not extended")
    print(f"{len(added)} learning rate(s) added to {params_file}; wrote {plan_file}")
    return 0


def check_tuning(params: Params, root: str, as_json: bool) -> int:
    """Each arm's best learning rate at each budget of the grid and where it sits in its sweep; 0 when
    every one is interior, else 1."""
    bests = grid_bests(params, on_disk(root))
    if as_json:
        print(json.dumps([b.as_dict() for b in bests], indent=2))
    else:
        for b in bests:
            print(b.line())
        print(summary(bests))
    return 0 if all(b.edge is None for b in bests) else 1


def prune(params_file: str, root: str, plan_file: str, keep: int, allow_untuned: bool) -> int:
    entries, notes = prune_sweeps(params_file, root, plan_file, keep=keep, allow_untuned=allow_untuned)
    for e in entries:
        trained = "".join(f"; {t['lr']:g} kept at {t['budget']:,}, where it has trained"
                          for t in e.get("trained", []))
        print(f"{e['scale']} ctx{e['context']} {e['arm']}: above {e['after_budget']:,} keeps "
              f"{', '.join(f'{lr:g}' for lr in e['learning_rates'])} (best there {e['best_lr']:g}){trained}")
    return _grown(notes, f"{len(entries)} sweep(s) pruned in {params_file}", plan_file)


def seed(params_file: str, root: str, plan_file: str, seeds: int, allow_untuned: bool) -> int:
    entries, notes = add_seeds(params_file, root, plan_file, seeds, allow_untuned=allow_untuned)
    for e in entries:
        print(f"{e['scale']} ctx{e['context']} {e['arm']} at {e['budget']:,}: seeds "
              f"{', '.join(map(str, e['seeds']))} at lr {e['lr']:g}")
    return _grown(notes, f"{len(entries)} (arm, budget) point(s) given seeds in {params_file}", plan_file)


def match(params_file: str, root: str, plan_file: str) -> int:
    found, notes = match_angles(params_file, root, plan_file)
    for cell, arms in found.items():
        for arm, m in arms.items():
            angles = ", ".join(f"{kind} {angle:.3g}" for kind, angle in m["kinds"].items())
            print(f"{cell} {arm}: the angles of {m['run']} (lr {m['lr']:g}): {angles} rad per step")
    written = sum(len(arms) for arms in found.values())
    return _grown(notes, f"{written} (cell, angle arm) target(s) written into {params_file}", plan_file)


def _grown(notes: list[str], summary: str, plan_file: str) -> int:
    for note in notes:
        print(f"note: {note}")
    print(f"{summary}; wrote {plan_file}")
    return 0
