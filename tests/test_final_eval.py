"""A run's final evaluation: its windows tile the val split, its loss is the trained model's over them, with a
standard error; the curve keeps the cheap eval windows."""

from __future__ import annotations

import contextlib
import hashlib
import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from support.train import (
    CONTEXT,
    make_params,
    metrics,
    results_dir,
    run_dir,
    run_name,
    summary,
    timing_file,
    write_shards,
)
from support.workflow import default_params

from ngptlab.checkpoint import load_model
from ngptlab.config.load import validate_params
from ngptlab.errors import CheckpointError, DataError, ParamsError
from ngptlab.grid.enumeration import find_run
from ngptlab.grid.trunks import TrunkSpec
from ngptlab.models.registry import build_seeded
from ngptlab.settings import Params, of_section
from ngptlab.train.data import FINAL_EVAL_CAP_TOKENS, eval_offsets, final_eval_offsets, gather
from ngptlab.train.dist import Topology
from ngptlab.train.evaluation import HEAD_ROWS, Evaluator, mean_and_se
from ngptlab.train.identity import SETTINGS, full_params, trunk_identity
from ngptlab.train.loop import train_run

torch.set_num_threads(1)

VAL_TOKENS = 8_000  # write_shards' val split
WINDOWS = VAL_TOKENS // (CONTEXT + 1)  # `all`: 242 windows of 33 tokens


def train(root, params, arm="gpt", budget=8192) -> int:
    settings = Params.of(params)
    return train_run(find_run(settings, run_name(arm, budget)), settings.train, root=root, progress=False)


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    """A completed gpt run and an ngpt run of another budget, both with final_eval_tokens `all`."""
    root = tmp_path_factory.mktemp("final_eval")
    write_shards(root)
    params = make_params(budgets=[8192, 4096], final_eval_tokens="all")
    assert train(root, params, "gpt", 8192) == 0
    assert train(root, params, "ngpt", 4096) == 0
    return root, params


def window_losses(root, run: str, offsets: np.ndarray) -> torch.Tensor:
    """Each window's mean next-token loss under the weights the run wrote, computed here from scratch."""
    model, _ = load_model(run_dir(root, run) / "model.safetensors")
    model.eval()
    val = np.fromfile(root / "data/tokens/synthetic/val.bin", dtype="<u2").astype(np.int64)
    windows = torch.from_numpy(np.stack([val[o:o + CONTEXT + 1] for o in offsets]))
    with torch.no_grad():
        logits, _ = model(windows[:, :-1])
    per_token = F.cross_entropy(logits.float().transpose(1, 2), windows[:, 1:], reduction="none")
    return per_token.mean(1).double()


# ----------------------------------------------------------------------------------------------------------
# The windows


def test_the_windows_tile_the_val_split_from_its_start():
    every = final_eval_offsets(VAL_TOKENS, CONTEXT, "all")
    assert len(every) == WINDOWS and every[0] == 0
    assert np.all(np.diff(every) == CONTEXT + 1) and every[-1] + CONTEXT + 1 <= VAL_TOKENS
    some = final_eval_offsets(VAL_TOKENS, CONTEXT, 1000)
    assert np.array_equal(some, every[:1000 // (CONTEXT + 1)])  # a prefix of the same tiling


def test_all_is_capped_at_the_cap_and_so_is_a_number():
    assert FINAL_EVAL_CAP_TOKENS == 2 ** 22
    capped = final_eval_offsets(10 ** 9, 1024, "all")
    assert len(capped) == FINAL_EVAL_CAP_TOKENS // 1025 and capped[-1] + 1025 <= FINAL_EVAL_CAP_TOKENS
    assert np.array_equal(final_eval_offsets(10 ** 9, 1024, 10 ** 8), capped)


def test_a_number_larger_than_the_split_is_one_clear_error():
    with pytest.raises(DataError, match=r"^train\.final_eval_tokens 9000 .*8000 tokens \(context 32\)$"):
        final_eval_offsets(VAL_TOKENS, CONTEXT, 9000)
    with pytest.raises(DataError, match=r"train\.final_eval_tokens all at context 4096 gives 1 windows"):
        final_eval_offsets(VAL_TOKENS, 4096, "all")  # too small a split for a standard error


def test_the_setting_defaults_to_all_and_refuses_other_values():
    train = {k: v for k, v in default_params()["train"].items() if k != "final_eval_tokens"}
    assert of_section("train", train).final_eval_tokens == "all"
    for bad in (0, -5, 2.5, True, "most"):
        with pytest.raises(ParamsError, match="train.final_eval_tokens"):
            validate_params({**default_params(), "train": {**train, "final_eval_tokens": bad}})


def test_the_standard_error_is_the_sd_over_windows_over_root_n():
    losses = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    mean, se = mean_and_se(losses)
    assert mean == 2.5 and se == pytest.approx(np.std([1, 2, 3, 4], ddof=1) / 2)


def test_a_split_too_small_for_the_final_windows_fails_before_anything_trains(tmp_path):
    write_shards(tmp_path)
    with pytest.raises(DataError, match=r"train\.final_eval_tokens 9000 .*8000 tokens"):
        train(tmp_path, make_params(final_eval_tokens=9000))
    assert not (tmp_path / "results").exists()
    state = run_dir(tmp_path, run_name()) / "state"
    assert not [p for p in state.iterdir() if p.name != ".lock"]  # no checkpoint, no metrics


@pytest.mark.parametrize(("arm", "vocab_multiple"), [("gpt", 1), ("ngpt", 1), ("gpt-lrm", 64)])
def test_the_head_in_row_chunks_gives_the_same_bits_as_the_whole_logits(arm, vocab_multiple):
    # At the default grid's shape and the real vocabulary, where a micro-batch's logits outgrow the caches
    # (the case the chunks are for): the fast path must not move any loss by a single bit. Three windows a
    # pass, so the last chunk of each is a partial one.
    vocab, context = 50257, 100
    assert 3 * context % HEAD_ROWS != 0
    model, _ = build_seeded(arm, "cpu-4l", vocab, context, seed=0, vocab_multiple=vocab_multiple)
    val = np.random.default_rng(0).integers(0, vocab, 8 * (context + 1)).astype(np.uint16)
    offsets = final_eval_offsets(len(val), context, "all")
    topo = Topology(rank=0, world_size=1, local_rank=0, device=torch.device("cpu"))
    whole = Evaluator(model, val, vocab, context, 3, contextlib.nullcontext(), topo)
    chunked = Evaluator(model, val, vocab, context, 3, contextlib.nullcontext(), topo, model=model)
    with torch.no_grad():
        x, y = gather(val, offsets[:3], context)
        assert torch.equal(whole.token_losses(x, y), chunked.token_losses(x, y))
    assert whole.loss(offsets) == chunked.loss(offsets)


# ----------------------------------------------------------------------------------------------------------
# A trained run


def test_final_val_loss_is_the_trained_models_mean_over_the_final_windows(done):
    root, _ = done
    name = run_name("gpt", 8192)
    s = summary(root, name)
    offsets = final_eval_offsets(VAL_TOKENS, CONTEXT, "all")
    losses = window_losses(root, name, offsets)
    assert s["final_val_loss"] == pytest.approx(losses.mean().item(), abs=1e-6)
    assert s["final_val_loss_se"] > 0
    assert s["final_val_loss_se"] == pytest.approx(losses.std().item() / np.sqrt(WINDOWS), rel=1e-4)
    assert s["final_eval"] == {"tokens": WINDOWS * (CONTEXT + 1), "windows": WINDOWS,
                               "sha256": hashlib.sha256(offsets.tobytes()).hexdigest()}
    assert s["params"]["final_eval_tokens"] == "all"


def test_the_curve_keeps_the_cheap_windows_at_its_last_point(done):
    root, params = done
    name = run_name("gpt", 8192)
    last = metrics(root, name)[-1]
    assert last["tokens"] == 8192
    cheap = eval_offsets(VAL_TOKENS, CONTEXT, params["train"]["eval_windows"], params["train"]["eval_seed"])
    assert last["val_loss"] == pytest.approx(window_losses(root, name, cheap).mean().item(), abs=1e-6)
    assert last["val_loss"] != summary(root, name)["final_val_loss"]


def test_every_run_of_the_cell_reads_the_same_final_windows(done):
    root, _ = done
    gpt, ngpt = summary(root, run_name("gpt", 8192)), summary(root, run_name("ngpt", 4096))
    assert gpt["final_eval"] == ngpt["final_eval"]


def test_the_final_evaluation_is_timed_apart_from_training(done):
    root, _ = done
    timing = json.loads(timing_file(root, run_name("gpt", 8192)).read_text())
    assert timing["final_eval_s"] > 0
    assert timing["tokens_per_s"] == pytest.approx(8192 / timing["train_s"], rel=1e-4)


def test_another_final_eval_setting_is_another_run(done):
    root, params = done
    other = make_params(budgets=[8192, 4096], final_eval_tokens=4096)
    before = (results_dir(root, run_name("gpt", 8192)) / "summary.json").read_bytes()
    with pytest.raises(CheckpointError, match=r"exist for other settings \(train\.final_eval_tokens differs"):
        train(root, other, "gpt", 8192)
    assert (results_dir(root, run_name("gpt", 8192)) / "summary.json").read_bytes() == before
    # a WSD trunk has no end: its identity leaves the final evaluation out, so its kept states stay valid
    trunk = TrunkSpec("cpu-4l", CONTEXT, "gpt", 3e-3, 0)
    identity = trunk_identity(trunk, full_params(Params.of(other).train), {})
    assert "train.final_eval_tokens" not in identity[SETTINGS]
