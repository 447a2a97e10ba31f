"""The progress record a checkpoint stores (train/progress.py): the same state.json keys, in the same order,
for a new job, a resumed one, a WSD branch and a checkpoint of an older version; a save, load and save again
writes the same bytes."""

from __future__ import annotations

import json

import torch

from ngptlab.observe.angular import IntervalStart
from ngptlab.train import state
from ngptlab.train.progress import Progress

# A new job's checkpoint, as state.json has always listed it (on a CPU: no GPU memory keys).
NEW_JOB = ["step", "wall_s", "metrics_rows", "last_val_loss", "last_val_step", "resumed_from",
           "identity", "timed_steps", "excluded_steps", "excluded_s", "train_s", "nonfinite_retries",
           "attention_disabled"]
OPTIMIZER = ["optimizer_scalars", "optimizer_groups"]  # state.save_state's own, after the record


def saved(progress: Progress) -> dict:
    """The record as state.save_state lays it out (its optimizer keys last, unless read in place)."""
    return {**progress.to_dict(), "optimizer_scalars": {}, "optimizer_groups": []}


def test_a_new_jobs_record_has_the_keys_of_a_checkpoint_in_their_order():
    progress = Progress(identity={"arm": "gpt"})
    assert list(saved(progress)) == NEW_JOB + OPTIMIZER
    progress.max_memory_allocated_mib, progress.max_memory_reserved_mib = 3.0, 5.0  # a GPU's
    assert list(saved(progress)) == [*NEW_JOB, "max_memory_allocated_mib", "max_memory_reserved_mib",
                                     *OPTIMIZER]


def test_a_record_read_back_writes_its_file_again_key_for_key():
    written = saved(Progress(step=8, wall_s=1.5, metrics_rows=8, last_val_loss=4.25, last_val_step=8,
                             identity={"arm": "gpt"}, timed_steps=7, excluded_steps={"compile": 1},
                             excluded_s=0.5, train_s=1.25, attention_disabled=["flash"]))
    again = Progress.from_dict(json.loads(json.dumps(written)))
    assert json.dumps({**again.to_dict(), **dict.fromkeys(OPTIMIZER)}) == \
        json.dumps({**written, **dict.fromkeys(OPTIMIZER)})


def test_a_branch_from_a_kept_trunk_state_adds_started_at_after_the_files_keys():
    trunk = saved(Progress(step=13, identity={"arm": "gpt"}))
    branch = Progress.from_dict(trunk)
    branch.started_at, branch.resumed_from = branch.step, []
    assert list({**branch.to_dict(), "optimizer_scalars": {}, "optimizer_groups": []}) == \
        NEW_JOB + OPTIMIZER + ["started_at"]  # state.save_state keeps the optimizer keys where they were


def test_a_checkpoint_of_an_older_version_keeps_its_keys_and_gains_the_new_ones_at_the_end():
    old = {"step": 6, "wall_s": 9.0, "metrics_rows": 6, "last_val_loss": None, "last_val_step": None,
           "resumed_from": [], "fingerprint": {"arm": "gpt"}, "train_s": 3.0, "tokens": 3072,
           "optimizer_scalars": {}, "optimizer_groups": []}
    progress = Progress.from_dict(old)
    # before step exclusions every step it took counted
    assert (progress.timed_steps, progress.excluded_steps, progress.train_s) == (6, {}, 3.0)
    record = progress.to_dict()
    assert list(record) == [*old, "identity", "timed_steps", "excluded_steps", "excluded_s",
                            "nonfinite_retries", "attention_disabled"]
    assert record["tokens"] == 3072  # a key this version does not know, as found


def test_save_load_and_save_again_writes_the_same_state_json(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    config = {"arm": "gpt", "scale": "cpu-4l", "vocab_size": 8, "context": 4}
    progress = Progress(step=4, metrics_rows=4, identity={"arm": "gpt"}, started_at=2)
    state.save_state(tmp_path / "a", model, optimizer, config, progress, IntervalStart(4))
    loaded = state.load_state(tmp_path / "a", model, optimizer, {"arm": "gpt"})
    assert loaded == Progress.from_dict(loaded.to_dict()) and loaded.started_at == 2
    state.save_state(tmp_path / "b", model, optimizer, config, loaded, state.load_interval(tmp_path / "a"))

    def state_json(root):
        latest = json.loads((root / state.LATEST).read_text())["checkpoint"]
        return (root / latest / "state.json").read_bytes()

    assert state_json(tmp_path / "a") == state_json(tmp_path / "b")
