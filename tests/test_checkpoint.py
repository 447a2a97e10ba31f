"""ngptlab.checkpoint: a round trip rebuilds the same model; every kind of damage is a CheckpointError."""

from __future__ import annotations

import copy
import hashlib
import json
import struct

import pytest
import torch
from safetensors.torch import save_file

from ngptlab.checkpoint import load_model, read_config, save_model, sha256_file
from ngptlab.errors import CheckpointError
from ngptlab.models.registry import build

torch.set_num_threads(1)
VOCAB, CONTEXT = 96, 16


def config_for(arm: str, **extra) -> dict:
    return {"arm": arm, "scale": "cpu-4l", "vocab_size": VOCAB, "context": CONTEXT, "run": f"test-{arm}",
            **extra}


def trained(arm: str, seed: int = 0) -> torch.nn.Module:
    """A model moved away from its init by two real optimizer steps (so a fresh build would differ)."""
    torch.manual_seed(seed)
    model, recipe = build(arm, "cpu-4l", VOCAB, CONTEXT)
    opt = torch.optim.AdamW(recipe.param_groups(model, 1e-2), betas=recipe.betas, eps=recipe.eps)
    idx = torch.randint(0, VOCAB, (4, CONTEXT + 1), generator=torch.Generator().manual_seed(1))
    for _ in range(2):
        _, loss = model(idx[:, :-1], idx[:, 1:])
        loss.backward()
        opt.step()
        opt.zero_grad()
        recipe.post_step(model)
    return model


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "model.safetensors"
    model = trained("ngpt")
    sha = save_model(path, model, config_for("ngpt", data={"train_sha256": "ab" * 32}))
    return path, model, sha


@pytest.mark.parametrize("arm", ["gpt", "ngpt", "gpt-lrm", "gpt-orth"])
def test_round_trip_gives_identical_weights_and_logits(tmp_path, arm):
    model = trained(arm)
    path = tmp_path / "m.safetensors"
    save_model(path, model, config_for(arm))
    loaded, config = load_model(path)
    assert config["arm"] == arm and config["run"] == f"test-{arm}"
    assert type(loaded) is type(model)
    for (name, a), (name_b, b) in zip(model.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert name == name_b and torch.equal(a, b), name
    idx = torch.randint(0, VOCAB, (2, CONTEXT), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert torch.equal(model(idx)[0], loaded(idx)[0])


def test_sha256_and_config_header(saved):
    path, _, sha = saved
    assert sha == sha256_file(path) == hashlib.sha256(path.read_bytes()).hexdigest()
    assert read_config(path)["data"] == {"train_sha256": "ab" * 32}


def test_a_resume_checkpoint_hashes_each_byte_once(saved, tmp_path, monkeypatch):
    """save_state feeds sha256 each tensor byte once (the headers' tensor hashes), never a whole file."""
    from safetensors.torch import load_file

    from ngptlab import checkpoint, files
    from ngptlab.observe.angular import IntervalStart
    from ngptlab.train import state
    from ngptlab.train.progress import Progress

    fed = []

    class Counting:
        def __init__(self):
            self.digest = hashlib.sha256()

        def update(self, data):
            fed.append(memoryview(data).nbytes)
            self.digest.update(data)

        def hexdigest(self):
            return self.digest.hexdigest()

    model = copy.deepcopy(saved[1])  # stepped below: the fixture's stays as saved
    opt = torch.optim.AdamW(model.parameters())
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    opt.step()
    for module in (checkpoint, files):
        monkeypatch.setattr(module, "hashlib", type("Hashlib", (), {"sha256": Counting}))
    interval = IntervalStart(0, {"embed_in": torch.ones(VOCAB, 8)})  # the interval began before the step
    state.save_state(tmp_path, model, opt, config_for("ngpt"), Progress(step=1), interval)

    ckpt = tmp_path / json.loads((tmp_path / "latest.json").read_text())["checkpoint"]
    once = 0  # what one tensors_sha256 pass over each file's tensors feeds
    for name in ("model.safetensors", "optimizer.safetensors", "interval.safetensors"):
        for key, t in load_file(str(ckpt / name)).items():
            once += len(f"{key}|{t.dtype}|{tuple(t.shape)}|".encode()) + t.numel() * t.element_size()
    assert sum(fed) == once


def test_loading_leaves_the_callers_rng_alone(saved):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    load_model(saved[0])
    assert torch.equal(torch.rand(3), expected)


def test_flipped_tensor_byte_is_detected(saved, tmp_path):
    data = bytearray(saved[0].read_bytes())
    data[-5] ^= 0x01  # inside the last tensor's bytes; the header is still valid
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"bad\.safetensors: tensor data is corrupt"):
        load_model(bad)


def test_flipped_header_byte_is_detected(saved, tmp_path):
    data = bytearray(saved[0].read_bytes())
    data[9] ^= 0x20  # inside the JSON header
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"bad\.safetensors"):
        load_model(bad)


@pytest.mark.parametrize("keep", [0, 4, 100, -1000])
def test_truncated_file_is_detected(saved, tmp_path, keep):
    data = saved[0].read_bytes()
    bad = tmp_path / "cut.safetensors"
    bad.write_bytes(data[:keep] if keep >= 0 else data[:keep])
    with pytest.raises(CheckpointError, match=r"cut\.safetensors: not a readable safetensors file"):
        load_model(bad)


def test_wrong_arm_is_refused(saved):
    with pytest.raises(CheckpointError, match=r"checkpoint is arm 'ngpt', expected 'gpt'"):
        load_model(saved[0], expected_arm="gpt")


def _rewrite_header(src, dst, config: dict) -> None:
    """A structurally valid file whose config lies about the model (tensors and their hash unchanged)."""
    data = src.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    header["__metadata__"]["ngptlab_config"] = json.dumps(config)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    dst.write_bytes(struct.pack("<Q", len(raw)) + raw + data[8 + n:])


def test_weights_that_do_not_fit_the_config_are_refused(saved, tmp_path):
    bad = tmp_path / "liar.safetensors"
    _rewrite_header(saved[0], bad, config_for("gpt"))  # ngpt weights, gpt config
    with pytest.raises(CheckpointError, match=r"liar\.safetensors: weights do not match a gpt cpu-4l model"):
        load_model(bad)
    _rewrite_header(saved[0], bad, {**config_for("ngpt"), "vocab_size": VOCAB + 1})
    with pytest.raises(CheckpointError, match=r"embed_in.*model wants"):
        load_model(bad)
    _rewrite_header(saved[0], bad, {**config_for("ngpt"), "arm": "no-such-arm"})
    with pytest.raises(CheckpointError, match=r"cannot rebuild the model"):
        load_model(bad)


def test_foreign_safetensors_and_missing_file(tmp_path):
    plain = tmp_path / "plain.safetensors"
    save_file({"w": torch.zeros(2, 2)}, str(plain))
    with pytest.raises(CheckpointError, match=r"plain\.safetensors: header has no 'tensors_sha256'"):
        load_model(plain)
    with pytest.raises(CheckpointError, match=r"nope\.safetensors: checkpoint file not found"):
        load_model(tmp_path / "nope.safetensors")


def test_failed_save_leaves_the_existing_file_untouched(saved, tmp_path):
    path = tmp_path / "m.safetensors"
    path.write_bytes(saved[0].read_bytes())
    before = path.read_bytes()
    with pytest.raises(CheckpointError, match="config lacks"):
        save_model(path, saved[1], {"arm": "ngpt"})
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["m.safetensors"]  # no temp file left behind
