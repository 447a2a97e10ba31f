"""The requested tasks, built and found, and one model's zero-shot accuracies on them through lm-eval's own
evaluator.

Tasks (`evaluate.tasks`): the offline tasks of evaluate/tasks.py, built from data/tokens/<source>/val.bin
into data/evaluate/<source>/ (jsonl + lm-eval YAML), and any task lm-eval knows (its own, e.g. the paper's
arc_easy, hellaswag, winogrande, wsc273, lambada_openai, which load from the Hub, or YAMLs in
`evaluate.task_dirs`). Every task runs zero-shot, `evaluate.limit` examples.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ngptlab import layout
from ngptlab.errors import NgptlabError, ParamsError
from ngptlab.evaluate.tasks import OFFLINE_EXAMPLES, OFFLINE_TASKS, TaskSettings, build_offline_tasks
from ngptlab.settings import Evaluate, Params

if TYPE_CHECKING:  # lm-eval takes seconds to import; the CLI loads it only when it evaluates
    from lm_eval.tasks import TaskManager

METRICS = ("acc", "acc_norm")
# lm-eval reports no stderr with 0 bootstrap iterations; acc and acc_norm are means, whose stderr it computes
# in closed form, so the count only matters for other metrics.
BOOTSTRAP_ITERS = 100


@contextlib.contextmanager
def progress_bars(shown: bool) -> Iterator[None]:
    """lm-eval's progress bars (one per task as it builds its requests) and those of `datasets` (loading a
    task's data), shown or not. lm-eval takes no setting for its bar, so without progress its module's tqdm
    is one that never draws, for the duration."""
    if shown:
        yield
        return
    import datasets
    import lm_eval.api.task as lm_eval_task

    drawing, were_enabled = lm_eval_task.tqdm, datasets.is_progress_bar_enabled()
    lm_eval_task.tqdm = functools.partial(drawing, disable=True)
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        lm_eval_task.tqdm = drawing
        if were_enabled:
            datasets.enable_progress_bars()


def prepare_tasks(params: Params, root: Path) -> dict[str, dict]:
    """Build the requested offline tasks and describe every requested task."""
    cfg = params.evaluate
    offline = [t for t in cfg.tasks if t in OFFLINE_TASKS]
    described = {t: {"kind": "lm-eval"} for t in cfg.tasks if t not in OFFLINE_TASKS}
    if offline:
        from ngptlab.prepare.cache import default_cache_dir
        from ngptlab.prepare.shards import open_tokens, verify_shards
        from ngptlab.prepare.tokenizer import gpt2_encoding

        source = params.train.source
        tokens_dir = root / layout.tokens_dir(source)
        meta = verify_shards(tokens_dir)
        settings = TaskSettings(examples=int(cfg.limit or OFFLINE_EXAMPLES), seed=int(cfg.seed),
                                context_words=int(cfg.context_words),
                                continuation_words=int(cfg.continuation_words))
        enc = gpt2_encoding(default_cache_dir())
        built = build_offline_tasks(open_tokens(tokens_dir, "val"), enc.decode,
                                    root / "data" / "evaluate" / source, settings, offline)
        for info in built.values():
            info["data"]["path"] = os.path.relpath(info["data"]["path"], root)
            info["config"]["path"] = os.path.relpath(info["config"]["path"], root)
            info["val_sha256"] = meta["splits"]["val"]["sha256"]
        described.update(built)
    return {t: described[t] for t in cfg.tasks}


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


def evaluate_model(model: torch.nn.Module, encode, manager, tasks: list[str], cfg: Evaluate,
                   device: str) -> dict:
    """Run lm-eval's evaluator zero-shot on one model; per task acc, acc_norm (where defined), stderr, n."""
    from lm_eval import evaluator

    from ngptlab.evaluate.adapter import NgptlabLM

    lm = NgptlabLM(model, encode, device=device, batch_size=int(cfg.batch_size))
    seed = int(cfg.seed)
    try:
        out = evaluator.simple_evaluate(model=lm, tasks=list(tasks), task_manager=manager, num_fewshot=0,
                                        limit=cfg.limit, bootstrap_iters=BOOTSTRAP_ITERS,
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


def ready_tasks(params: Params, root: Path) -> tuple[dict[str, dict], TaskManager]:
    """The requested tasks, described and built, and the lm-eval TaskManager that finds every one."""
    cfg = params.evaluate
    tasks = prepare_tasks(params, root)
    offline_dir = root / "data" / "evaluate" / params.train.source
    has_offline = any(info["kind"] == "offline" for info in tasks.values())
    only_offline = all(info["kind"] == "offline" for info in tasks.values()) and not cfg.task_dirs
    manager = task_manager([*cfg.task_dirs, *([str(offline_dir)] if has_offline else [])],
                           include_defaults=not only_offline)
    check_tasks(manager, list(tasks))
    return tasks, manager
