"""Offline zero-shot tasks built from the held-out validation documents of the prepared corpus.

The paper's tasks (ARC-Easy, HellaSwag, WinoGrande, WSC273, LAMBADA) need the Hugging Face Hub. Without it
the stage still does real work on two tasks of the same two kinds, drawn from data/tokens/<source>/val.bin
(documents the models never trained on: prepare splits by document):

- ngptlab_lastword (LAMBADA-style): a passage of `context_words` words, the target is the next word (a word
  of letters only). acc = the target is the model's greedy continuation (lm-eval's loglikelihood `acc`).
- ngptlab_continuation (HellaSwag-style): a passage of `context_words` words, four continuations of
  `continuation_words` words: the true one and windows of three other documents. acc = the true one has the
  highest log-likelihood, acc_norm = the highest per byte (lm-eval's multiple_choice metrics). Chance 1/4.

Each task is a jsonl file plus an lm-eval task YAML that reads it (HF `datasets`' json loader), built by a
seeded generator from the shard alone: the same shard and settings give the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ngptlab.errors import DataError
from ngptlab.files import sha256_file, write_text_atomic
from ngptlab.vocabulary import EOT_TOKEN

LASTWORD = "ngptlab_lastword"
CONTINUATION = "ngptlab_continuation"
OFFLINE_TASKS = (LASTWORD, CONTINUATION)
N_CHOICES = 4
OFFLINE_EXAMPLES = 1000  # examples per offline task when evaluate.limit is null (every example)
# Stream tags keep the two tasks' generators independent for the same seed.
_STREAMS = {LASTWORD: 0x6C77, CONTINUATION: 0x636F}


@dataclass(frozen=True)
class TaskSettings:
    examples: int           # examples per task
    seed: int
    context_words: int      # words of the passage the model conditions on
    continuation_words: int  # words of each choice of the continuation task


def split_documents(tokens: np.ndarray) -> list[np.ndarray]:
    """The documents of a shard: runs of tokens between end-of-text tokens (empty ones dropped)."""
    ends = np.flatnonzero(tokens == EOT_TOKEN)
    starts = np.concatenate(([0], ends + 1))
    stops = np.concatenate((ends, [len(tokens)]))
    return [np.asarray(tokens[a:b]) for a, b in zip(starts, stops, strict=True) if b > a]


def document_words(tokens: Sequence[np.ndarray], decode: Callable[[list[int]], str]) -> list[list[str]]:
    """Each document's text split on whitespace (newlines and runs of spaces become one space)."""
    return [decode([int(t) for t in doc]).split() for doc in tokens]


def _generator(seed: int, task: str) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed % (1 << 63), _STREAMS[task]]))


def lastword_examples(docs: list[list[str]], settings: TaskSettings) -> list[dict]:
    """Up to `examples` passages, each ending before a word of letters only, at most one per (document,
    position); documents are visited in seeded rounds so the examples spread over all of them."""
    rng, n = _generator(settings.seed, LASTWORD), settings.context_words
    candidates = [[i for i in range(n, len(words)) if words[i].isalpha()] for words in docs]
    return _draw(rng, candidates, settings.examples, lambda d, i: {
        "context": " ".join(docs[d][i - n:i]), "target": " " + docs[d][i], "doc": d, "position": i})


def continuation_examples(docs: list[list[str]], settings: TaskSettings) -> list[dict]:
    """Passage + true continuation from one document; the other choices are windows of other documents."""
    rng, n, m = _generator(settings.seed, CONTINUATION), settings.context_words, settings.continuation_words
    candidates = [list(range(0, len(words) - n - m + 1)) for words in docs]
    windows = [d for d, words in enumerate(docs) if len(words) >= m]

    def make(d: int, i: int) -> dict:
        others = [o for o in windows if o != d]
        if len(others) < N_CHOICES - 1:
            raise DataError(f"the continuation task needs {N_CHOICES} documents of {m}+ words, "
                            f"the validation shard has {len(windows)}")
        picked = rng.choice(len(others), size=N_CHOICES - 1, replace=False)
        choices = [" " + " ".join(docs[d][i + n:i + n + m])]
        for o in (others[k] for k in picked):
            start = int(rng.integers(0, len(docs[o]) - m + 1))
            choices.append(" " + " ".join(docs[o][start:start + m]))
        order = rng.permutation(N_CHOICES)
        return {"context": " ".join(docs[d][i:i + n]), "choices": [choices[k] for k in order],
                "label": int(np.flatnonzero(order == 0)[0]), "doc": d, "position": i}

    return _draw(rng, candidates, settings.examples, make)


def _draw(rng: np.random.Generator, candidates: list[list[int]], count: int,
          make: Callable[[int, int], dict]) -> list[dict]:
    used: list[set[int]] = [set() for _ in candidates]
    examples: list[dict] = []
    while len(examples) < count:
        progressed = False
        for d in rng.permutation(len(candidates)):
            free = [i for i in candidates[d] if i not in used[d]]
            if not free:
                continue
            i = free[int(rng.integers(len(free)))]
            used[d].add(i)
            examples.append(make(int(d), i))
            progressed = True
            if len(examples) == count:
                break
        if not progressed:
            break
    return examples


def task_yaml(task: str, data_file: Path) -> str:
    """The lm-eval task config of an offline task: its own jsonl through `datasets`' json loader."""
    head = (f"task: {task}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
            f"    test: {json.dumps(str(data_file))}\ntest_split: test\ndoc_to_text: context\n")
    if task == LASTWORD:
        return head + ("output_type: loglikelihood\ndoc_to_target: target\nmetric_list:\n"
                       "  - metric: acc\n    aggregation: mean\n    higher_is_better: true\n")
    return head + ("output_type: multiple_choice\ndoc_to_choice: choices\ndoc_to_target: label\n"
                   "metric_list:\n"
                   "  - metric: acc\n    aggregation: mean\n    higher_is_better: true\n"
                   "  - metric: acc_norm\n    aggregation: mean\n    higher_is_better: true\n")


def build_offline_tasks(val_tokens: np.ndarray, decode: Callable[[list[int]], str], out_dir: str | Path,
                        settings: TaskSettings, tasks: Sequence[str] = OFFLINE_TASKS) -> dict[str, dict]:
    """Write <task>.jsonl and <task>.yaml for each offline task into out_dir; return per task the files and
    the data file's sha256 and the number of examples. Raises DataError when the shard yields no example."""
    out_dir = Path(out_dir).resolve()
    docs = document_words(split_documents(val_tokens), decode)
    built = {}
    for task in tasks:
        examples = (lastword_examples if task == LASTWORD else continuation_examples)(docs, settings)
        if not examples:
            raise DataError(f"the validation shard has no document long enough for {task} "
                            f"({settings.context_words} context words)")
        data = out_dir / f"{task}.jsonl"
        write_text_atomic(data, "".join(json.dumps(e, sort_keys=True) + "\n" for e in examples))
        config = out_dir / f"{task}.yaml"
        write_text_atomic(config, task_yaml(task, data))
        built[task] = {"kind": "offline", "examples": len(examples),
                       "data": {"path": str(data), "sha256": sha256_file(data)},
                       "config": {"path": str(config)}}  # its text is code, plus the data path
    return built
