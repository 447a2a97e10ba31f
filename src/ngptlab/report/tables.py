"""Every table of the report, built from the loaded results (report/load.py) and the cross-arm table
(report/crossarm.py), which the settle-it section reads as is rather than re-joining.

Each builder returns a report.table.Table whose rows carry the runs behind them, for the provenance.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator

import pandas as pd

from ngptlab.params import lr_sweep
from ngptlab.report import figures, paper, schedule, views
from ngptlab.report.load import Results, RunRecord
from ngptlab.report.table import Table, fmt_int, fmt_loss, fmt_lr, fmt_num, fmt_sha, fmt_text
from ngptlab.results import read_float

PAPER_LAYERS = (3, 4)


def _h(record: RunRecord | None, key: str, variant: str = "effective") -> float | None:
    """A headline number of a run as a float (inf for singular), None when absent."""
    if record is None:
        return None
    value = record.headline(variant).get(key)
    return None if value is None else read_float(value)


# ----------------------------------------------------------------------------------------------------------
# What was run


def grid_table(results: Results) -> Table:
    train = results.params["train"]
    t = Table("grid", "The grid", ["item", "value"], formats={"value": fmt_text}, key=["item"])
    t.add({"item": "scales", "value": ", ".join(train["scales"])})
    t.add({"item": "contexts", "value": ", ".join(f"{c:,}" for c in train["contexts"])})
    t.add({"item": "arms", "value": ", ".join(views.arms(results))})
    t.add({"item": "token budgets", "value": ", ".join(f"{b:,}" for b in views.budgets(results))})
    t.add({"item": "schedule", "value": schedule.describe(train)})
    for scale in train["scales"]:
        for context in train["contexts"]:
            lrs = "; ".join(f"{arm} {', '.join(fmt_lr(x) for x in lr_sweep(train, scale, context, arm))}"
                            for arm in views.arms(results))
            t.add({"item": f"learning rates ({scale}, context {context})", "value": lrs})
    t.add({"item": "seeds", "value": ", ".join(str(s) for s in train["seeds"])})
    t.add({"item": "batch (sequences, at every context)", "value": f"{train['batch_sequences']:,}"})
    t.add({"item": "warmup (steps, arms that warm up)",
           "value": f"{train['warmup_steps']:,}, at most {train['warmup_max_fraction']:.0%} of a run's "
                    "steps"})
    counts = views.status_counts(list(results.runs.values()))
    t.add({"item": "runs", "value": f"{len(results.runs)} in the grid: {counts['completed']} completed, "
           f"{counts['diverged']} diverged, {counts['missing']} missing"}, list(results.runs))
    return t


def data_table(results: Results) -> Table:
    t = Table("data", "The data", ["item", "value"], formats={"value": fmt_text}, key=["item"])
    meta = results.meta
    source = results.params["prepare"]["source"]
    t.add({"item": "source", "value": f"{source['name']} ({source['kind']})"})
    if meta is None:
        t.add({"item": "meta.json", "value": f"missing: data/tokens/{results.source}/meta.json"})
    for split in ("train", "val"):
        info = (meta or {}).get("splits", {}).get(split) or {}
        tokens, docs = info.get("tokens"), info.get("documents")
        t.add({"item": f"{split} tokens", "value": f"{tokens:,} in {docs:,} documents"
               if isinstance(tokens, int) and isinstance(docs, int) else None})
        t.add({"item": f"{split}.bin sha256", "value": info.get("sha256")})
    tokenizer = (meta or {}).get("tokenizer")
    if isinstance(tokenizer, dict):
        t.add({"item": "tokenizer", "value": str(tokenizer.get("name"))})
    # The shards each run trained on, as its summary recorded them: they should all agree with meta.json.
    shards = views.run_shards
    seen = sorted({shards(r) for r in results.runs.values() if r.summary}, key=str)
    for i, (train_sha, val_sha) in enumerate(seen):
        runs = [r.name for r in results.runs.values() if r.summary and shards(r) == (train_sha, val_sha)]
        label = "shards the runs used" if len(seen) == 1 else f"shards used by run group {i + 1}"
        value = f"train {fmt_sha(train_sha)}, val {fmt_sha(val_sha)} ({len(runs)} runs)"
        t.add({"item": label, "value": value}, runs)
    return t


def status_table(results: Results) -> Table:
    """Per cell and arm: runs finished, diverged or missing, and the best loss at the largest budget."""
    largest = views.budgets(results)[-1]
    cols = ["cell", "arm", "n_runs", "completed", "diverged", "missing", "best_loss_largest_budget"]
    t = Table("status", "Runs per cell and arm", cols, key=["cell", "arm"],
              headers={"n_runs": "runs", "best_loss_largest_budget":
                       f"best final val loss at {largest:,} tokens (mean over seeds)"},
              formats={"cell": fmt_text, "arm": fmt_text, "n_runs": fmt_int, "completed": fmt_int,
                       "diverged": fmt_int, "missing": fmt_int, "best_loss_largest_budget": fmt_loss})
    for cell in results.cells:
        best = views.best_runs(results, cell)
        for arm in views.arms(results):
            records = [r for r in results.cell_runs(cell) if r.spec.arm == arm]
            t.add({"cell": cell, "arm": arm, "n_runs": len(records), **views.status_counts(records),
                   "best_loss_largest_budget": views.mean_best_loss(best, arm, largest)},
                  [r.name for r in records])
    return t


def runs_table(results: Results) -> Table:
    cols = ["run", "cell", "arm", "budget", "lr", "seed", "schedule", "status", "final_val_loss", "tokens",
            "steps", "train_flops", "conditioning"]
    t = Table("runs", "Every run of the grid", cols, key=["run"],
              headers={"final_val_loss": "final val loss", "train_flops": "train FLOPs"},
              formats={"run": fmt_text, "cell": fmt_text, "arm": fmt_text, "status": fmt_text,
                       "conditioning": fmt_text, "budget": fmt_int, "lr": fmt_lr, "seed": fmt_int,
                       "final_val_loss": fmt_loss, "tokens": fmt_int, "steps": fmt_int},
              shown=["cell", "arm", "budget", "lr", "seed", "schedule", "status", "final_val_loss", "tokens",
                     "steps", "conditioning"])
    for r in results.runs.values():
        s = r.summary or {}
        cond = ("missing" if r.conditioning is None else "stale" if r.stale_conditioning else "yes")
        t.add({"run": r.name, "cell": r.spec.cell, "arm": r.spec.arm, "budget": r.spec.budget,
               "lr": r.spec.lr, "seed": r.spec.seed, "schedule": r.spec.schedule, "status": r.status,
               "final_val_loss": r.final_val_loss, "tokens": s.get("tokens"), "steps": s.get("steps"),
               "train_flops": s.get("train_flops"), "conditioning": cond if r.summary else None}, [r.name])
    return t


def _median_timing(records: list[RunRecord], key: str) -> float | None:
    """The median of a timing file's `key` over the runs that have one and a value (None: none has)."""
    values = [float(r.timing[key]) for r in records if r.timing and r.timing.get(key) is not None]
    return statistics.median(values) if values else None


def fmt_mfu(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def compute_table(results: Results) -> Table:
    # Measured speed comes from results/timing/, which only the report reads: timings differ between two
    # trainings of the same run, and the report is the last stage, so nothing downstream reruns for them.
    summed = ["completed", "diverged", "missing", "tokens", "train_flops"]
    cols = ["cell", *summed, "tokens_per_s", "mfu"]
    t = Table("compute", "Compute spent per cell", cols, key=["cell"],
              headers={"train_flops": "train FLOPs", "tokens": "tokens trained",
                       "tokens_per_s": "tokens/s (median)", "mfu": "MFU (median)"},
              formats={"cell": fmt_text, "completed": fmt_int, "diverged": fmt_int, "missing": fmt_int,
                       "tokens": fmt_int, "tokens_per_s": fmt_int, "mfu": fmt_mfu},
              note="tokens/s and MFU: as each run measured them (results/timing/; tokens/s of "
                   "all the run's processes together), median over the cell's runs that have a timing file; "
                   "MFU against the device's dense bf16 peak, n/a where that is unknown (a CPU or an "
                   "unlisted GPU; train.peak_tflops declares one).")
    rows = []
    for cell in results.cells:
        records = results.cell_runs(cell)
        done = [r for r in records if r.summary]
        counts = views.status_counts(records)
        tokens, flops = schedule.compute_spent(results, cell, done)  # a shared WSD trunk counted once
        rows.append(({"cell": cell, **counts, "tokens": tokens, "train_flops": flops,
                      "tokens_per_s": _median_timing(done, "tokens_per_s"),
                      "mfu": _median_timing(done, "mfu")},
                     [r.name for r in done]))
    for values, runs in rows:
        t.add(values, runs)
    if len(rows) > 1:
        done = [r for r in results.runs.values() if r.summary]
        total = {c: sum(v[c] for v, _ in rows) for c in summed}
        t.add({"cell": "all", **total, "tokens_per_s": _median_timing(done, "tokens_per_s"),
               "mfu": _median_timing(done, "mfu")}, [r for _, runs in rows for r in runs])
    return t


# ----------------------------------------------------------------------------------------------------------
# The speed-up


def _speedup_text(s: dict) -> str:
    """'4.2 [3.1, 5.3]' or '>8 (bound)' or 'n/a (reason)'."""
    if s.get("value") is None:
        return f"n/a ({s['note']})" if s.get("note") else "n/a"
    text = s.get("display") or fmt_num(s["value"])
    if s.get("bound"):
        return f"{text} (bound)"
    interval = s.get("interval")
    if interval:
        text += f" [{fmt_num(read_float(interval[0]))}, {fmt_num(read_float(interval[1]))}]"
    return text


def tuned_text(doc: dict, arm: str) -> str | None:
    """'yes' when every best learning rate of the arm is inside its sweep, else where it sits on an edge
    (speedup/tuning.py); None for a speed-up file without tuning (older files)."""
    if "tuning" not in doc:
        return None
    edges = [e for e in doc["tuning"]["edges"] if e["arm"] == arm]
    at_edge = [e for e in edges if e["edge"] in ("top", "bottom")]
    if at_edge:
        where = ", ".join(f"{e['edge']} at {e['budget']:,}" for e in at_edge)
        return f"no: best lr at the sweep's {where} (extend: ngptlab plan --extend-sweeps)"
    if any(e["edge"] is not None for e in edges):
        return "unknown: " + ", ".join(sorted({e["edge"] for e in edges if e["edge"] is not None}))
    return "yes"


def speedup_table(results: Results) -> Table:
    cols = ["cell", "scale", "context", "arm", "speedup", "bound", "interval_lo", "interval_hi", "level",
            "n_seeds", "display", "cheap_display", "tuned", "paper", "paper_where", "note"]
    t = Table("speedup", "Speed-up over the baseline (tokens the baseline needs / tokens the arm needs)",
              cols, key=["cell", "arm"],
              headers={"display": "speed-up [95% interval]", "cheap_display": "within-run estimate",
                       "tuned": "lr tuned (best inside its sweep)", "paper": "paper (nGPT)",
                       "paper_where": "paper source"},
              formats={c: fmt_text for c in ("cell", "scale", "arm", "display", "cheap_display", "tuned",
                                             "paper", "paper_where", "note", "bound")} | {"context": fmt_int},
              shown=["cell", "arm", "display", "cheap_display", "tuned", "paper", "note"])
    for cell, doc in results.speedups.items():
        records = results.compared_runs(cell)  # the runs a speed-up rests on
        if doc is None:
            t.add({"cell": cell, "scale": records[0].spec.scale, "context": records[0].spec.context,
                   "display": "missing",
                   "note": "no results/speedup file: some run of this cell has not finished"},
                  [r.name for r in records if r.summary])
            continue
        ref = paper.paper_speedup(doc["context"])
        for arm in views.arms(results):
            entry = doc["arms"].get(arm)
            if entry is None:
                continue
            s = entry["speedup"]
            interval = s.get("interval") or [None, None]
            runs = [b["run"] for p in entry.get("per_seed", []) for b in p.get("best", [])]
            runs += [tg["run"] for tg in doc.get("targets", [])]
            is_ngpt = arm == "ngpt" and ref is not None
            t.add({"cell": cell, "scale": doc["scale"], "context": doc["context"], "arm": arm,
                   "speedup": None if s["value"] is None else read_float(s["value"]), "bound": s.get("bound"),
                   "interval_lo": None if interval[0] is None else read_float(interval[0]),
                   "interval_hi": None if interval[1] is None else read_float(interval[1]),
                   "level": s.get("level"), "n_seeds": s.get("n_seeds"),
                   "display": "1 (baseline)" if arm == doc["baseline"] else _speedup_text(s),
                   "cheap_display": (_speedup_text(entry["cheap"]["speedup"])
                                     if arm != doc["baseline"] else None),
                   "tuned": tuned_text(doc, arm),
                   "paper": f"~{ref['factor']}x" if is_ngpt else None,
                   "paper_where": paper.where(ref) if is_ngpt else None,
                   "note": s.get("note")}, runs)
    return t


def measurable_text(doc: dict | None) -> str | None:
    """'1 to 4': the speed-ups a cell's budget range can give as numbers (per target; seeds that differ are
    listed); anything outside comes out as a bound."""
    if not doc or not doc.get("targets"):
        return None
    ranges = []
    for target in doc["targets"]:
        text = " to ".join(fmt_num(read_float(x)) for x in target["measurable"])
        if text not in ranges:
            ranges.append(text)
    return "; ".join(ranges)


def moved_targets(doc: dict | None) -> list[dict]:
    """The targets (one per seed) not at the grid's largest budget: every baseline run there diverged."""
    return [t for t in (doc or {}).get("targets", []) if not t["at_largest_budget"]]


def target_table(results: Results) -> Table:
    """The loss every speed-up is measured against: per cell and seed, its value, arm, budget and lr."""
    cols = ["cell", "seed", "loss", "arm", "budget", "lr", "run", "measurable", "note"]
    t = Table("speedup_target", "The speed-up target: the baseline's best final validation loss", cols,
              key=["cell", "seed"],
              headers={"loss": "target loss", "measurable": "measurable speed-ups"},
              formats={"cell": fmt_text, "seed": fmt_int, "loss": fmt_loss, "arm": fmt_text,
                       "budget": fmt_int, "lr": fmt_lr, "run": fmt_text, "measurable": fmt_text,
                       "note": fmt_text},
              shown=["cell", "seed", "loss", "arm", "budget", "lr", "measurable", "note"],
              note="measurable = target budget / largest budget to target budget / smallest budget: the "
                   "speed-ups the budgets run can give as numbers; outside that range only a bound exists.")
    for cell, doc in results.speedups.items():
        largest = max(doc["budgets"]) if doc else None
        for target in (doc or {}).get("targets", []):
            moved = not target["at_largest_budget"]
            t.add({"cell": cell, "seed": target["seed"], "loss": read_float(target["loss"]),
                   "arm": target["arm"], "budget": target["budget"], "lr": target["lr"], "run": target["run"],
                   "measurable": " to ".join(fmt_num(read_float(x)) for x in target["measurable"]),
                   "note": (f"not at the largest budget ({largest:,}): every {target['arm']} run there "
                            "diverged" if moved else None)}, [target["run"]])
    return t


def speedup_pivot(results: Results, long: Table) -> Table:
    """Cells x arms, with the range of speed-ups the cell can measure and the paper's nGPT factor beside."""
    arm_list = [a for a in views.arms(results) if a != results.params["speedup"]["baseline"]]
    cols = ["cell", *arm_list, "measurable", "paper_ngpt"]
    t = Table("speedup_by_cell", "Speed-up per cell beside the paper's", cols, key=["cell"],
              headers={"paper_ngpt": "paper: nGPT", "measurable": "measurable speed-ups (budget range)"},
              formats={c: fmt_text for c in cols})
    for cell in results.cells:
        rows = [(row, runs) for row, runs in zip(long.rows, long.runs, strict=True)
                if row[long.columns.index("cell")] == cell]
        values: dict = {"cell": cell}
        runs_all: list[str] = []
        for row, runs in rows:
            arm = row[long.columns.index("arm")]
            if arm in arm_list:
                values[arm] = row[long.columns.index("display")]
                runs_all += runs
        if rows and rows[0][0][long.columns.index("arm")] is None:
            values.update({a: "missing" for a in arm_list})
        spec = results.cell_runs(cell)[0].spec
        ref = paper.paper_speedup(spec.context)
        values["measurable"] = measurable_text(results.speedups.get(cell))
        values["paper_ngpt"] = (f"~{ref['factor']}x at {ref['context']:,} ({'/'.join(ref['scales'])})" if ref
                                else f"none at context {spec.context:,}")
        t.add(values, runs_all)
    return t


# ----------------------------------------------------------------------------------------------------------
# Loss


def final_loss_table(results: Results) -> Table:
    """Per cell and arm, the best final loss at every budget (mean over seeds) and the learning rate(s) that
    gave it: the numbers of the final-loss figure."""
    budgets = views.budgets(results)
    cols = ["cell", "arm"]
    headers, formats = {}, {"cell": fmt_text, "arm": fmt_text}
    for b in budgets:
        cols += [f"loss_{b}", f"lr_{b}", f"seeds_{b}"]
        headers[f"loss_{b}"] = f"loss at {b:,}"
        headers[f"lr_{b}"] = "best lr"
        formats[f"loss_{b}"], formats[f"lr_{b}"] = fmt_loss, lambda x: fmt_text(x if isinstance(x, str)
                                                                                else fmt_lr(x) if x else None)
    t = Table("final_loss", "Best final validation loss per arm and budget (over the learning-rate sweep, "
              "mean over seeds)", cols, key=["cell", "arm"], headers=headers, formats=formats,
              shown=[c for c in cols if not c.startswith("seeds_")])
    for cell in results.cells:
        best = views.best_runs(results, cell)
        for arm in views.arms(results):
            values: dict = {"cell": cell, "arm": arm}
            runs = []
            for b in budgets:
                chosen = [per[b] for (a, _), per in sorted(best.items()) if a == arm and b in per]
                if chosen:
                    values[f"loss_{b}"] = sum(r.final_val_loss for r in chosen) / len(chosen)
                    lrs = sorted({r.spec.lr for r in chosen})  # one per seed; usually the same
                    values[f"lr_{b}"] = lrs[0] if len(lrs) == 1 else ", ".join(fmt_lr(x) for x in lrs)
                    values[f"seeds_{b}"] = len(chosen)
                    runs += [r.name for r in chosen]
            t.add(values, runs)
    return t


# ----------------------------------------------------------------------------------------------------------
# Conditioning


CONDITION_COLUMNS = {
    "embed_in_cov_condition": "κ input emb. cov.",
    "embed_out_cov_condition": "κ output emb. cov.",
    "attn_head_condition_median": "κ attention, median over heads",
    "attn_condition_median": "κ attention (whole matrices), median",
    "mlp_condition_median": "κ MLP, median",
    "stable_rank_median": "stable rank, median",
    "effective_rank_median": "effective rank, median",
}


def conditioning_table(results: Results, variant: str = "effective") -> Table:
    cols = ["cell", "arm", "run", "budget", "lr", *CONDITION_COLUMNS]
    t = Table(f"conditioning_{variant}", f"Headline conditioning numbers ({variant} matrices)", cols,
              key=["cell", "arm"], headers=dict(CONDITION_COLUMNS),
              formats={"cell": fmt_text, "arm": fmt_text, "run": fmt_text, "budget": fmt_int, "lr": fmt_lr},
              shown=["cell", "arm", *CONDITION_COLUMNS],
              note="Each arm's best run at the largest budget (smallest seed). κ = condition number "
                   "σmax/σmin; ∞ = numerically singular (σmin/σmax below condition.singular_tol).")
    for cell in results.cells:
        for rep in views.representatives(results, cell):
            r = rep.record
            if r is None or r.conditioning is None:
                t.add({"cell": cell, "arm": rep.arm,
                       "run": rep.reason or f"{r.name}: no conditioning result"}, [r.name] if r else [])
                continue
            t.add({"cell": cell, "arm": rep.arm, "run": r.name, "budget": r.spec.budget, "lr": r.spec.lr,
                   **{k: _h(r, k, variant) for k in CONDITION_COLUMNS}}, [r.name])
    return t


def layer34_table(results: Results) -> Table:
    """Q/K condition numbers at the paper's layers 3 and 4 (1-based), ours beside the paper's."""
    cols = ["source", "cell", "arm", "run"]
    headers = {}
    for layer in PAPER_LAYERS:
        for kind in ("q", "k"):
            cols += [f"layer{layer}_{kind}_condition", f"layer{layer}_{kind}_head_condition_median"]
            headers[f"layer{layer}_{kind}_condition"] = f"L{layer} {kind.upper()} κ"
            headers[f"layer{layer}_{kind}_head_condition_median"] = f"L{layer} {kind.upper()} κ heads med."
    t = Table("layers34", "Attention Q and K at layers 3 and 4 (paper's 1-based numbering)", cols,
              key=["source", "cell", "arm"], headers=headers,
              formats={"source": fmt_text, "cell": fmt_text, "arm": fmt_text, "run": fmt_text},
              shown=[c for c in cols if c != "run"],
              note="κ = whole-matrix condition number; 'heads med.' = median over heads of the per-head "
                   "condition numbers. The paper's legends print one 'cond' per matrix and model (shown in "
                   "the κ columns); its captions say the panels show the singular values 'for all heads' "
                   "but not whether cond is per head, pooled or whole, so both of ours are shown. Paper: "
                   + "; ".join(f"{e['arm']} {e['scale']} layer {e['layer']}: {paper.where(e)}"
                               for e in paper.paper_numbers()["condition"]))
    paper_rows: dict[tuple[str, str], dict] = {}  # one row per (arm, scale), its layers side by side
    for entry in paper.paper_numbers()["condition"]:
        values = paper_rows.setdefault((entry["arm"], entry["scale"]), {
            "source": f"paper ({entry['scale']})", "cell": None, "arm": entry["arm"], "run": None})
        for kind in ("q", "k"):
            values[f"layer{entry['layer']}_{kind}_condition"] = float(entry[kind])
    for values in paper_rows.values():
        t.add(values, [])
    for cell in results.cells:
        for rep in views.representatives(results, cell):
            r = rep.record
            values = {"source": "this run", "cell": cell, "arm": rep.arm, "run": r.name if r else rep.reason}
            if r is not None and r.conditioning is not None:
                values.update({c: _h(r, c) for c in cols[4:]})
            t.add(values, [r.name] if r else [])
    return t


RENORM_COLUMNS = {
    "attn_head_condition_median": "κ attention, median over heads",
    "attn_condition_median": "κ attention (whole), median",
    "mlp_condition_median": "κ MLP, median",
    "embed_in_cov_condition": "κ input emb. cov.",
    "embed_out_cov_condition": "κ output emb. cov.",
}


REFERENCE_KEYS = {**{k: v for k, v in CONDITION_COLUMNS.items() if "condition" in k},
                  **{f"layer{layer}_{kind}_{what}": f"κ layer {layer} {kind.upper()}{label}"
                     for layer in PAPER_LAYERS for kind in ("q", "k")
                     for what, label in (("condition", ""),
                                         ("head_condition_median", ", median over heads"))}}


def reference_table(results: Results) -> Table:
    """Every headline κ of each arm's representative run beside its two references."""
    cols = ["cell", "arm", "metric", "trained", "init", "gaussian", "run"]
    t = Table("references", "Condition numbers: trained, at initialisation, and Gaussian of the same shape",
              cols, key=["cell", "arm", "metric"],
              headers={"init": "at initialisation (same seed)", "gaussian": "Gaussian median, same shape"},
              formats={"cell": fmt_text, "arm": fmt_text, "metric": fmt_text, "run": fmt_text},
              shown=["cell", "arm", "metric", "trained", "init", "gaussian"],
              note="Effective matrices. init = the same run's step-0 matrices, rebuilt from its seed exactly "
                   "as train builds them; gaussian = the median κ of seeded Gaussian matrices of the same "
                   "shape (condition/reference.py).")
    for cell, arm, r in _analysed_representatives(results):
        for key, label in REFERENCE_KEYS.items():
            t.add({"cell": cell, "arm": arm, "metric": label, "run": r.name,
                   **{source: figures.reference_value(r, source, key)
                      for source in ("trained", "init", "gaussian")}}, [r.name])
    return t


def renormalization_table(results: Results) -> Table:
    cols = ["cell", "arm", "variant", "run", *RENORM_COLUMNS]
    t = Table("renormalization", "Post-hoc renormalization: the same matrices with unit vectors along the "
              "embedding dimension", cols, key=["cell", "arm", "variant"], headers=dict(RENORM_COLUMNS),
              formats={"cell": fmt_text, "arm": fmt_text, "variant": fmt_text, "run": fmt_text},
              shown=["cell", "arm", "variant", *RENORM_COLUMNS],
              note="effective = the linear map the forward pass applies to its normalised input "
                   "(multipliers, scalars, nGPT's s_u/s_v/s_z and the preceding RMSNorm gain included, in "
                   "float64; condition/effective.py); renormalized = the same after nGPT's normalization "
                   "(the paper's Fig. 10 dotted lines); underlying = the raw parameter.")
    for cell, arm, r in _analysed_representatives(results):
        for variant in r.conditioning.get("variants", []):
            t.add({"cell": cell, "arm": arm, "variant": variant, "run": r.name,
                   **{k: _h(r, k, variant) for k in RENORM_COLUMNS}}, [r.name])
    return t


def _analysed_representatives(results: Results) -> Iterator[tuple[str, str, RunRecord]]:
    """(cell, arm, run) of each arm's representative run per cell that the condition stage analysed."""
    for cell in results.cells:
        for rep in views.representatives(results, cell):
            if rep.record is not None and rep.record.conditioning is not None:
                yield cell, rep.arm, rep.record


# ----------------------------------------------------------------------------------------------------------
# Settle it: which property tracks the speed-up


SETTLE_METRICS = {"eff_attn_head_condition_median": "κ attention, median over heads",
                  "eff_embed_in_cov_condition": "κ input emb. cov."}


def settle_table(arm_rows: pd.DataFrame, cross: pd.DataFrame) -> Table:
    """Per (cell, arm): place in the design, speed-up and conditioning (crossarm.arm_table)."""
    cols = ["cell", "arm", "norms", "conditioning", "speedup", "speedup_display", *SETTLE_METRICS,
            "final_val_loss", "n_seeds"]
    t = Table("settle", "Speed-up against conditioning, per arm", cols, key=["cell", "arm"],
              headers={"speedup_display": "speed-up", "final_val_loss": "final val loss (mean)",
                       "n_seeds": "seeds",
                       "norms": "weight norms", "conditioning": "conditioning", **SETTLE_METRICS},
              formats={"cell": fmt_text, "arm": fmt_text, "norms": fmt_text, "conditioning": fmt_text,
                       "speedup_display": fmt_text, "final_val_loss": fmt_loss, "n_seeds": fmt_int},
              shown=["cell", "arm", "norms", "conditioning", "speedup_display", *SETTLE_METRICS,
                     "final_val_loss", "n_seeds"],
              note="Conditioning of each arm's best-learning-rate runs at its largest budget, mean over "
                   "seeds (report/crossarm.py arm_table).")
    for _, row in arm_rows.iterrows():
        chosen = cross[(cross["cell"] == row["cell"]) & (cross["arm"] == row["arm"])
                       & cross["best_lr_for_budget"] & (cross["budget"] == row["budget"])]
        t.add({"cell": row["cell"], "arm": row["arm"], "norms": row["norms"],
               "conditioning": row["conditioning"],
               "speedup": _float(row["speedup"]), "speedup_display": row["speedup_display"] or None,
               **{m: _float(row.get(m)) for m in SETTLE_METRICS},
               "final_val_loss": _float(row["final_val_loss"]), "n_seeds": int(row["n_seeds"])},
              list(chosen["run"]))
    return t


def _float(x) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def tracking_table(results: Results, rho: pd.DataFrame, cross: pd.DataFrame) -> Table:
    cols = ["cell", "metric", "rho", "n_arms", "bounds"]
    t = Table("tracking", "Rank correlation across arms of the speed-up with each conditioning number", cols,
              key=["cell", "metric"], headers={"rho": "Spearman ρ", "n_arms": "arms",
                                               "bounds": "arms entering as a bound"},
              formats={"cell": fmt_text, "metric": fmt_text, "n_arms": fmt_int, "bounds": fmt_text,
                       "rho": lambda x: fmt_num(x, 2)},
              note="report/crossarm.py tracking: within a cell, across arms. A bound enters at its bound "
                   "value, which can misplace that arm's rank: read a ρ whose cell has bounds with care. A "
                   "negative ρ means: the better conditioned (smaller κ), the larger the speed-up.")
    chosen = cross[cross["best_lr_for_budget"]]
    chosen = chosen[chosen["budget"] == chosen.groupby(["cell", "arm"])["budget"].transform("max")]
    # The report shows the headline numbers of the effective matrices (the speed-up package has them all).
    rho = rho[rho["metric"].isin([f"eff_{k}" for k in CONDITION_COLUMNS])]
    for _, row in rho.iterrows():
        doc = results.speedups.get(row["cell"]) or {}
        bounds = [f"{arm} ({entry['speedup']['display']})" for arm, entry in doc.get("arms", {}).items()
                  if entry["speedup"].get("bound")]
        runs = chosen[chosen["cell"] == row["cell"]]["run"]  # the runs arm_table averaged
        t.add({"cell": row["cell"], "metric": row["metric"], "rho": float(row["rho"]),
               "n_arms": int(row["n_arms"]), "bounds": ", ".join(bounds) or None}, list(runs))
    return t


# The comparisons that separate the two accounts, each arm against the baseline, within a cell.
COMPARISONS = (
    ("gpt-orth", "conditioning fixed, norms free"),
    ("gpt-rownorm", "norms fixed, conditioning free"),
    ("ngpt", "norms fixed, conditioning good"),
)


def _interval(s: dict) -> tuple[float, float] | None:
    """The range the speed-up is known to lie in: the interval, a half-line for a bound, a point otherwise."""
    if s.get("value") is None:
        return None
    v = read_float(s["value"])
    if s.get("bound") == ">":
        return (v, math.inf)
    if s.get("bound") == "<":
        return (0.0, v)
    if s.get("interval"):
        return (read_float(s["interval"][0]), read_float(s["interval"][1]))
    return (v, v)


def compare_to_baseline(s: dict) -> str:
    """faster | slower | not distinguishable from 1 (only when the interval or bound spans 1), from one
    arm's speed-up entry."""
    rng = _interval(s)
    if rng is None:
        return "no estimate"
    lo, hi = rng
    if s.get("bound") is None and not s.get("interval"):
        # A point estimate without an interval (one seed): report the direction but not as resolved.
        return f"{'faster' if lo > 1 else 'slower' if lo < 1 else 'equal'} (one seed: no interval)"
    # A bound is strict: "<1" (the arm never reached the baseline's loss) means below 1, i.e. slower;
    # ">1" (it beat the target already at the smallest budget) means faster.
    if lo > 1 or (s.get("bound") == ">" and lo >= 1):
        return "faster"
    if hi < 1 or (s.get("bound") == "<" and hi <= 1):
        return "slower"
    return "not distinguishable from 1"


def comparisons_table(results: Results) -> Table:
    cols = ["cell", "arm", "design", "speedup_display", "verdict", "measurable"]
    t = Table("comparisons", "The 2x2: each probe arm against the baseline", cols, key=["cell", "arm"],
              headers={"speedup_display": "speed-up", "design": "what it fixes",
                       "measurable": "measurable speed-ups"},
              formats={c: fmt_text for c in cols},
              note="If conditioning is what speeds nGPT up, gpt-orth should be faster than gpt and "
                   "gpt-rownorm should not be, unless its conditioning improved too. 'faster' and 'slower' "
                   "are claimed only when the whole interval (or bound) lies on one side of 1: a '<1' bound "
                   "(the arm never reached the baseline's loss) is 'slower'.")
    for cell, doc in results.speedups.items():
        if doc is None:
            continue
        for arm, design in COMPARISONS:
            entry = doc["arms"].get(arm)
            if entry is None:
                continue
            s = entry["speedup"]
            runs = [b["run"] for p in entry.get("per_seed", []) for b in p.get("best", [])]
            t.add({"cell": cell, "arm": arm, "design": design, "speedup_display": _speedup_text(s),
                   "verdict": compare_to_baseline(s), "measurable": measurable_text(doc)},
                  runs + [tg["run"] for tg in doc.get("targets", [])])
    return t


# ----------------------------------------------------------------------------------------------------------
# Provenance


def provenance_table(results: Results) -> Table:
    cols = ["run", "status", "checkpoint_sha256", "train_sha256", "val_sha256", "code_revision",
            "summary_sha256", "conditioning_sha256"]
    t = Table("provenance", "Provenance of every run", cols, key=["run"],
              headers={"checkpoint_sha256": "checkpoint sha256", "train_sha256": "train.bin sha256",
                       "val_sha256": "val.bin sha256", "code_revision": "code",
                       "summary_sha256": "summary sha256", "conditioning_sha256": "conditioning sha256"},
              formats={"run": fmt_text, "status": fmt_text, **{c: fmt_sha for c in cols[2:]}},
              note="Hashes shortened to 12 characters here; reports/tables/provenance.csv and "
                   "reports/provenance.json have them in full.")
    for r in results.runs.values():
        s = r.summary or {}
        data = s.get("data") or {}
        t.add({"run": r.name, "status": r.status, "checkpoint_sha256": s.get("checkpoint_sha256"),
               "train_sha256": data.get("train_sha256"), "val_sha256": data.get("val_sha256"),
               "code_revision": s.get("code_revision"),
               "summary_sha256": r.summary_sha256, "conditioning_sha256": r.conditioning_sha256}, [r.name])
    return t

