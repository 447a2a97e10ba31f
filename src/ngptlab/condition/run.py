"""The condition job of one run: the conditioning of its trained model.

Reads runs/<cell>/<run>/model.safetensors (and results/train/<cell>/<run>/summary.json for the run's
status), writes results/conditioning/<run>.json and results/conditioning/<run>.spectra.parquet. A diverged run
is analysed all the same (its weights are the last finite state) and marked with its status.

<run>.json:
  run, cell, spec{scale,context,arm,budget,lr,seed}, status ("completed" | "diverged"), final_val_loss,
  checkpoint{path, sha256}, settings{singular_tol, sample_rows, seed, device}, variants (analysed, in order),
  conventions (text); no timing (the file is byte-stable: the same checkpoint gives the same bytes),
  headline{<variant>: {...}}            the numbers the report compares (keys: analyse.headline)
  reference{init{seed, headline{<variant>: {...}}},            the same run's step-0 matrices
            gaussian{seed, samples{<kappa key>: n}, headline{<kappa key>: median}}}   Gaussian, same shape
  matrices{<name>: {kind, layer (0-based), shape [out, in], norm_dim, n_heads,
      variants{<variant>: {finite, condition_number, singular, sigma_ratio, numerical_rank, stable_rank,
          effective_rank, largest, smallest, vector_norms{mean,std,cv,min,max},
          heads{condition_number[], singular[], stable_rank[], effective_rank[], condition_number_median}
                                                                              (q, k, v only)
          row_norms{count,mean,std,cv,quantiles{q: v},histogram{edges,counts}},
          covariance{condition_number, singular, eigenvalue_ratio, numerical_rank, largest, smallest,
                     median}, anisotropy, pairwise_cosine{count, mean, histogram{edges, counts}}
                                                                               (embeddings only)}}}}
  A numerically singular condition number is the string "inf" (never a huge float); null = not applicable.
<run>.spectra.parquet (long format, results.SPECTRA_SCHEMA): run, matrix, kind, layer (-1 for embeddings),
  variant, head (-1 = whole matrix), quantity (singular_value | cov_eigenvalue), index (0 = largest), value,
  value_over_median.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from ngptlab import layout
from ngptlab.checkpoint import load_model, sha256_file
from ngptlab.condition.analyse import analyse_matrices
from ngptlab.condition.reference import gaussian_reference
from ngptlab.device import resolve_device
from ngptlab.errors import CheckpointError
from ngptlab.grid.runs import RunSpec
from ngptlab.models.registry import build_seeded
from ngptlab.observe.effective import effective_matrices
from ngptlab.observe.kappa import Settings, settings_of
from ngptlab.results import read_summary, train_dir, write_json, write_spectra
from ngptlab.settings import Condition

CONVENTIONS = {
    "layer": "0-based block index, as in the state dict; embeddings have layer null (-1 in the CSV)",
    "paper_layers": "headline layer3_*/layer4_* are the paper's 1-based layers 3 and 4 = 0-based layers 2, 3",
    "inf": "a condition number is \"inf\" when sigma_min / sigma_max < singular_tol (numerically singular)",
    "variants": "effective = the linear map the forward pass applies to its normalised input (multipliers, "
                "scalars, nGPT's s_u/s_v/s_z and the preceding RMSNorm gain included; "
                "observe/effective.py); renormalized = effective with unit vectors along the embedding "
                "dimension (rows, or columns of output projections); underlying = the raw parameter",
    "singular_values": "float64 SVD of matrices formed in float64 from the float32 parameters",
}


def output_paths(root: str | Path, run: str) -> tuple[Path, Path]:
    files = layout.conditioning_files(run)
    return Path(root) / files["json"], Path(root) / files["spectra"]


def _check_config(path: Path, config: dict, spec: RunSpec) -> None:
    # The checkpoint must be this run's, not a file copied from another one.
    if config.get("scale") != spec.scale or int(config.get("context", -1)) != spec.context:
        raise CheckpointError(f"{path}: checkpoint is {config.get('scale')} ctx {config.get('context')}, "
                              f"run {spec.name} wants {spec.scale} ctx {spec.context}")
    stored = config.get("spec")
    if isinstance(stored, dict):
        wrong = {k: stored[k] for k, v in spec.as_dict().items() if k in stored and stored[k] != v}
        if wrong:
            raise CheckpointError(f"{path}: checkpoint spec has {wrong}, not those of run {spec.name}")


def references(model: torch.nn.Module, spec: RunSpec, settings: Settings) -> dict:
    """The two references of every headline number (condition/reference.py): the same run's step-0
    matrices, rebuilt as train builds them, and the Gaussian median for each matrix shape."""
    scale = model.scale
    with torch.random.fork_rng(devices=[]), torch.no_grad():  # leave the caller's RNG alone
        init, _ = build_seeded(spec.arm, scale, model.vocab_size, model.context, spec.seed,
                               model.vocab_multiple)
        at_init = analyse_matrices(effective_matrices(init), settings, progress=False)
    return {"init": {"seed": spec.seed, "headline": at_init.headline()},
            "gaussian": gaussian_reference(scale.d_model, scale.n_head, scale.d_mlp, model.vocab_size)}


def condition_run(spec: RunSpec, root: str | Path, condition: Condition, progress: bool = True) -> dict:
    """Analyse one run's checkpoint and write its two result files; return the JSON document."""
    root = Path(root)
    summary = read_summary(root, spec)
    ckpt = root / layout.run_dir(spec.cell, spec.name) / "model.safetensors"
    sha = sha256_file(ckpt) if ckpt.is_file() else None
    recorded = summary.get("checkpoint_sha256")
    if sha is not None and recorded and recorded != sha:
        raise CheckpointError(f"{ckpt}: sha256 {sha[:12]}... differs from the {recorded[:12]}... recorded in "
                              f"{train_dir(root, spec) / 'summary.json'} (stale or replaced weights)")
    model, config = load_model(ckpt, device="cpu", expected_arm=spec.arm)
    _check_config(ckpt, config, spec)

    device = resolve_device(condition.device, "condition.device").type
    settings = settings_of(condition, device)
    with torch.no_grad():
        analysis = analyse_matrices(effective_matrices(model), settings, progress=progress)
    reference = references(model, spec, settings)
    del model

    final_loss = summary.get("final_val_loss")
    document = {
        "run": spec.name,
        "cell": spec.cell,
        "spec": spec.as_dict(),
        "status": summary["status"],
        "final_val_loss": math.nan if final_loss is None else float(final_loss),
        "checkpoint": {"path": str(ckpt.relative_to(root)), "sha256": sha},
        "settings": {"singular_tol": settings.singular_tol, "sample_rows": settings.sample_rows,
                     "seed": settings.seed, "device": settings.device},
        "variants": analysis.variants,
        "conventions": CONVENTIONS,
        "headline": analysis.headline(),
        "reference": reference,
        "matrices": analysis.matrices,
    }
    json_path, spectra_path = output_paths(root, spec.name)
    # The spectra first: the JSON appearing last marks a complete result.
    write_spectra(spectra_path, ((spec.name, *row) for row in analysis.spectra))
    write_json(json_path, document)
    return document
