"""The section "What was run": the grid, the data, the compute spent, the learning-rate sweeps, and every
run's status.

The sweeps: a grid that grows by its results (ngptlab.plan.prune, ngptlab.plan.seeds) no longer sweeps every
learning rate at every budget: above a pruning budget only the K kept learning rates run (successive
halving), and the seeds added beyond train.seeds run only the learning rate chosen on train.seeds' sweep
(ngptlab.speedup.lr_policy, speedup.lr_policy), the one every seed is estimated at. A reader of a
speed-up needs both facts: an arm tuned over fewer learning rates at some budget is compared as the table
says, not as the sweep promises.

The schedule: with train.schedule: wsd (ngptlab.grid.trunks; Hägele et al. 2024, arXiv 2405.18392) the
budgets of one (scale, context, arm, learning rate, seed) share a trunk; the grid table and the text say so,
and the compute table counts a shared trunk once.
"""

from __future__ import annotations

import statistics

from ngptlab import layout
from ngptlab import weight_dtype as weight_dtypes
from ngptlab.grid.resources import run_shape
from ngptlab.grid.sweeps import held_back, lr_sweep, pruning_of
from ngptlab.grid.trunks import enumerate_segments
from ngptlab.models.size import causal_flops_per_token
from ngptlab.paper import WSD_CITATION
from ngptlab.report.kit import views
from ngptlab.report.kit.crossarm import arm_design
from ngptlab.report.kit.document import Bullets, Callout, Document, Heading, TableBlock, Text, run_names
from ngptlab.report.kit.load import Results, RunRecord
from ngptlab.report.kit.table import Table, fmt_int, fmt_loss, fmt_lr, fmt_sha, fmt_text, seeds_text
from ngptlab.schedule import calibration_budgets, cooldown_fraction, cooldown_shape, is_wsd
from ngptlab.settings import Train


def section(doc: Document, results: Results) -> None:
    """The grid, the data, the compute, the sweeps, the runs missing or diverged, each run's status."""
    doc.add(Heading("What was run", "what-was-run"))
    doc.add(Text(
        "Every run is one (scale, context, arm, token budget, learning rate, seed). "
        + protocol(results.params.train) + " The learning rate is swept per arm, the only "
        "hyperparameter the paper tuned. The arms and what they fix:"))
    doc.add(Bullets([f"`{arm}`: weight norms {arm_design(arm)[0]}, conditioning "
                     f"{arm_design(arm)[1]}" for arm in views.arms(results)]))
    doc.add(TableBlock(grid_table(results)), TableBlock(data_table(results)),
            TableBlock(compute_table(results)))
    _sweeps(doc, results)
    missing = results.missing("train")
    diverged = [n for n, r in results.runs.items() if r.status == "diverged"]
    if missing:
        doc.add(Callout(f"{len(missing)} run{'s are' if len(missing) > 1 else ' is'} missing (failed, killed "
                        "or not run: no results/train/<cell>/<run>/summary.json): "
                        + run_names(missing)
                        + ". Why a run failed is in its log, logs/train/<cell>/<run>.log. Everything below "
                        "is rendered from the runs that exist."))
    if diverged:
        blew = {n: (results.runs[n].summary.get("diagnostics") or {}).get("blew_up") for n in diverged}
        kinds = "; ".join(f"`{n}`: {', '.join(k)}" for n, k in blew.items() if k)
        doc.add(Callout(f"{len(diverged)} run{'s' if len(diverged) > 1 else ''} diverged (loss non-finite or "
                        "above train.diverge_loss); they are shown as such and left out of every speed-up: "
                        + run_names(diverged) + "."
                        + (f" The matrix kinds whose gradients blew up at the failed step: {kinds}." if kinds
                           else ""), kind="note"))
    doc.add(TableBlock(status_table(results)))
    doc.add(Text("Every run, with its final loss, tokens and steps: [Table: every run](#table-runs) in "
                 "the provenance appendix."))


# ----------------------------------------------------------------------------------------------------------
# The grid


def describe(train: Train) -> str:
    """The grid table's schedule row."""
    if not is_wsd(train):
        return "cosine (the paper's): each budget its own run"
    text = (f"WSD: budgets share a trunk; each cools down over the last {cooldown_fraction(train):.0%} "
            f"of its budget, {cooldown_shape(train)}")
    calibration = calibration_budgets(train)
    if calibration:
        text += f"; cosine calibration runs at {', '.join(f'{b:,}' for b in calibration)}"
    return text


def protocol(train: Train) -> str:
    """What the grid section says about the schedule."""
    if not is_wsd(train):
        return "Each token budget is its own run with its own cosine schedule (the paper's Fig. 2 method)."
    text = ("Schedule: WSD (warmup, stable, decay), not the paper's cosine. The budgets of one (scale, "
            "context, arm, learning rate, seed) share one trunk, warmed up and then trained at a constant "
            "learning rate once; each budget's branch leaves the trunk at its branch point and cools down to "
            f"0 over the last {cooldown_fraction(train):.0%} of its budget ({cooldown_shape(train)} shape; "
            f"{WSD_CITATION}).")
    calibration = calibration_budgets(train)
    if calibration:
        text += (f" Cosine runs at {', '.join(f'{b:,}' for b in calibration)} tokens (every arm, learning "
                 "rate and seed) calibrate WSD against the paper's schedule ([Calibration](#calibration)); "
                 "they enter no comparison of arms.")
    return text


def grid_table(results: Results) -> Table:
    train = results.params.train
    t = Table("grid", "The grid", ["item", "value"], formats={"value": fmt_text}, key=["item"])
    t.add({"item": "scales", "value": ", ".join(train.scales)})
    t.add({"item": "contexts", "value": ", ".join(f"{c:,}" for c in train.contexts)})
    t.add({"item": "arms", "value": ", ".join(views.arms(results))})
    t.add({"item": "token budgets", "value": ", ".join(f"{b:,}" for b in views.budgets(results))})
    t.add({"item": "schedule", "value": describe(train)})
    if weight_dtypes.of(train) != [weight_dtypes.FP32]:  # an fp32 grid's table as before
        t.add({"item": "weight dtype", "value": weight_dtypes.describe(train)})
    for scale in train.scales:
        for context in train.contexts:
            lrs = "; ".join(f"{arm} {', '.join(fmt_lr(x) for x in lr_sweep(train, scale, context, arm))}"
                            for arm in views.arms(results))
            t.add({"item": f"learning rates ({scale}, context {context})", "value": lrs})
    t.add({"item": "seeds", "value": ", ".join(str(s) for s in train.seeds)})
    t.add({"item": "batch (sequences, at every context)", "value": f"{train.batch_sequences:,}"})
    t.add({"item": "warmup (steps, arms that warm up)",
           "value": f"{train.warmup_steps:,}, at most {train.warmup_max_fraction:.0%} of a run's "
                    "steps"})
    counts = views.status_counts(list(results.runs.values()))
    t.add({"item": "runs", "value": f"{len(results.runs)} in the grid: {counts['completed']} completed, "
           f"{counts['diverged']} diverged, {counts['missing']} missing"}, list(results.runs))
    return t


def data_table(results: Results) -> Table:
    t = Table("data", "The data", ["item", "value"], formats={"value": fmt_text}, key=["item"])
    meta = results.meta
    source = results.params.prepare.source
    t.add({"item": "source", "value": f"{source.name} ({source.kind})"})
    if meta is None:
        t.add({"item": "meta.json", "value": f"missing: {layout.tokens_dir(results.source)}/meta.json"})
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


# ----------------------------------------------------------------------------------------------------------
# The compute


def _median_timing(records: list[RunRecord], key: str) -> float | None:
    """The median of a timing file's `key` over the runs that have one and a value (None: none has)."""
    values = [float(r.timing[key]) for r in records if r.timing and r.timing.get(key) is not None]
    return statistics.median(values) if values else None


def _median_causal_mfu(records: list[RunRecord], train: Train) -> float | None:
    """The median causal MFU: each run's recorded MFU times its causal over its counted FLOPs per token."""
    values = []
    for r in records:
        if r.timing and r.timing.get("mfu") is not None and r.timing.get("flops_per_token"):
            counted = float(r.timing["flops_per_token"])
            causal = causal_flops_per_token(counted, run_shape(train, r.spec.scale), r.spec.context)
            values.append(float(r.timing["mfu"]) * causal / counted)
    return statistics.median(values) if values else None


def fmt_mfu(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def timing_note(results: Results) -> str:
    """What the compute table's speeds were read from. Measured speed comes from results/timing/, which is no
    stage's input or output in either tool: timings differ between two trainings of the same run, so they
    must make nothing stale, and the report names the files it read instead."""
    count, digest = results.timing_digest()
    read = (f"read from {count} timing files (sha256 of their paths and hashes {fmt_sha(digest)}; "
            "provenance.json lists each)" if count else "no timing file read")
    return (f"Measured speeds are not part of the results' lineage: {read}. No stage of either tool depends "
            "on them, so a run trained again rewrites its timing file and reruns nothing, and these figures "
            "change only when the report renders again.")


def compute_table(results: Results) -> Table:
    summed = ["completed", "diverged", "missing", "tokens", "train_flops"]
    cols = ["cell", *summed, "tokens_per_s", "mfu", "mfu_causal"]
    t = Table("compute", "Compute spent per cell", cols, key=["cell"],
              headers={"train_flops": "train FLOPs", "tokens": "tokens trained",
                       "tokens_per_s": "tokens/s (median)", "mfu": "MFU (median)",
                       "mfu_causal": "causal MFU (median)"},
              formats={"cell": fmt_text, "completed": fmt_int, "diverged": fmt_int, "missing": fmt_int,
                       "tokens": fmt_int, "tokens_per_s": fmt_int, "mfu": fmt_mfu, "mfu_causal": fmt_mfu},
              note="tokens/s and MFU: each run's timed steps only (results/timing/: timed_steps of steps), "
                   "from forward to update, without evaluations or checkpoints: CUDA events on a GPU, "
                   "time.perf_counter on a CPU (timing_method). Left out, and counted by reason in "
                   "excluded_steps: the first step after every start or resume of a compiled run, steps that "
                   "recompiled, the first steps of each start on a GPU, and steps computed twice after a "
                   "non-finite loss. tokens/s is of all the run's processes together; each figure is the "
                   "median over the cell's runs with a timing file. MFU is against the exact GPU model's "
                   "dense bf16 peak, n/a for an unlisted model or a CPU (train.peak_tflops declares one); "
                   "its FLOP count includes the full T x T attention square (PaLM's count, the reference "
                   "implementations' convention), about twice what a causal kernel computes; causal MFU "
                   "counts the attention term half (6 N + 6 L d T, models/size.py), from the same timing "
                   "files. " + timing_note(results))
    rows, train = [], results.params.train
    for cell in results.cells:
        records = results.cell_runs(cell)
        done = [r for r in records if r.summary]
        counts = views.status_counts(records)
        tokens, flops = compute_spent(results, cell, done)  # a shared WSD trunk counted once
        rows.append(({"cell": cell, **counts, "tokens": tokens, "train_flops": flops,
                      "tokens_per_s": _median_timing(done, "tokens_per_s"),
                      "mfu": _median_timing(done, "mfu"), "mfu_causal": _median_causal_mfu(done, train)},
                     [r.name for r in done]))
    for values, runs in rows:
        t.add(values, runs)
    if len(rows) > 1:
        done = [r for r in results.runs.values() if r.summary]
        total = {c: sum(v[c] for v, _ in rows) for c in summed}
        t.add({"cell": "all", **total, "tokens_per_s": _median_timing(done, "tokens_per_s"),
               "mfu": _median_timing(done, "mfu"), "mfu_causal": _median_causal_mfu(done, train)},
              [r for _, runs in rows for r in runs])
    return t


def compute_spent(results: Results, cell: str, done: list[RunRecord]) -> tuple[int, float]:
    """Tokens and FLOPs the cell's finished runs trained, each once: a WSD run its branch (its timing file's
    trained_tokens), plus the segments of its trunks (theirs); a run without a timing record its budget."""
    tokens, flops = 0, 0.0
    for record in done:
        budget = int(record.summary.get("tokens") or 0)
        trained = int((record.timing or {}).get("trained_tokens", budget))
        tokens += trained
        flops += float(record.summary.get("train_flops") or 0) * (trained / budget if budget else 0)
    for segment in enumerate_segments(results.params):
        timing = results.segment_timing.get(segment.name)
        if segment.trunk.cell == cell and timing is not None:
            tokens += int(timing["trained_tokens"])
            flops += float(timing.get("flops_per_token") or 0) * timing["trained_tokens"]
    return tokens, flops


# ----------------------------------------------------------------------------------------------------------
# The sweeps


def grows(train: Train) -> bool:
    """Whether some budget runs other learning rates or seeds than the sweep x train.seeds."""
    return bool(train.pruned_sweeps or train.added_seeds
                or train.protocol)


def _lrs(values: list[float]) -> str:
    return ", ".join(fmt_lr(v) for v in sorted(values)) or "none"


def stopped_why(train: Train, scale: str, context: int, arm: str, budget: int) -> str | None:
    """Why the learning rates of the arm's sweep missing at this budget stopped: the pruning that dropped
    them, or the protocol that holds the budget back until that pruning."""
    if held_back(train, scale, context, arm, budget):
        after = train.protocol.prune_sweeps.after_budget
        return (f"held back until `ngptlab plan --prune-sweeps` has chosen its learning rates from the "
                f"results up to {after:,}")
    pruned = pruning_of(train, scale, context, arm, budget)
    if pruned is None:
        return None
    best = f" ({fmt_lr(pruned.best_lr)})" if pruned.best_lr else ""
    below = f" and the {pruned.keep - 1} below it" if pruned.keep > 1 else ""
    return f"pruned after {pruned.after_budget:,}: the best learning rate there{best}{below} run on"


def sweeps_table(results: Results) -> Table:
    train = results.params.train
    cols = ["cell", "arm", "budget", "learning_rates", "seeds", "added_seeds", "stopped", "why"]
    t = Table("sweeps", "Learning rates and seeds run at each budget", cols, key=["cell", "arm", "budget"],
              headers={"learning_rates": "learning rates (train.seeds)", "added_seeds": "added seeds (lr)",
                       "stopped": "not run", "why": "why not"},
              formats={c: fmt_text for c in cols} | {"budget": fmt_int},
              note="Successive halving (ngptlab plan --prune-sweeps) keeps, above a budget whose results are "
                   "in, each arm's best learning rate there and the ones below it (the optimum falls as runs "
                   "get longer); added seeds (ngptlab plan --add-seeds) run only the learning rate chosen "
                   "on train.seeds' sweep at the budgets speedup.lr_policy reads (crossing: up to the "
                   "budget past the arm's crossing of the target), where every seed's speed-up is "
                   "estimated.")
    for cell in results.cells:
        records = results.compared_runs(cell)
        if not records:
            continue
        scale, context = records[0].spec.scale, records[0].spec.context
        for arm in train.arms:
            full = lr_sweep(train, scale, context, arm)
            for budget in sorted(train.budgets):
                here = [r for r in records if r.spec.arm == arm and r.spec.budget == budget]
                swept = sorted({r.spec.lr for r in here if r.spec.seed in train.seeds})
                added = sorted({(r.spec.lr, r.spec.seed) for r in here if r.spec.seed not in train.seeds})
                stopped = [lr for lr in full if lr not in swept]
                t.add({"cell": cell, "arm": arm, "budget": budget, "learning_rates": _lrs(swept),
                       "seeds": ", ".join(map(str, train.seeds)) if swept else None,
                       "added_seeds": "; ".join(f"{s} ({fmt_lr(lr)})" for lr, s in added) or None,
                       "stopped": _lrs(stopped) if stopped else None,
                       "why": stopped_why(train, scale, context, arm, budget) if stopped else None},
                      [r.name for r in here])
    return t


def _sweeps(doc: Document, results: Results) -> None:
    """The sweeps' table, for a grid that prunes or adds seeds; one sentence otherwise."""
    train = results.params.train
    if not grows(train):
        doc.add(Text(f"Every arm ran its whole learning-rate sweep at every budget, with "
                     f"{seeds_text(train.seeds)}."))
        return
    doc.add(TableBlock(sweeps_table(results)))


# ----------------------------------------------------------------------------------------------------------
# The runs


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
