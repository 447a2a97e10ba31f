"""A vocabulary padded to a multiple (train.vocab_multiple): pad rows are never a token, get no gradient,
and the analysis of a padded model is that of its token rows."""

from __future__ import annotations

import json

import pytest
import torch

from ngptlab import layout
from ngptlab.checkpoint import load_model, save_model
from ngptlab.condition.analyse import analyse_matrices
from ngptlab.models.arms import table as arm_table
from ngptlab.models.registry import build, count_parameters
from ngptlab.models.scales import Scale
from ngptlab.models.size import padded_vocab, parameter_count
from ngptlab.observe.effective import effective_matrices
from ngptlab.observe.kappa import Settings
from ngptlab.settings import Params

SHAPE = Scale(n_layer=2, d_model=32, n_head=2)
VOCAB, MULTIPLE, ROWS = 150, 64, 192  # 192: no other dimension of SHAPE (d 32, d_mlp 128) equals it
CONTEXT = 16


def padded_and_plain(arm: str) -> tuple[torch.nn.Module, torch.nn.Module]:
    """A padded model, and an unpadded one holding exactly its token rows and every other weight."""
    torch.manual_seed(0)
    padded, _ = build(arm, SHAPE, VOCAB, CONTEXT, vocab_multiple=MULTIPLE)
    plain, _ = build(arm, SHAPE, VOCAB, CONTEXT)
    state = {k: v[:VOCAB] if v.ndim and v.shape[0] == ROWS else v for k, v in padded.state_dict().items()}
    plain.load_state_dict(state)
    return padded, plain


@pytest.mark.parametrize("arm", list(arm_table()))
def test_pad_rows_are_never_a_token_and_get_no_gradient(arm):
    torch.manual_seed(0)
    model, _ = build(arm, SHAPE, VOCAB, CONTEXT, vocab_multiple=MULTIPLE)
    assert padded_vocab(VOCAB, MULTIPLE) == model.vocab_rows == ROWS and padded_vocab(VOCAB, 1) == VOCAB
    assert model.embed_in.weight.shape[0] == model.embed_out.weight.shape[0] == ROWS
    assert count_parameters(model) == parameter_count(arm, SHAPE, ROWS)
    idx = torch.randint(0, VOCAB, (4, CONTEXT + 1))
    logits, loss = model(idx[:, :-1], idx[:, 1:])
    assert logits.shape == (4, CONTEXT, VOCAB)  # the softmax and the targets see the real vocabulary only
    loss.backward()
    for p in (model.embed_in.weight, model.embed_out.weight):
        assert p.grad[VOCAB:].abs().max() == 0 and p.grad[:VOCAB].abs().max() > 0


@pytest.mark.parametrize("arm", ["gpt", "ngpt", "gpt-lrm"])
def test_a_padded_model_computes_and_analyses_as_its_token_rows(arm):
    padded, plain = padded_and_plain(arm)
    idx = torch.randint(0, VOCAB, (2, CONTEXT))
    torch.testing.assert_close(padded(idx)[0], plain(idx)[0], rtol=0, atol=1e-6)
    settings = Settings(singular_tol=1e-10, sample_rows=64, seed=0)
    for a, b in zip(effective_matrices(padded), effective_matrices(plain), strict=True):
        assert a.name == b.name and torch.equal(a.weight, b.weight)
        assert (a.underlying is None) == (b.underlying is None)
        assert a.underlying is None or torch.equal(a.underlying, b.underlying)
    got = analyse_matrices(effective_matrices(padded), settings, progress=False)
    want = analyse_matrices(effective_matrices(plain), settings, progress=False)
    assert json.dumps(got.headline(), sort_keys=True) == json.dumps(want.headline(), sort_keys=True)


def test_a_padded_checkpoint_rebuilds_padded(tmp_path):
    padded, _ = padded_and_plain("ngpt")
    config = {"arm": "ngpt", "scale": "x", "shape": SHAPE.as_dict(), "vocab_size": VOCAB,
              "vocab_multiple": MULTIPLE, "context": CONTEXT}
    save_model(tmp_path / "m.safetensors", padded, config)
    loaded, _ = load_model(tmp_path / "m.safetensors")
    assert loaded.vocab_rows == ROWS and loaded.vocab_size == VOCAB
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), padded.state_dict().values(),
                                                  strict=True))


def test_a_padded_run_trains_and_conditions_on_its_token_rows(tmp_path):
    from support.train import VOCAB as DATA_VOCAB
    from support.train import make_params, run_name, summary, write_shards

    from ngptlab.condition.run import condition_run
    from ngptlab.grid.enumeration import find_run
    from ngptlab.train.loop import train_run

    write_shards(tmp_path)
    params = make_params(vocab_multiple=100, budgets=[1024])  # 256 tokens -> 300 rows
    spec = find_run(Params.of(params), run_name("ngpt", 1024))
    assert train_run(spec, Params.of(params).train, root=tmp_path, progress=False) == 0
    s = summary(tmp_path, spec.name)
    assert s["params"]["vocab_multiple"] == 100 and s["n_params"] == parameter_count("ngpt", "cpu-4l", 300)
    model, config = load_model(tmp_path / layout.run_dir(spec.cell, spec.name) / "model.safetensors")
    assert (config["vocab_multiple"], model.vocab_rows, model.vocab_size) == (100, 300, DATA_VOCAB)
    doc = condition_run(spec, tmp_path, Params.of(params).condition, progress=False)
    for name in ("embed_in", "embed_out"):  # 256 token rows analysed, the 44 pad rows left out
        assert doc["matrices"][name]["shape"] == [DATA_VOCAB, 64]
    assert doc["reference"]["init"]["headline"]  # the step-0 reference was rebuilt padded, then cut too
