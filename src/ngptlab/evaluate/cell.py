"""The evaluate job of one cell: zero-shot accuracy of its selected runs, through lm-eval.

Which runs: each arm's best-learning-rate run at each budget (evaluate/selection.py). The job is per
(scale, context) cell, not per run, because which run is best is only known once the cell's speed-up exists,
while the DAG must stay static (dvc.yaml mirrors it): one job per cell depends on every checkpoint of the
cell and the cell's speed-up, and picks its runs at run time. A selected (arm, budget, seed) without a
completed run is a named hole.

Tasks (`evaluate.tasks`): offline tasks built from the validation tokens and any task lm-eval knows, each
through lm-eval's own evaluator, zero-shot (evaluate/harness.py).

results/evaluate/<cell>.json:
  cell, budgets_selected ("largest" | "all"), lm_eval_version, settings{tasks, limit, seed, context_words,
  continuation_words, device},
  tasks{<task>: {kind "offline" | "lm-eval", examples?, data{path, sha256}?}},
  runs [{run, arm, budget, lr, seed, final_val_loss, checkpoint_sha256,
         results{<task>: {acc, acc_stderr, acc_norm?, acc_norm_stderr?, n}}}],
  holes [{arm, budget, seed, reason}]

Partial results and exit 75 (evaluate/partial.py): each run's entry is written, as soon as the run is done,
to results/evaluate/<cell>.partial/<run>.json with what it was made from (the checkpoint's sha256, settings,
tasks, lm_eval version). A job reuses an entry only when all of those equal its own, and says in its log
which runs it reused and which it evaluated again and why. The job keeps its own clock (ngptlab.jobclock:
`train.max_job_minutes`, the partition's limit, and the Slurm job's end time): before each run after its
first, when less than 1.5 times its longest run so far is left, it stops without the document and exits
75 (EXIT_RESUMABLE); the workflow's retry continues from the partial files. Once the document is written,
the partial directory is removed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from ngptlab import layout
from ngptlab.checkpoint import load_model, sha256_file
from ngptlab.device import resolve_device
from ngptlab.errors import CheckpointError, ParamsError
from ngptlab.evaluate import partial
from ngptlab.evaluate.harness import evaluate_model, progress_bars, ready_tasks
from ngptlab.evaluate.selection import select_runs
from ngptlab.grid.enumeration import enumerate_cells
from ngptlab.jobclock import job_clock
from ngptlab.results import write_json
from ngptlab.settings import Params
from ngptlab.speedup.arm_records import RunEntry
from ngptlab.speedup.document import read_document

# Another run starts only while the job has this many times its longest run so far left: a margin for a run
# slower than those before it (another arm, a busier machine).
RESERVE_FACTOR = 1.5


def output_path(root: str | Path, cell: str) -> Path:
    return Path(root) / layout.evaluate_file(cell)


@dataclass(frozen=True)
class CellOutcome:
    """What one evaluate job got done. `document` is None when the job's clock stopped it before every
    selected run had results; its finished runs wait in the partial files for the next job."""

    document: dict | None
    done: int  # selected runs with results: reused from an earlier job or evaluated in this one
    remaining: int  # selected runs this job did not reach
    reused: int


def run_entry(run: RunEntry, checkpoint_sha256: str, results: dict) -> dict:
    """A run's entry in `runs[]`: its speed-up record's identity and loss, its checkpoint, its accuracies."""
    return {"run": run.run, "arm": run.arm, "budget": run.budget, "lr": run.lr, "seed": run.seed,
            "final_val_loss": run.final_val_loss, "checkpoint_sha256": checkpoint_sha256, "results": results}


def evaluate_cell(params: Params, cell: str, root: str | Path, progress: bool = True) -> CellOutcome:
    """Evaluate the cell's selected runs, each stored as a partial file when done (reused by a later job
    when made from the same checkpoint and settings), and write results/evaluate/<cell>.json; or stop
    early, without the document, when the job's clock (train.max_job_minutes) would not fit another run.
    `progress`: lm-eval's and datasets' bars on stderr."""
    with progress_bars(progress):
        return _evaluate_cell(params, cell, Path(root))


def _evaluate_cell(params: Params, cell: str, root: Path) -> CellOutcome:
    import lm_eval

    from ngptlab.prepare.cache import default_cache_dir
    from ngptlab.prepare.tokenizer import gpt2_encoding

    if cell not in enumerate_cells(params):
        raise ParamsError(f"cell {cell!r} is not in the grid of this params file; "
                          f"cells: {', '.join(enumerate_cells(params))}")
    cfg = params.evaluate
    speedup = read_document(root / layout.speedup_file(cell), "the cell's speed-up")
    selected, holes = select_runs(params, cell, speedup)
    tasks, manager = ready_tasks(params, root)
    device = resolve_device(cfg.device, "evaluate.device").type
    enc = gpt2_encoding(default_cache_dir())
    logging.getLogger("lm-eval").setLevel(logging.ERROR)
    head = {"cell": cell, "budgets_selected": cfg.budgets, "lm_eval_version": lm_eval.__version__,
            # batch_size and device change the accuracies at float round-off only: recorded, in no key
            "settings": {k: getattr(cfg, k) for k in ("tasks", "limit", "seed", "context_words",
                                                      "continuation_words", "batch_size")}
            | {"device": device},
            "tasks": tasks}
    clock = job_clock(params.train.max_job_minutes)
    entries, reused, longest_s = [], 0, None
    for run in selected:
        started = time.perf_counter()
        ckpt = root / layout.run_dir(cell, run.run) / "model.safetensors"
        if not ckpt.is_file():
            raise CheckpointError(f"{ckpt}: missing (run {run.run} is selected by the cell's speed-up)")
        digest = sha256_file(ckpt)  # once per run: for the reuse check and for the entry
        basis = partial.made_from(head, digest)
        stored, why_not = partial.read(root, cell, run.run, basis)
        if stored is not None:  # its identity and loss as the speed-up has them now, its accuracies stored
            entries.append(run_entry(run, digest, stored["results"]))
            reused += 1
            print(f"{run.run}: reused from an earlier job", flush=True)
            continue
        # Every job evaluates at least one run, so that each makes progress however late it started.
        if longest_s is not None and clock.must_stop(RESERVE_FACTOR * longest_s):
            return CellOutcome(None, done=len(entries), remaining=len(selected) - len(entries), reused=reused)
        if why_not:
            print(f"{run.run}: evaluating again: {why_not}", flush=True)
        model, _ = load_model(ckpt, device="cpu", expected_arm=run.arm)
        results = evaluate_model(model, enc.encode_ordinary, manager, list(tasks), cfg, device)
        entries.append(run_entry(run, digest, results))
        partial.write(root, cell, entries[-1], basis)
        longest_s = max(longest_s or 0.0, time.perf_counter() - started)
        print(f"{run.run}: " + ", ".join(f"{t} acc {r['acc']:.3f}" for t, r in results.items())
              + f" ({time.perf_counter() - started:.1f} s)", flush=True)
    document = {**head, "runs": entries, "holes": holes}
    write_json(output_path(root, cell), document)
    partial.remove(root, cell)  # only now: until the document exists, the partial files are the results
    return CellOutcome(document, done=len(entries), remaining=0, reused=reused)
