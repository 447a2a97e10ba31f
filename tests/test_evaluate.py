"""`evaluate`: the lm-eval adapter, the offline tasks, real lm-eval runs on tiny byte-level models.

The models here read bytes (vocabulary 256) so that they train in seconds; the adapter takes any encoder,
the stage gives it GPT-2's BPE. Documents are words over disjoint letter sets per topic, so a model that has
learned anything picks the continuation in its passage's letters: the continuation task separates a trained
model from one at initialisation.

The tests of a whole cell (evaluate_cell, its partial files and its own clock) use GPT-2's BPE, as the stage
does, on models at initialisation: they compare documents, not accuracies.
"""

# ruff: noqa: F811  (pytest fixtures imported from support.prepare are redefined as parameters)
from __future__ import annotations

import argparse
import copy
import hashlib
import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from support import TEST_PARAMS, fixture_params
from support.prepare import gpt2_enc, prepare_cache  # noqa: F401
from support.synthetic import settings_of

from ngptlab import layout
from ngptlab.checkpoint import save_model
from ngptlab.errors import ParamsError
from ngptlab.evaluate import command, partial
from ngptlab.evaluate.adapter import NgptlabLM
from ngptlab.evaluate.cell import evaluate_cell
from ngptlab.evaluate.harness import check_tasks, evaluate_model, task_manager
from ngptlab.evaluate.selection import select_runs
from ngptlab.evaluate.tasks import (
    CONTINUATION,
    EOT_TOKEN,
    LASTWORD,
    OFFLINE_TASKS,
    TaskSettings,
    build_offline_tasks,
    split_documents,
)
from ngptlab.jobclock import EXIT_RESUMABLE, STARTED_ENV
from ngptlab.models.registry import build_seeded
from ngptlab.models.scales import shape_from_dict
from ngptlab.prepare.tokenizer import EOT_TOKEN as GPT2_EOT
from ngptlab.prepare.tokenizer import VOCAB_SIZE as GPT2_VOCAB
from ngptlab.settings import of_section
from ngptlab.speedup.document import SpeedupDocument

torch.set_num_threads(1)
VOCAB, CONTEXT = 256, 64
SHAPE_DICT = {"n_layer": 2, "d_model": 32, "n_head": 2, "mlp_ratio": 4}
SHAPE = shape_from_dict("tiny", SHAPE_DICT)
TOPICS = ["abcdef", "ghijkl", "mnopqr", "stuvwx"]
CFG = of_section("evaluate", {**fixture_params()["evaluate"], "batch_size": 16,
                              "limit": 40, "seed": 0})


def encode(text: str) -> list[int]:
    return list(text.encode())


def decode(ids: list[int]) -> str:
    return bytes(ids).decode()


def corpus(seed: int, n_docs: int) -> list[str]:
    """Documents of 30-60 words of 3-5 letters, each document's letters from one topic."""
    rng = np.random.default_rng(seed)
    docs = []
    for _ in range(n_docs):
        letters = TOPICS[rng.integers(len(TOPICS))]
        n_words = rng.integers(30, 61)
        words = ["".join(rng.choice(list(letters), size=rng.integers(3, 6))) for _ in range(n_words)]
        docs.append(" ".join(words))
    return docs


def shard(docs: list[str]) -> np.ndarray:
    return np.array([t for d in docs for t in (*encode(d), EOT_TOKEN)], dtype=np.uint16)


SETTINGS = TaskSettings(examples=40, seed=0, context_words=12, continuation_words=4)


def model_at(steps: int) -> torch.nn.Module:
    """A byte-level gpt trained `steps` AdamW steps on the training documents (0: at initialisation)."""
    model, _ = build_seeded("gpt", SHAPE, VOCAB, CONTEXT, 0)
    tokens = torch.tensor([t for d in corpus(1, 400) for t in (*encode(d), 10)])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(0)
    for _ in range(steps):
        starts = torch.randint(0, len(tokens) - CONTEXT - 1, (16,), generator=gen)
        batch = torch.stack([tokens[s:s + CONTEXT + 1] for s in starts])
        _, loss = model(batch[:, :-1], batch[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


@pytest.fixture(scope="module")
def offline(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tasks")
    build_offline_tasks(shard(corpus(2, 30)), decode, out, SETTINGS)
    return out


@pytest.mark.parametrize("arm", ["gpt", "ngpt", "gpt-lrm"])
def test_adapter_loglikelihood_equals_the_models_logits_by_hand(arm):
    model, _ = build_seeded(arm, SHAPE, VOCAB, CONTEXT, 0)
    lm = NgptlabLM(model, encode, batch_size=2)
    pairs = [("the cat sat", " on"), ("a", " bc"), ("hello wor", "ld")]
    got = lm.token_loglikelihoods([lm.encode_pair(c, x) for c, x in pairs])
    for (ctx, cont), (ll, greedy) in zip(pairs, got, strict=True):
        ids = torch.tensor([encode(ctx + cont)])
        with torch.no_grad():
            logits, _ = model(ids[:, :-1])
        logprobs = F.log_softmax(logits.float(), -1)[0]
        n = len(encode(cont))
        positions = range(len(encode(ctx)) - 1, ids.shape[1] - 1)
        by_hand = sum(logprobs[p, ids[0, p + 1]].item() for p in positions)
        assert len(positions) == n
        assert ll == pytest.approx(by_hand, abs=1e-4)
        assert greedy == all(logprobs[p].argmax().item() == ids[0, p + 1].item() for p in positions)


@pytest.mark.parametrize("arm", ["gpt", "ngpt"])
def test_adapter_scores_bf16_blocks_with_a_float32_head(arm):
    # The blocks under bf16 autocast (as on a GPU, here on the CPU), the LM head and log-softmax in fp32 on
    # the last hidden state, which autocast leaves in fp32: the scores are the fp32 head's, not bf16 logits'.
    model, _ = build_seeded(arm, SHAPE, VOCAB, CONTEXT, 0)
    lm = NgptlabLM(model, encode, batch_size=2, bf16=True)
    pairs = [("the cat sat", " on"), ("hello wor", "ld")]
    got = lm.token_loglikelihoods([lm.encode_pair(c, x) for c, x in pairs])
    moved = []
    for (ctx, cont), (ll, _) in zip(pairs, got, strict=True):
        ids = torch.tensor([encode(ctx + cont)])
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            hidden = model.hidden_states(ids[:, :-1])
            bf16_logits = model.head(hidden)
        assert hidden.dtype == torch.float32 and bf16_logits.dtype == torch.bfloat16
        with torch.no_grad():
            fp32_logits = model.head(hidden)
        positions = range(len(encode(ctx)) - 1, ids.shape[1] - 1)
        by_hand = [sum(F.log_softmax(logits.float(), -1)[0, p, ids[0, p + 1]].item() for p in positions)
                   for logits in (fp32_logits, bf16_logits)]
        assert ll == pytest.approx(by_hand[0], abs=1e-5)
        moved.append(abs(by_hand[1] - by_hand[0]))
    assert max(moved) > 1e-4  # what a bf16 head would have moved the scores by


def test_adapter_moves_trailing_space_and_keeps_the_continuation_when_too_long():
    model, _ = build_seeded("gpt", SHAPE, VOCAB, CONTEXT, 0)
    lm = NgptlabLM(model, encode)
    assert lm.encode_pair("ab ", "cd") == (encode("ab"), encode(" cd"))
    assert lm.encode_pair("", "cd") == ([EOT_TOKEN], encode("cd"))
    long_ctx = "x" * 200
    (ll, _), = lm.token_loglikelihoods([lm.encode_pair(long_ctx, " yz")])
    (ll_cut, _), = lm.token_loglikelihoods([lm.encode_pair(long_ctx[-(CONTEXT - 2):], " yz")])
    assert ll == pytest.approx(ll_cut, abs=1e-5)  # only the last context+1 tokens are seen


def test_offline_tasks_are_deterministic_and_from_validation_documents_only(tmp_path, offline):
    train_docs, val_docs = corpus(1, 400), corpus(2, 30)
    again = build_offline_tasks(shard(val_docs), decode, tmp_path / "again", SETTINGS)
    for task in OFFLINE_TASKS:
        assert (tmp_path / "again" / f"{task}.jsonl").read_bytes() == (offline / f"{task}.jsonl").read_bytes()
        assert again[task]["examples"] == 40
    other = build_offline_tasks(shard(val_docs), decode, tmp_path / "other",
                                TaskSettings(40, 1, SETTINGS.context_words, SETTINGS.continuation_words))
    assert other[LASTWORD]["data"]["sha256"] != again[LASTWORD]["data"]["sha256"]

    train_text = "\n".join(train_docs)
    for task in OFFLINE_TASKS:
        for line in (offline / f"{task}.jsonl").read_text().splitlines():
            example = json.loads(line)
            assert example["context"] in val_docs[example["doc"]]
            assert example["context"] not in train_text
            if task == LASTWORD:
                assert (example["context"] + example["target"]) in val_docs[example["doc"]]
            else:
                true = example["choices"][example["label"]]
                assert (example["context"] + true) in val_docs[example["doc"]]
                assert len(set(example["choices"])) == 4


def test_split_documents_drops_empty_ones():
    docs = split_documents(np.array([1, 2, EOT_TOKEN, EOT_TOKEN, 3, EOT_TOKEN], dtype=np.uint16))
    assert [d.tolist() for d in docs] == [[1, 2], [3]]


def test_lm_eval_on_offline_tasks_trained_beats_init(offline):
    manager = task_manager([str(offline)], include_defaults=False)
    tasks = [LASTWORD, CONTINUATION]
    at_init = evaluate_model(model_at(0), encode, manager, tasks, CFG, "cpu")
    trained = evaluate_model(model_at(60), encode, manager, tasks, CFG, "cpu")
    print("init", at_init, "trained", trained)
    for result in (at_init, trained):
        assert result[LASTWORD]["n"] == 40 and result[CONTINUATION]["n"] == 40
        assert set(result[CONTINUATION]) >= {"acc", "acc_stderr", "acc_norm", "acc_norm_stderr"}
        assert result[CONTINUATION]["acc_stderr"] > 0
    # chance is 1/4; the trained model picks its passage's letters
    assert trained[CONTINUATION]["acc"] >= 0.5
    assert trained[CONTINUATION]["acc"] > at_init[CONTINUATION]["acc"] + 0.2
    assert trained[LASTWORD]["acc"] >= at_init[LASTWORD]["acc"]


def test_hub_layout_dataset_loads_through_lm_eval(tmp_path):
    """A task whose dataset_path is a local copy in the Hub's layout (README configs + parquet), as
    allenai/ai2_arc is laid out: the loading code the paper's tasks use, without the Hub."""
    import pandas as pd

    repo = tmp_path / "ai2_arc"
    (repo / "ARC-Easy").mkdir(parents=True)
    (repo / "README.md").write_text("---\nconfigs:\n- config_name: ARC-Easy\n  data_files:\n"
                                    "  - split: test\n    path: ARC-Easy/test-*\n---\n")
    rows = [{"question": f"Which letters follow {w}?", "answerKey": "A",
             "choices": {"text": [w, "zzzz"], "label": ["A", "B"]}} for w in ("abc", "ghi", "mno")]
    pd.DataFrame(rows).to_parquet(repo / "ARC-Easy" / "test-00000-of-00001.parquet")
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "arc_easy_copy.yaml").write_text(
        f"task: arc_easy_copy\ndataset_path: {json.dumps(str(repo))}\ndataset_name: ARC-Easy\n"
        "test_split: test\noutput_type: multiple_choice\ndoc_to_text: \"Question: {{question}}\\nAnswer:\"\n"
        "doc_to_choice: \"{{choices.text}}\"\ndoc_to_target: \"{{choices.label.index(answerKey)}}\"\n"
        "metric_list:\n  - metric: acc\n  - metric: acc_norm\n")
    model, _ = build_seeded("gpt", SHAPE, VOCAB, CONTEXT, 0)
    result = evaluate_model(model, encode, task_manager([str(tasks)], include_defaults=False),
                            ["arc_easy_copy"], CFG, "cpu")
    assert result["arc_easy_copy"]["n"] == 3
    assert 0.0 <= result["arc_easy_copy"]["acc"] <= 1.0 and "acc_norm" in result["arc_easy_copy"]


def test_missing_task_is_one_clear_error(offline):
    manager = task_manager([str(offline)], include_defaults=False)
    check_tasks(manager, [LASTWORD])
    with pytest.raises(ParamsError, match="evaluate.tasks: no_such_task is neither"):
        check_tasks(manager, [LASTWORD, "no_such_task"])


def test_malformed_task_config_is_one_clear_error(tmp_path, offline):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    config = (offline / f"{LASTWORD}.yaml").read_text().replace(LASTWORD, "broken", 1)
    (tasks / "broken.yaml").write_text(config.replace("output_type: loglikelihood", "output_type: bogus"))
    model, _ = build_seeded("gpt", SHAPE, VOCAB, CONTEXT, 0)
    manager = task_manager([str(tasks)], include_defaults=False)
    with pytest.raises(ParamsError, match="broken"):
        check_tasks(manager, ["broken"])
        evaluate_model(model, encode, manager, ["broken"], CFG, "cpu")


def test_select_runs_takes_the_speedups_best_runs_and_names_holes():
    params = {"train": {"scales": ["s"], "contexts": [64], "arms": ["gpt", "ngpt"], "budgets": [10, 40],
                        "seeds": [0], "learning_rates": {"s": {"gpt": [1e-3, 2e-3], "ngpt": [1e-3, 2e-3]}}},
              "evaluate": {"budgets": "largest"}}

    def run(arm, budget, lr, best, status="completed"):
        return {"run": f"s-ctx64-{arm}-t{budget}-lr{lr:g}-s0", "arm": arm, "budget": budget, "lr": lr,
                "seed": 0, "status": status, "final_val_loss": 5.0, "best_lr_for_budget": best}

    speedup = {"runs": [run("gpt", 40, 1e-3, False), run("gpt", 40, 2e-3, True), run("gpt", 10, 1e-3, True),
                        run("ngpt", 40, 1e-3, False, "diverged"), run("ngpt", 10, 2e-3, True)]}
    selected, holes = select_runs(settings_of(params), "s-ctx64", SpeedupDocument.from_dict(speedup))
    assert [r.run for r in selected] == ["s-ctx64-gpt-t40-lr0.002-s0"]
    assert holes == [{"arm": "ngpt", "budget": 40, "seed": 0, "reason": "no completed run at this budget"}]
    params["evaluate"]["budgets"] = "all"
    selected, holes = select_runs(settings_of(params), "s-ctx64", SpeedupDocument.from_dict(speedup))
    assert [r.run for r in selected] == ["s-ctx64-gpt-t10-lr0.001-s0", "s-ctx64-gpt-t40-lr0.002-s0",
                                            "s-ctx64-ngpt-t10-lr0.002-s0"]
    assert len(holes) == 1


def test_report_section_tables_order_check_and_named_holes(tmp_path):
    from ngptlab.report.kit.document import Callout, Document, FigureBlock
    from ngptlab.report.kit.load import Results
    from ngptlab.report.sections import zero_shot

    def run(arm, budget, loss, acc):
        return {"run": f"c-{arm}-t{budget}", "arm": arm, "budget": budget, "lr": 1e-3, "seed": 0,
                "final_val_loss": loss, "results": {LASTWORD: {"acc": acc, "acc_stderr": 0.01, "n": 100}}}

    runs = [run("gpt", 10, 5.0, 0.2), run("ngpt", 10, 4.0, 0.3), run("gpt-orth", 10, 4.5, 0.1),
            run("gpt", 40, 4.0, 0.3), run("ngpt", 40, 3.5, 0.4)]
    (tmp_path / "results" / "evaluate").mkdir(parents=True)
    (tmp_path / "results" / "evaluate" / "c.json").write_text(json.dumps(
        {"cell": "c", "lm_eval_version": "0.4.13", "tasks": {LASTWORD: {"kind": "offline"}}, "runs": runs,
         "holes": [{"arm": "gpt-orth", "budget": 40, "seed": 0, "reason": "no completed run at this budget"}],
         }))
    results = Results(root=tmp_path, params={}, params_path=None, runs={}, speedups={"c": {}, "d": None},
                      meta=None)
    doc = Document("t")
    zero_shot.section(doc, results)
    accuracy, order = doc.tables
    assert len(accuracy) == 5
    rows = {r[order.columns.index("budget")]: dict(zip(order.columns, r, strict=True)) for r in order.rows}
    assert rows[10]["by_loss"] == "ngpt < gpt-orth < gpt"
    assert rows[10]["by_accuracy"] == "ngpt > gpt > gpt-orth"
    assert rows[10]["same_order"] is False and rows[10]["kendall_tau"] == pytest.approx(1 / 3)
    assert rows[40]["same_order"] is True and rows[40]["kendall_tau"] == 1.0
    callout = next(b for b in doc.blocks if isinstance(b, Callout)).text
    assert "d: no results/evaluate/d.json" in callout and "c: gpt-orth at 40 tokens" in callout
    assert any(isinstance(b, FigureBlock) for b in doc.blocks)  # two budgets: accuracy against tokens
    assert "results/evaluate/c.json" in results.inputs


def test_cli_names_an_unknown_cell_and_a_missing_speedup(tmp_path, capsys):
    from ngptlab.cli import main

    params = str(TEST_PARAMS)
    assert main(["evaluate", "--params", params, "no-such-cell", "--root", str(tmp_path)]) == 2
    assert "cell 'no-such-cell' is not in the grid" in capsys.readouterr().err
    assert main(["evaluate", "--params", params, "cpu-4l-ctx128", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "results/speedup/cpu-4l-ctx128.json" in err and err.count("\n") == 1


# ----------------------------------------------------------------------------------------------------------
# A whole cell: two selected runs (gpt and ngpt at one budget), one offline task, GPT-2's BPE.
CELL = "cpu-4l-ctx128"
SENTINEL = {LASTWORD: {"acc": 0.5, "acc_stderr": 0.125, "n": 20}}  # results no model here would get


def cell_params() -> dict:
    params = fixture_params()
    params["train"].update(source="evaltest", arms=["gpt", "ngpt"], budgets=[2048], seeds=[0],
                           learning_rates={"cpu-4l": {"gpt": [1e-2], "ngpt": [1e-2]}})
    params["evaluate"].update(budgets="largest", tasks=[LASTWORD], task_dirs=[], limit=20, seed=0,
                              context_words=12, continuation_words=4, batch_size=16, device="cpu")
    return params


@pytest.fixture(scope="module")
def cell(tmp_path_factory, gpt2_enc) -> tuple[Path, dict]:
    """A project root with the cell's token shards, its speed-up and a checkpoint for each selected run."""
    root, params = tmp_path_factory.mktemp("cell"), cell_params()
    tokens_dir = root / "data" / "tokens" / params["train"]["source"]
    tokens_dir.mkdir(parents=True)
    val = np.array([t for d in corpus(2, 30) for t in (*gpt2_enc.encode_ordinary(d), GPT2_EOT)], dtype="<u2")
    splits = {}
    for split in ("train", "val"):
        (tokens_dir / f"{split}.bin").write_bytes(val.tobytes())
        splits[split] = {"file": f"{split}.bin", "tokens": int(val.size), "documents": 30,
                         "bytes": val.nbytes, "sha256": hashlib.sha256(val.tobytes()).hexdigest()}
    (tokens_dir / "meta.json").write_text(json.dumps({"splits": splits}))
    runs = []
    for arm in params["train"]["arms"]:
        name = f"{CELL}-{arm}-t2048-lr0.01-s0"
        model, _ = build_seeded(arm, SHAPE, GPT2_VOCAB, CONTEXT, 0)
        save_model(root / layout.run_dir(CELL, name) / "model.safetensors", model,
                   {"arm": arm, "scale": "tiny", "shape": SHAPE_DICT, "vocab_size": GPT2_VOCAB,
                    "context": CONTEXT})
        runs.append({"run": name, "arm": arm, "budget": 2048, "lr": 0.01, "seed": 0, "status": "completed",
                     "final_val_loss": 5.0, "best_lr_for_budget": True})
    (root / layout.speedup_file(CELL)).parent.mkdir(parents=True)
    (root / layout.speedup_file(CELL)).write_text(json.dumps({"runs": runs}))
    return root, params


def copy_of(cell: tuple[Path, dict], tmp_path: Path) -> Path:
    return Path(shutil.copytree(cell[0], tmp_path / "root"))


def evaluate(root: Path, params: dict, capsys, progress: bool = False) -> tuple[int, str]:
    """One evaluate job, through the CLI's `run`: its exit status and its log (the job's, with
    --no-progress: lm-eval's bars are shown only with `progress`)."""
    args = argparse.Namespace(cell=CELL, cell_option=None, root=str(root), no_progress=not progress)
    code = command.run(args, settings_of(params))
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.fixture
def job_env(monkeypatch, prepare_cache):
    monkeypatch.setenv("NGPTLAB_CACHE", str(prepare_cache))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)  # the clock is train.max_job_minutes' alone
    monkeypatch.delenv(STARTED_ENV, raising=False)
    return monkeypatch


@pytest.fixture(scope="module")
def reference(cell, prepare_cache, tmp_path_factory) -> dict:
    """The cell's document from one uninterrupted job."""
    root = Path(shutil.copytree(cell[0], tmp_path_factory.mktemp("reference") / "root"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NGPTLAB_CACHE", str(prepare_cache))
        mp.delenv("SLURM_JOB_ID", raising=False)
        outcome = evaluate_cell(settings_of(cell[1]), CELL, root)
    assert outcome.document is not None and outcome.reused == 0
    assert not partial.partial_dir(root, CELL).exists()  # removed once the document is written
    return json.loads((root / layout.evaluate_file(CELL)).read_text())


def test_a_job_stopped_by_its_clock_leaves_its_runs_and_the_next_job_continues(cell, reference, tmp_path,
                                                                               job_env, capsys):
    root, params = copy_of(cell, tmp_path), cell[1]
    first, second = (r["run"] for r in reference["runs"])
    limited = copy.deepcopy(params)
    limited["train"]["max_job_minutes"] = 1.0
    job_env.setenv(STARTED_ENV, str(time.time() - 3600))  # the job's minute is long over: one run, then stop
    code, log = evaluate(root, limited, capsys)
    assert code == EXIT_RESUMABLE == 75, log
    assert "1 of 2 runs done, 1 remain" in log
    assert "%|" not in log  # --no-progress: no bar of lm-eval's in the job's log
    assert [p.name for p in partial.partial_dir(root, CELL).iterdir()] == [f"{first}.json"]
    assert not (root / layout.evaluate_file(CELL)).exists()

    job_env.delenv(STARTED_ENV)
    code, log = evaluate(root, params, capsys)
    assert code == 0, log
    assert f"{first}: reused from an earlier job" in log and f"{first}: {LASTWORD} acc" not in log
    assert f"{second}: {LASTWORD} acc" in log and "1 reused" in log
    assert json.loads((root / layout.evaluate_file(CELL)).read_text()) == reference
    assert not partial.partial_dir(root, CELL).exists()


def test_a_partial_of_another_checkpoint_is_evaluated_again(cell, reference, tmp_path, job_env, capsys):
    root = copy_of(cell, tmp_path)
    first, second = reference["runs"]
    partial.write(root, CELL, {**first, "results": SENTINEL}, partial.made_from(reference, "0" * 64))
    partial.write(root, CELL, {**second, "results": SENTINEL},
                  partial.made_from(reference, second["checkpoint_sha256"]))
    code, log = evaluate(root, cell[1], capsys, progress=True)
    assert code == 0, log
    assert "100%|" in log  # lm-eval's bar as it builds the requests: what --no-progress leaves out
    said = f"{first['run']}: evaluating again: checkpoint_sha256 changed since its partial results were made"
    assert said in log
    assert f"{second['run']}: reused from an earlier job" in log
    assert json.loads((root / layout.evaluate_file(CELL)).read_text())["runs"] == \
        [first, {**second, "results": SENTINEL}]


def test_a_corrupt_partial_is_evaluated_again_with_one_line(cell, reference, tmp_path, job_env, capsys):
    root = copy_of(cell, tmp_path)
    first, second = reference["runs"]
    corrupt = partial.partial_file(root, CELL, first["run"])
    corrupt.parent.mkdir(parents=True)
    corrupt.write_text('{"made_from": {"checkpoint_sha')  # a write cut off (not by partial.write)
    partial.write(root, CELL, {**second, "results": SENTINEL},
                  partial.made_from(reference, second["checkpoint_sha256"]))
    code, log = evaluate(root, cell[1], capsys)
    assert code == 0, log
    said = [line for line in log.splitlines() if str(corrupt) in line]
    assert len(said) == 1 and said[0].startswith(f"{first['run']}: evaluating again: {corrupt} is unreadable "
                                                 "(JSONDecodeError: "), log
    assert json.loads((root / layout.evaluate_file(CELL)).read_text())["runs"] == \
        [first, {**second, "results": SENTINEL}]


def test_partial_read_reuses_only_an_entry_of_the_same_basis(tmp_path):
    head = {"lm_eval_version": "0.4.9", "settings": {"tasks": [LASTWORD], "limit": 20, "device": "cpu"},
            "tasks": {LASTWORD: {"kind": "offline", "data": {"sha256": "ab"}}}}
    basis = partial.made_from(head, "c0")
    entry = {"run": "r", "results": SENTINEL, "checkpoint_sha256": "c0"}
    assert partial.read(tmp_path, CELL, "r", basis) == (None, None)  # no file: evaluated, nothing to say
    partial.write(tmp_path, CELL, entry, basis)
    assert partial.read(tmp_path, CELL, "r", basis) == (entry, None)
    changed = partial.made_from({**head, "settings": {**head["settings"], "limit": 40},
                                 "lm_eval_version": "0.4.10"}, "c0")
    assert partial.read(tmp_path, CELL, "r", changed) == \
        (None, "lm_eval_version, settings changed since its partial results were made")
    partial.partial_file(tmp_path, CELL, "r").write_text(json.dumps({"made_from": basis, "entry": []}))
    assert "is unreadable" in partial.read(tmp_path, CELL, "r", basis)[1]
    partial.remove(tmp_path, CELL)
    assert not partial.partial_dir(tmp_path, CELL).exists()
