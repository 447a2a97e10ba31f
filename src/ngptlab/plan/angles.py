"""`ngptlab plan --match-angles`: the angle arms' targets, measured on the arms they are matched to.

gpt-angle turns at ngpt's angle per step, ngpt-angle at gpt's (models/gpt_angle.py, models/ngpt_angle.py:
`turns_like`). Once the matched arm has trained in a cell, this step reads its chosen run: the learning rate
speedup.lr_policy chooses for it at its largest budget with a run (the speed-up stage's own chooser,
speedup/lr_policy.cell_policy), seed train.seeds[0]. From that run's metrics.jsonl (observe/step_angle.py:
each row's mean angle per optimizer step per matrix kind over the steps since the row before) it takes, per
kind, the angle at the schedule's peak (observe/peak_angle.py: the median over the rows near the peak of
step_angle x lr_peak / lr). The measured angles go into the params file as train.angles
[<cell>][<angle arm>] = {lr, run, kinds} (comments kept), and the grid file is rewritten, so Snakemake and
`dvc repro` see them; a cell whose matched arm has no finished chosen run is left on the prior and named.
"""

from __future__ import annotations

import json
from pathlib import Path

from ngptlab.config.load import load_params
from ngptlab.grid.runs import RunSpec, cell_name
from ngptlab.layout import train_results_dir
from ngptlab.models.arms import turns_like
from ngptlab.observe.peak_angle import peak_angles
from ngptlab.plan.edit import edit_params_file
from ngptlab.plan.grid import write_grid_file
from ngptlab.plan.sweeps import on_disk
from ngptlab.settings import Params
from ngptlab.speedup.lr_policy import cell_policy


def angle_arms(params: Params) -> dict[str, str]:
    """{angle arm of the grid: the arm whose angle it takes}."""
    matched = turns_like()
    return {arm: matched[arm] for arm in params.train.arms if arm in matched}


def measured(params: Params, root: str | Path) -> tuple[dict[str, dict[str, dict]], list[str]]:
    """({cell: {angle arm: {lr, run, kinds}}} for every cell whose matched run has finished, notes on the
    others)."""
    train, results = params.train, on_disk(root)
    found: dict[str, dict[str, dict]] = {}
    notes = []
    for scale in train.scales:
        for context in train.contexts:
            policy = None
            cell = cell_name(scale, context)
            for arm, matched in angle_arms(params).items():
                policy = policy or cell_policy(params, results, scale, context)
                chosen = policy.of_arm(matched)
                runs = [RunSpec(scale, context, matched, b, chosen[b], train.seeds[0], train.schedule)
                        for b in sorted(chosen, reverse=True)]
                finished = [spec for spec in runs if results(spec)]
                if not finished:
                    notes.append(f"{cell} {arm}: no finished chosen run of {matched} yet: left on the prior")
                    continue
                spec = finished[0]
                metrics = Path(root) / train_results_dir(cell, spec.name) / "metrics.jsonl"
                kinds = peak_angles(map(json.loads, metrics.read_text().splitlines()), spec.lr)
                if not kinds:
                    notes.append(f"{cell} {arm}: {spec.name} logged no step angle near its peak "
                                 "(train.step_angle_every 0?): left on the prior")
                    continue
                rounded = {kind: round(angle, 8) for kind, angle in sorted(kinds.items())}
                found.setdefault(cell, {})[arm] = {"lr": spec.lr, "run": spec.name, "kinds": rounded}
    return found, notes


def match_angles(params_path: str | Path, root: str | Path, plan_file: str | Path
                 ) -> tuple[dict[str, dict[str, dict]], list[str]]:
    """Write the measured angles into the params file's train.angles (each cell's arm replaced whole) and
    rewrite plan_file; return (what was written, notes)."""
    params = load_params(params_path)
    found, notes = measured(params, root)

    def edit(document: dict) -> None:
        angles = document["train"].setdefault("angles", {})
        for cell, arms in found.items():
            angles.setdefault(cell, {}).update(arms)

    if found:
        edit_params_file(params_path, edit)
        params = load_params(params_path)
    write_grid_file(params, plan_file, root)
    return found, notes
