"""`ngptlab condition`: real checkpoints of real models in, result files out; bad checkpoints rejected."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from support import fixture_params

from ngptlab import layout
from ngptlab.checkpoint import save_model
from ngptlab.cli import main
from ngptlab.config.load import load_params
from ngptlab.errors import ResultsError
from ngptlab.grid.enumeration import find_run
from ngptlab.grid.runs import RunSpec
from ngptlab.models.registry import build
from ngptlab.results import read_spectra, train_dir, write_spectra

torch.set_num_threads(1)
VOCAB = 256


def strict_json(path: Path) -> dict:
    """Parse refusing NaN/Infinity tokens: the files must be strict JSON."""
    def refuse(token):
        raise AssertionError(f"{path}: non-standard JSON constant {token}")
    return json.loads(path.read_text(), parse_constant=refuse)


@pytest.fixture
def params_file(tmp_path) -> Path:
    params = fixture_params()
    params["train"].update(scales=["cpu-4l"], contexts=[64], budgets=[16384], seeds=[0],
                           arms=["gpt", "ngpt", "gpt-lrm"])
    params["train"]["learning_rates"] = {"cpu-4l": {"gpt": [3e-3, 1e-2], "ngpt": [3e-3], "gpt-lrm": [3e-3]}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


def spec_of(params_file: Path, arm: str, lr: float = 3e-3) -> RunSpec:
    return find_run(load_params(params_file), RunSpec("cpu-4l", 64, arm, 16384, lr, 0).name)


def save_run(root: Path, spec: RunSpec, model=None, status: str = "completed",
             loss: float | None = 5.5) -> Path:
    """What the train stage leaves: runs/<cell>/<run>/model.safetensors and its summary.json."""
    if model is None:
        torch.manual_seed(0)
        model, _ = build(spec.arm, spec.scale, VOCAB, spec.context)
    config = {"run": spec.name, "arm": spec.arm, "scale": spec.scale, "vocab_size": VOCAB,
              "context": spec.context, "spec": spec.as_dict()}
    ckpt = root / layout.run_dir(spec.cell, spec.name) / "model.safetensors"
    sha = save_model(ckpt, model, config)
    summary = {"run": spec.name, "spec": spec.as_dict(), "status": status, "final_val_loss": loss,
               "checkpoint_sha256": sha}
    (train_dir(root, spec)).mkdir(parents=True, exist_ok=True)
    (train_dir(root, spec) / "summary.json").write_text(json.dumps(summary))
    return ckpt


def condition(params_file: Path, root: Path, run: str) -> int:
    return main(["condition", "--params", str(params_file), run, "--root", str(root), "--no-progress"])


def test_condition_writes_json_and_spectra(tmp_path, params_file):
    spec = spec_of(params_file, "gpt")
    torch.manual_seed(0)
    model, _ = build("gpt", "cpu-4l", VOCAB, 64)
    save_run(tmp_path, spec, model)
    assert condition(params_file, tmp_path, spec.name) == 0

    doc = strict_json(tmp_path / "results" / "conditioning" / f"{spec.name}.json")
    assert doc["run"] == spec.name and doc["status"] == "completed" and doc["final_val_loss"] == 5.5
    assert doc["variants"] == ["effective", "renormalized", "underlying"]  # raw parameters for every arm
    names = [m.name for m in model.matrices()]
    assert list(doc["matrices"]) == names

    # every number traces back to the weights: the float64 SVD of the checkpoint's matrices
    weights = {m.name: m.weight.double().numpy() for m in model.matrices()}
    q3 = np.linalg.svd(weights["layers.2.attn.q"], compute_uv=False)
    rec = doc["matrices"]["layers.2.attn.q"]
    assert rec["layer"] == 2 and rec["n_heads"] == 4 and rec["shape"] == [64, 64]
    assert rec["variants"]["effective"]["condition_number"] == pytest.approx(q3[0] / q3[-1], rel=1e-10)
    head0 = np.linalg.svd(weights["layers.2.attn.q"][:16], compute_uv=False)
    assert rec["variants"]["effective"]["heads"]["condition_number"][0] == pytest.approx(head0[0] / head0[-1])
    assert len(rec["variants"]["effective"]["heads"]["condition_number"]) == 4

    # headline: the paper's layer 3 is the third block (0-based index 2)
    head = doc["headline"]["effective"]
    assert head["layer3_q_condition"] == rec["variants"]["effective"]["condition_number"]
    k4 = doc["matrices"]["layers.3.attn.k"]["variants"]["effective"]
    assert head["layer4_k_condition"] == k4["condition_number"]
    attn = [doc["matrices"][n]["variants"]["effective"]["condition_number"] for n in names
            if doc["matrices"][n]["kind"] in ("q", "k", "v", "o")]
    assert head["attn_condition_median"] == pytest.approx(np.median(attn))
    e = weights["embed_in"]
    cov_eig = np.linalg.eigvalsh(np.cov(e, rowvar=False))
    assert head["embed_in_cov_condition"] == pytest.approx(cov_eig[-1] / cov_eig[0], rel=1e-8)
    norms = np.linalg.norm(e, axis=1)
    assert head["embed_in_norm_cv"] == pytest.approx(norms.std() / norms.mean(), rel=1e-9)
    assert set(doc["headline"]) == {"effective", "renormalized", "underlying"}
    assert doc["headline"]["renormalized"]["embed_in_norm_cv"] == pytest.approx(0.0, abs=1e-12)
    # references: this checkpoint is the run's step 0 (seed 0, untrained), so its init reference is itself
    assert doc["reference"]["init"] == {"seed": 0, "headline": doc["headline"]}
    gaussian = doc["reference"]["gaussian"]["headline"]
    assert gaussian["attn_condition_median"] > 100 and 2 < gaussian["attn_head_condition_median"] < 4

    # the long table: one row per singular value of every matrix, head and variant, plus covariance spectra
    spectra_path = tmp_path / "results" / "conditioning" / f"{spec.name}.spectra.parquet"
    table = read_spectra(spectra_path)
    assert list(table.columns) == ["run", "matrix", "kind", "layer", "variant", "head", "quantity", "index",
                                   "value", "value_over_median"]
    rows = table.to_dict("records")
    whole = [r["value"] for r in rows
             if r["matrix"] == "layers.2.attn.q" and r["variant"] == "effective" and r["head"] == -1]
    np.testing.assert_allclose(whole, q3, rtol=1e-12)
    cov = [r for r in rows if r["quantity"] == "cov_eigenvalue" and r["variant"] == "effective"
           and r["matrix"] == "embed_in"]
    np.testing.assert_allclose([float(r["value"]) for r in cov], cov_eig[::-1], rtol=1e-8)
    assert float(cov[32]["value_over_median"]) == pytest.approx(float(cov[32]["value"]) / np.median(cov_eig))
    per_variant = 4 * (4 * 64 + 3 * 64 + 3 * 64) + 2 * 64 + 2 * 64  # whole + heads per layer; embeddings
    assert len(rows) == 3 * per_variant
    assert {r["run"] for r in rows} == {spec.name}
    # byte-stable (DVC hashes it): the same rows give the same file
    again = tmp_path / "again.parquet"
    write_spectra(again, [tuple(r.values()) for r in rows])
    assert again.read_bytes() == spectra_path.read_bytes()
    again.write_bytes(spectra_path.read_bytes()[:100])
    with pytest.raises(ResultsError, match=f"{again}: not a readable spectra table"):
        read_spectra(again)


def test_ngpt_is_unchanged_by_renormalization(tmp_path, params_file):
    spec = spec_of(params_file, "ngpt")
    save_run(tmp_path, spec)
    assert condition(params_file, tmp_path, spec.name) == 0
    doc = strict_json(tmp_path / "results" / "conditioning" / f"{spec.name}.json")
    for name, rec in doc["matrices"].items():
        eff, ren = rec["variants"]["effective"], rec["variants"]["renormalized"]
        # the raw parameters are unit vectors; the effective maps add s_u, s_v sqrt(d), s_z (1 at init)
        assert rec["variants"]["underlying"]["vector_norms"]["mean"] == pytest.approx(1.0, abs=1e-5), name
        expected = 8.0 if name.endswith("mlp.v") else 1.0  # sqrt(d_model) = 8 at cpu-4l
        assert eff["vector_norms"]["mean"] == pytest.approx(expected, rel=1e-5), name
        assert ren["condition_number"] == pytest.approx(eff["condition_number"], rel=1e-5), name


def test_multiplier_arm_reports_effective_and_underlying(tmp_path, params_file):
    spec = spec_of(params_file, "gpt-lrm")
    torch.manual_seed(0)
    model, _ = build("gpt-lrm", "cpu-4l", VOCAB, 64)
    q = model.get_submodule("layers.2.attn.q")
    with torch.no_grad():
        q.mult_row.copy_(torch.logspace(0, 3, 64))  # row scales 1 ... 1000: a badly conditioned product
    save_run(tmp_path, spec, model)
    assert condition(params_file, tmp_path, spec.name) == 0
    doc = strict_json(tmp_path / "results" / "conditioning" / f"{spec.name}.json")
    assert doc["variants"] == ["effective", "renormalized", "underlying"]
    # the init reference is the unmodified seed-0 model: row multipliers 1, kappa of the raw matrix
    init = doc["reference"]["init"]["headline"]
    assert init["effective"]["layer3_q_condition"] == doc["headline"]["underlying"]["layer3_q_condition"]
    assert init["effective"]["layer4_q_condition"] == doc["headline"]["effective"]["layer4_q_condition"]
    rec = doc["matrices"]["layers.2.attn.q"]["variants"]
    w = q.weight.detach().double().numpy()
    rows = q.mult_row.detach().double().numpy()  # the stored float32 multipliers, exactly
    eff = np.linalg.svd(rows[:, None] * w, compute_uv=False)
    und = np.linalg.svd(w, compute_uv=False)
    # the product is formed in float64: no float32 rounding times kappa
    assert rec["effective"]["condition_number"] == pytest.approx(eff[0] / eff[-1], rel=1e-10)
    assert rec["underlying"]["condition_number"] == pytest.approx(und[0] / und[-1], rel=1e-9)
    assert rec["effective"]["condition_number"] > 10 * rec["underlying"]["condition_number"]
    # renormalizing rows removes exactly the row scales: back to the underlying matrix with unit rows
    ren = np.linalg.svd(w / np.linalg.norm(w, axis=1, keepdims=True), compute_uv=False)
    assert rec["renormalized"]["condition_number"] == pytest.approx(ren[0] / ren[-1], rel=1e-10)
    assert doc["headline"]["underlying"]["layer3_q_condition"] == rec["underlying"]["condition_number"]


def test_diverged_run_is_analysed_and_marked(tmp_path, params_file):
    spec = spec_of(params_file, "gpt", lr=1e-2)
    torch.manual_seed(0)
    model, _ = build("gpt", "cpu-4l", VOCAB, 64)
    with torch.no_grad():
        model.get_submodule("layers.1.mlp.o").weight[0, 0] = float("nan")  # a non-finite last state
        model.get_submodule("layers.0.attn.v").weight[:8] = 0.0  # and a rank-deficient matrix
    save_run(tmp_path, spec, model, status="diverged", loss=None)
    assert condition(params_file, tmp_path, spec.name) == 0
    doc = strict_json(tmp_path / "results" / "conditioning" / f"{spec.name}.json")
    assert doc["status"] == "diverged" and doc["final_val_loss"] is None
    assert doc["matrices"]["layers.1.mlp.o"]["variants"]["effective"] == {"finite": False}
    v = doc["matrices"]["layers.0.attn.v"]["variants"]["effective"]
    assert v["condition_number"] == "inf" and v["singular"] is True and v["numerical_rank"] == 56
    assert v["heads"]["condition_number"][0] == "inf"
    assert v["heads"]["singular"] == [True, False, False, False]
    assert math.isfinite(doc["headline"]["effective"]["mlp_condition_median"])


def test_missing_or_corrupt_checkpoint_is_a_clear_error(tmp_path, params_file, capsys):
    spec = spec_of(params_file, "gpt")
    ckpt = save_run(tmp_path, spec)
    out_json = tmp_path / "results" / "conditioning" / f"{spec.name}.json"
    out_json.parent.mkdir(parents=True)
    out_json.write_text("previous result\n")

    # corrupt tensor bytes (the summary's sha256 is stale too; either check must name the file)
    data = bytearray(ckpt.read_bytes())
    data[-100] ^= 0xFF
    ckpt.write_bytes(bytes(data))
    assert condition(params_file, tmp_path, spec.name) == 2
    err = capsys.readouterr().err
    assert str(ckpt) in err and "error" in err
    # a truncated file whose summary matches it
    ckpt.write_bytes(ckpt.read_bytes()[:1000])
    summary_path = train_dir(tmp_path, spec) / "summary.json"
    summary = json.loads(summary_path.read_text())
    summary.pop("checkpoint_sha256")
    summary_path.write_text(json.dumps(summary))
    assert condition(params_file, tmp_path, spec.name) == 2
    err = capsys.readouterr().err
    assert str(ckpt) in err and "corrupt or truncated" in err
    # missing checkpoint
    ckpt.unlink()
    assert condition(params_file, tmp_path, spec.name) == 2
    assert f"{ckpt}: checkpoint file not found" in capsys.readouterr().err
    assert out_json.read_text() == "previous result\n"  # nothing already produced was overwritten
    assert not (tmp_path / "results" / "conditioning" / f"{spec.name}.spectra.parquet").exists()


def test_wrong_run_or_missing_summary_is_a_clear_error(tmp_path, params_file, capsys):
    gpt, lrm = spec_of(params_file, "gpt"), spec_of(params_file, "gpt-lrm")
    # missing summary
    save_run(tmp_path, gpt)
    (train_dir(tmp_path, gpt) / "summary.json").unlink()
    assert condition(params_file, tmp_path, gpt.name) == 2
    assert "summary.json: train summary not found" in capsys.readouterr().err
    # another run's checkpoint (and summary) copied into this run's place
    save_run(tmp_path, gpt)
    (tmp_path / layout.run_dir(lrm.cell, lrm.name)).mkdir(parents=True)
    (tmp_path / layout.run_dir(lrm.cell, lrm.name) / "model.safetensors").write_bytes(
        (tmp_path / layout.run_dir(gpt.cell, gpt.name) / "model.safetensors").read_bytes())
    (train_dir(tmp_path, lrm)).mkdir(parents=True)
    summary = {"run": lrm.name, "status": "completed", "final_val_loss": 5.0}
    (train_dir(tmp_path, lrm) / "summary.json").write_text(json.dumps(summary))
    assert condition(params_file, tmp_path, lrm.name) == 2
    assert "checkpoint is arm 'gpt', expected 'gpt-lrm'" in capsys.readouterr().err
    # a run outside the grid
    assert condition(params_file, tmp_path, "cpu-4l-ctx64-gpt-t999-lr0.003-s0") == 2
    assert "not in the grid" in capsys.readouterr().err
