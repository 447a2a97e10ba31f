"""The tables of the report's sections that have no module of their own (what was run, the loss curves,
conditioning, provenance), built from the loaded results (report/load.py). The speed-up and settle-it
sections keep theirs beside their text: report/speedup.py and report/settle.py.

Each builder returns a report.table.Table whose rows carry the runs behind them, for the provenance.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator

from ngptlab.grid.sweeps import lr_sweep
from ngptlab.report import figures, paper, schedule, views
from ngptlab.report.load import Results, RunRecord
from ngptlab.report.table import Table, fmt_int, fmt_loss, fmt_lr, fmt_sha, fmt_text
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
              note="tokens/s and MFU: each run's timed steps only (results/timing/: timed_steps of steps), "
                   "from forward to update, without evaluations or checkpoints: CUDA events on a GPU, "
                   "time.perf_counter on a CPU (timing_method). Left out, and counted by reason in "
                   "excluded_steps: the first step after every start or resume of a compiled run, steps that "
                   "recompiled, the first steps of each start on a GPU, and steps computed twice after a "
                   "non-finite loss. tokens/s is of all the run's processes together; each figure is the "
                   "median over the cell's runs with a timing file. MFU is against the exact GPU model's "
                   "dense bf16 peak, n/a for an unlisted model or a CPU (train.peak_tflops declares one); "
                   "its FLOP count includes the full T x T attention square, about twice what a causal "
                   "kernel computes at long contexts.")
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

