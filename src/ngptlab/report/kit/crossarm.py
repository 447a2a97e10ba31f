"""The cross-arm table, where the report reads the condition and speedup stages together (it lives here, so
neither stage package imports the other): one row per run joining its training outcome, its cell's speed-up
and its headline conditioning numbers, so the report can ask which property tracks the speed-up across the
arms that fix norms only, conditioning only, both, or neither.

cross_arm_table(params, root) -> DataFrame, one row per run that compares arms (compared_runs order: the runs
  of train.schedule; a WSD grid's cosine calibration runs have no speed-up and are left out):
  run, cell, scale, context, arm, norms, conditioning (the arm's place in the design, DESIGN.md),
  budget, lr, seed, status, final_val_loss, best_lr_for_budget (this run is its arm's best lr at this
  budget and seed, i.e. the one that entered the speed-up),
  speedup, speedup_bound ("" | ">" | "<"), speedup_display, speedup_lo, speedup_hi (t-interval on ln S),
  cheap_speedup_display (the within-run estimate of the arm), within_run_speedup_display (this run's own),
  then for each variant prefix eff_ (effective), renorm_ (renormalized), under_ (underlying: the raw
  parameter) every headline key of ngptlab.observe.headline.headline, e.g.
  eff_attn_condition_median, renorm_embed_in_cov_condition, eff_layer3_q_condition. inf = numerically
  singular; nan = not applicable or not measured.
arm_table(table) -> one row per (cell, arm): the arm's best-lr runs at the largest budget, averaged over
  seeds.
tracking(table) -> Spearman rank correlation, across arms within each cell, of the speed-up with every
  headline number (the report's question), with the number of arms it rests on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ngptlab import layout
from ngptlab.errors import ResultsError
from ngptlab.grid.enumeration import compared_runs
from ngptlab.grid.runs import RunSpec
from ngptlab.models.arms import arm as lookup_arm
from ngptlab.observe.headline import headline
from ngptlab.results import read_float, read_json, read_summary, write_text
from ngptlab.settings import Params
from ngptlab.speedup.document import SpeedupDocument, read_document

VARIANT_PREFIX = {"effective": "eff_", "renormalized": "renorm_", "underlying": "under_"}
HEADLINE_KEYS = tuple(headline({}, "effective"))
# The headline numbers the report shows, with their display headers (the speed-up package has them all).
CONDITION_COLUMNS = {
    "embed_in_cov_condition": "κ input emb. cov.",
    "embed_out_cov_condition": "κ output emb. cov.",
    "attn_head_condition_median": "κ attention, median over heads",
    "attn_condition_median": "κ attention (whole matrices), median",
    "mlp_condition_median": "κ MLP, median",
    "stable_rank_median": "stable rank, median",
    "effective_rank_median": "effective rank, median",
}


@dataclass
class Analysis:
    """The cross-arm outputs, computed once by the command."""

    cross: pd.DataFrame  # cross_arm_table(..., allow_missing=True)
    arm_rows: pd.DataFrame  # arm_table(cross)
    tracking: pd.DataFrame  # tracking(cross)


def _speedup_columns(doc: SpeedupDocument | None, spec: RunSpec, path: Path) -> dict:
    cols = {"best_lr_for_budget": False, "speedup": math.nan, "speedup_bound": "", "speedup_display": "",
            "speedup_lo": math.nan, "speedup_hi": math.nan, "cheap_speedup_display": "",
            "within_run_speedup_display": ""}
    if doc is None:
        return cols
    arm = doc.arms.get(spec.arm)
    if arm is None:
        raise ResultsError(f"{path}: no entry for arm {spec.arm!r}")
    s = arm.speedup
    lo, hi = s.interval or (math.nan, math.nan)
    cols.update(speedup=read_float(s.value), speedup_bound=s.bound or "", speedup_display=s.display,
                speedup_lo=lo, speedup_hi=hi, cheap_speedup_display=arm.cheap.display if arm.cheap else "")
    for entry in doc.runs:
        if entry.run == spec.name:
            cols["best_lr_for_budget"] = entry.best_lr_for_budget
            if entry.within_run:
                cols["within_run_speedup_display"] = entry.within_run.display
    return cols


def _conditioning_columns(doc: dict | None) -> dict:
    cols = {prefix + key: math.nan for prefix in VARIANT_PREFIX.values() for key in HEADLINE_KEYS}
    for variant, values in (doc or {}).get("headline", {}).items():
        for key, value in values.items():
            if variant in VARIANT_PREFIX and key in HEADLINE_KEYS:
                cols[VARIANT_PREFIX[variant] + key] = read_float(value)
    return cols


def arm_design(arm: str) -> tuple[str, str]:
    """Where an arm sits in the design (DESIGN.md, "Arms"): what it does to weight norms and conditioning."""
    spec = lookup_arm(arm)  # models/arms.yaml states it once, in the arm's row
    return spec.norms, spec.conditioning


def cross_arm_table(params: Params, root: str | Path = ".", allow_missing: bool = False) -> pd.DataFrame:
    """One row per run that compares arms (see the module docstring). Missing result files are an error unless
    allow_missing, in which case their columns are nan/empty (for a report on a grid still running)."""
    root = Path(root)
    speedups: dict[str, SpeedupDocument | None] = {}
    rows = []
    for spec in compared_runs(params):
        if spec.cell not in speedups:
            path = root / layout.speedup_file(spec.cell)
            missing = allow_missing and not path.is_file()
            speedups[spec.cell] = None if missing else read_document(path)
        try:
            summary = read_summary(root, spec)
        except ResultsError:
            if not allow_missing:
                raise
            summary = {"status": "missing", "final_val_loss": None}
        cond_path = root / layout.conditioning_files(spec.name)["json"]
        cond = None if allow_missing and not cond_path.is_file() else read_json(cond_path, "conditioning")
        norms, conditioning = arm_design(spec.arm)
        rows.append({
            "run": spec.name, "cell": spec.cell, **spec.as_dict(),
            "norms": norms, "conditioning": conditioning,
            "status": summary["status"], "final_val_loss": read_float(summary["final_val_loss"]),
            **_speedup_columns(speedups[spec.cell], spec, root / layout.speedup_file(spec.cell)),
            **_conditioning_columns(cond),
        })
    return pd.DataFrame(rows)


def write_cross_arm_table(params: Params, path: str | Path, root: str | Path = ".",
                          allow_missing: bool = False) -> pd.DataFrame:
    """cross_arm_table written as CSV (atomically); returns the table."""
    table = cross_arm_table(params, root, allow_missing)
    write_text(path, table.to_csv(index=False))
    return table


def arm_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per (cell, arm): the best-lr runs at the arm's largest budget, numeric columns averaged over seeds."""
    chosen = table[table["best_lr_for_budget"]]
    chosen = chosen[chosen["budget"] == chosen.groupby(["cell", "arm"])["budget"].transform("max")]
    numeric = [c for c in chosen.columns if c.startswith(tuple(VARIANT_PREFIX.values()))
               or c in ("final_val_loss", "speedup")]
    keep = ["cell", "arm", "norms", "conditioning", "budget", "speedup_display"]
    out = chosen.groupby(["cell", "arm"], sort=False).agg(
        {**{c: "first" for c in keep if c not in ("cell", "arm")}, **{c: "mean" for c in numeric},
         "seed": "count"})
    return out.rename(columns={"seed": "n_seeds"}).reset_index()


def tracking(table: pd.DataFrame, min_arms: int = 3) -> pd.DataFrame:
    """Spearman rank correlation across arms (within each cell) of the speed-up with each headline number.

    Bounds enter at their bound value (a rank statistic is unchanged as long as the bound keeps the order).
    Rows: cell, metric, rho, n_arms; cells with fewer than min_arms usable arms are skipped.
    """
    arms = arm_table(table)
    out = []
    for cell, group in arms.groupby("cell", sort=False):
        for metric in [c for c in group.columns if c.startswith(tuple(VARIANT_PREFIX.values()))]:
            both = group[["speedup", metric]].replace([np.inf], 1e300).dropna()
            if len(both) < min_arms or both[metric].nunique() < 2 or both["speedup"].nunique() < 2:
                continue
            rho = both["speedup"].rank().corr(both[metric].rank())
            out.append({"cell": cell, "metric": metric, "rho": float(rho), "n_arms": len(both)})
    return pd.DataFrame(out, columns=["cell", "metric", "rho", "n_arms"])
