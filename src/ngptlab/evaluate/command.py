"""`ngptlab evaluate --cell CELL`: zero-shot accuracy of a cell's selected runs, through lm-eval.

Which runs: each arm's best-learning-rate run at each budget, as the cell's speed-up recorded it
(results/speedup/<cell>.json, `runs[].best_lr_for_budget`), at the largest budget of the grid
(`evaluate.budgets: largest`) or at every budget (`all`). The job is per (scale, context) cell, not per run,
because which run is best is only known once the cell's speed-up exists, while the DAG must stay static
(dvc.yaml mirrors it): one job per cell depends on every checkpoint of the cell and the cell's speed-up, and
picks its runs at run time. A selected (arm, budget, seed) without a completed run is a named hole.

Tasks (`evaluate.tasks`): the offline tasks of evaluate/tasks.py, built from data/tokens/<source>/val.bin
into data/evaluate/<source>/ (jsonl + lm-eval YAML), and any task lm-eval knows (its own, e.g. the paper's
arc_easy, hellaswag, winogrande, wsc273, lambada_openai, which load from the Hub, or YAMLs in
`evaluate.task_dirs`). Every task runs through lm-eval's own evaluator, zero-shot, `evaluate.limit` examples.

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

import argparse
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ngptlab import layout
from ngptlab.checkpoint import load_model, sha256_file
from ngptlab.device import resolve_device
from ngptlab.errors import CheckpointError, NgptlabError, ParamsError
from ngptlab.evaluate import partial
from ngptlab.evaluate.tasks import OFFLINE_EXAMPLES, OFFLINE_TASKS, TaskSettings, build_offline_tasks
from ngptlab.grid.enumeration import compared_runs, enumerate_cells
from ngptlab.jobclock import EXIT_RESUMABLE, job_clock
from ngptlab.results import read_json, write_json

if TYPE_CHECKING:  # lm-eval takes seconds to import; the CLI loads it only when it evaluates
    from lm_eval.tasks import TaskManager

METRICS = ("acc", "acc_norm")
# lm-eval reports no stderr with 0 bootstrap iterations; acc and acc_norm are means, whose stderr it computes
# in closed form, so the count only matters for other metrics.
BOOTSTRAP_ITERS = 100
# Another run starts only while the job has this many times its longest run so far left: a margin for a run
# slower than those before it (another arm, a busier machine).
RESERVE_FACTOR = 1.5


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cell", required=True, help="scale x context cell, e.g. cpu-4l-ctx128")
    parser.add_argument("--root", default=".", help="directory holding data/, runs/, results/ (default: .)")


def output_path(root: str | Path, cell: str) -> Path:
    return Path(root) / layout.evaluate_file(cell)


def select_runs(params: dict, cell: str, speedup: dict) -> tuple[list[dict], list[dict]]:
    """The cell's runs to evaluate (the speed-up's best learning rate per arm, budget and seed) and the
    holes: wanted (arm, budget, seed) without a completed best run."""
    specs = [s for s in compared_runs(params) if s.cell == cell]
    budgets = sorted({s.budget for s in specs})
    wanted_budgets = budgets[-1:] if params["evaluate"]["budgets"] == "largest" else budgets
    best = {(r["arm"], r["budget"], r["seed"]): r for r in speedup.get("runs", [])
            if r.get("best_lr_for_budget") and r.get("status") == "completed"}
    selected, holes = [], []
    for key in sorted({(s.arm, s.budget, s.seed) for s in specs if s.budget in wanted_budgets}):
        if key in best:
            selected.append(best[key])
        else:
            holes.append({"arm": key[0], "budget": key[1], "seed": key[2],
                          "reason": "no completed run at this budget"})
    return selected, holes


def prepare_tasks(params: dict, root: Path) -> dict[str, dict]:
    """Build the requested offline tasks and describe every requested task."""
    cfg = params["evaluate"]
    offline = [t for t in cfg["tasks"] if t in OFFLINE_TASKS]
    described = {t: {"kind": "lm-eval"} for t in cfg["tasks"] if t not in OFFLINE_TASKS}
    if offline:
        from ngptlab.prepare.cache import default_cache_dir
        from ngptlab.prepare.shards import open_tokens, verify_shards
        from ngptlab.prepare.tokenizer import gpt2_encoding

        source = params["train"]["source"]
        tokens_dir = root / "data" / "tokens" / source
        meta = verify_shards(tokens_dir)
        settings = TaskSettings(examples=int(cfg["limit"] or OFFLINE_EXAMPLES), seed=int(cfg["seed"]),
                                context_words=int(cfg["context_words"]),
                                continuation_words=int(cfg["continuation_words"]))
        enc = gpt2_encoding(default_cache_dir())
        built = build_offline_tasks(open_tokens(tokens_dir, "val"), enc.decode,
                                    root / "data" / "evaluate" / source, settings, offline)
        for info in built.values():
            info["data"]["path"] = os.path.relpath(info["data"]["path"], root)
            info["config"]["path"] = os.path.relpath(info["config"]["path"], root)
            info["val_sha256"] = meta["splits"]["val"]["sha256"]
        described.update(built)
    return {t: described[t] for t in cfg["tasks"]}


def task_manager(task_dirs: list[str], include_defaults: bool):
    """lm-eval's TaskManager with the project's task directories on its include path; lm-eval's own
    thousands of task YAMLs are indexed only when a requested task may be one of them (about a minute)."""
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=[str(Path(d).resolve()) for d in task_dirs] or None,
                       include_defaults=include_defaults)


def check_tasks(manager, tasks: list[str]) -> None:
    missing = [t for t in tasks if t not in manager.all_tasks]
    if missing:
        raise ParamsError(f"evaluate.tasks: {', '.join(missing)} is neither an offline task "
                          f"({', '.join(OFFLINE_TASKS)}) nor a task lm-eval finds (its own or a YAML in "
                          f"evaluate.task_dirs)")


def evaluate_model(model: torch.nn.Module, encode, manager, tasks: list[str], cfg: dict, device: str) -> dict:
    """Run lm-eval's evaluator zero-shot on one model; per task acc, acc_norm (where defined), stderr, n."""
    from lm_eval import evaluator

    from ngptlab.evaluate.adapter import NgptlabLM

    lm = NgptlabLM(model, encode, device=device, batch_size=int(cfg["batch_size"]))
    seed = int(cfg["seed"])
    try:
        out = evaluator.simple_evaluate(model=lm, tasks=list(tasks), task_manager=manager, num_fewshot=0,
                                        limit=cfg["limit"], bootstrap_iters=BOOTSTRAP_ITERS,
                                        log_samples=False, random_seed=seed, numpy_random_seed=seed,
                                        torch_random_seed=seed, fewshot_random_seed=seed)
    except NgptlabError:
        raise
    except Exception as err:  # lm-eval raises many kinds for a bad task config; one clear line
        raise ParamsError(f"evaluate.tasks {tasks}: lm-eval could not run them: "
                          f"{type(err).__name__}: {err}") from None
    results = {}
    for task in tasks:
        metrics = out["results"].get(task, {})
        entry = {"n": int(out["n-samples"][task]["effective"])}
        for name in METRICS:
            if f"{name},none" in metrics:
                entry[name] = float(metrics[f"{name},none"])
                stderr = metrics.get(f"{name}_stderr,none")
                entry[f"{name}_stderr"] = float(stderr) if isinstance(stderr, int | float) else None
        if "acc" not in entry:
            raise ParamsError(f"evaluate.tasks: task {task!r} reports no 'acc' metric "
                              f"(it has {sorted(metrics)})")
        results[task] = entry
    return results


def ready_tasks(params: dict, root: Path) -> tuple[dict[str, dict], TaskManager]:
    """The requested tasks, described and built, and the lm-eval TaskManager that finds every one."""
    cfg = params["evaluate"]
    tasks = prepare_tasks(params, root)
    offline_dir = root / "data" / "evaluate" / params["train"]["source"]
    has_offline = any(info["kind"] == "offline" for info in tasks.values())
    only_offline = all(info["kind"] == "offline" for info in tasks.values()) and not cfg["task_dirs"]
    manager = task_manager([*cfg["task_dirs"], *([str(offline_dir)] if has_offline else [])],
                           include_defaults=not only_offline)
    check_tasks(manager, list(tasks))
    return tasks, manager


@dataclass(frozen=True)
class CellOutcome:
    """What one evaluate job got done. `document` is None when the job's clock stopped it before every
    selected run had results; its finished runs wait in the partial files for the next job."""

    document: dict | None
    done: int  # selected runs with results: reused from an earlier job or evaluated in this one
    remaining: int  # selected runs this job did not reach
    reused: int


def run_entry(run: dict, checkpoint_sha256: str, results: dict) -> dict:
    """A run's entry in `runs[]`: its speed-up record's identity and loss, its checkpoint, its accuracies."""
    return {"run": run["run"], "arm": run["arm"], "budget": run["budget"], "lr": run["lr"],
            "seed": run["seed"], "final_val_loss": run["final_val_loss"],
            "checkpoint_sha256": checkpoint_sha256, "results": results}


def evaluate_cell(params: dict, cell: str, root: str | Path) -> CellOutcome:
    """Evaluate the cell's selected runs, each stored as a partial file when done (reused by a later job
    when made from the same checkpoint and settings), and write results/evaluate/<cell>.json; or stop
    early, without the document, when the job's clock (train.max_job_minutes) would not fit another run."""
    import lm_eval

    from ngptlab.prepare.cache import default_cache_dir
    from ngptlab.prepare.tokenizer import gpt2_encoding

    root = Path(root)
    if cell not in enumerate_cells(params):
        raise ParamsError(f"cell {cell!r} is not in the grid of this params file; "
                          f"cells: {', '.join(enumerate_cells(params))}")
    cfg = params["evaluate"]
    speedup = read_json(root / layout.speedup_file(cell), "the cell's speed-up")
    selected, holes = select_runs(params, cell, speedup)
    tasks, manager = ready_tasks(params, root)
    device = resolve_device(cfg["device"], "evaluate.device").type
    enc = gpt2_encoding(default_cache_dir())
    logging.getLogger("lm-eval").setLevel(logging.ERROR)
    head = {"cell": cell, "budgets_selected": cfg["budgets"], "lm_eval_version": lm_eval.__version__,
            "settings": {k: cfg[k] for k in ("tasks", "limit", "seed", "context_words",
                                             "continuation_words")} | {"device": device},
            "tasks": tasks}
    clock = job_clock(params["train"].get("max_job_minutes"))
    entries, reused, longest_s = [], 0, None
    for run in selected:
        started = time.perf_counter()
        ckpt = root / layout.run_dir(cell, run["run"]) / "model.safetensors"
        if not ckpt.is_file():
            raise CheckpointError(f"{ckpt}: missing (run {run['run']} is selected by the cell's speed-up)")
        digest = sha256_file(ckpt)  # once per run: for the reuse check and for the entry
        basis = partial.made_from(head, digest)
        stored, why_not = partial.read(root, cell, run["run"], basis)
        if stored is not None:  # its identity and loss as the speed-up has them now, its accuracies stored
            entries.append(run_entry(run, digest, stored["results"]))
            reused += 1
            print(f"{run['run']}: reused from an earlier job", flush=True)
            continue
        # Every job evaluates at least one run, so that each makes progress however late it started.
        if longest_s is not None and clock.must_stop(RESERVE_FACTOR * longest_s):
            return CellOutcome(None, done=len(entries), remaining=len(selected) - len(entries), reused=reused)
        if why_not:
            print(f"{run['run']}: evaluating again: {why_not}", flush=True)
        model, _ = load_model(ckpt, device="cpu", expected_arm=run["arm"])
        results = evaluate_model(model, enc.encode_ordinary, manager, list(tasks), cfg, device)
        entries.append(run_entry(run, digest, results))
        partial.write(root, cell, entries[-1], basis)
        longest_s = max(longest_s or 0.0, time.perf_counter() - started)
        print(f"{run['run']}: " + ", ".join(f"{t} acc {r['acc']:.3f}" for t, r in results.items())
              + f" ({time.perf_counter() - started:.1f} s)", flush=True)
    document = {**head, "runs": entries, "holes": holes}
    write_json(output_path(root, cell), document)
    partial.remove(root, cell)  # only now: until the document exists, the partial files are the results
    return CellOutcome(document, done=len(entries), remaining=0, reused=reused)


def run(args: argparse.Namespace, params: dict) -> int:
    started = time.perf_counter()
    outcome = evaluate_cell(params, args.cell, args.root)
    if outcome.document is None:
        print(f"{args.cell}: stopped by the job's clock (train.max_job_minutes or the Slurm time limit): "
              f"{outcome.done} of {outcome.done + outcome.remaining} runs done, {outcome.remaining} remain, "
              f"the done ones kept under "
              f"{partial.partial_dir(args.root, args.cell)}; rerun to continue (exit {EXIT_RESUMABLE})",
              file=sys.stderr, flush=True)
        return EXIT_RESUMABLE
    doc = outcome.document
    print(f"{args.cell}: {len(doc['runs'])} runs evaluated on {', '.join(doc['tasks'])} "
          f"({outcome.reused} reused from an earlier job), {len(doc['holes'])} holes; "
          f"{time.perf_counter() - started:.1f} s -> {output_path(args.root, args.cell)}")
    return 0
