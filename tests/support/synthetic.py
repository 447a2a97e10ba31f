"""A synthetic but internally consistent results/ tree, for the report's tests.

Nothing here trains a model. Loss curves follow a power law in tokens, L(t) = L_inf + A (k t)^-alpha, where k
is the arm's planted speed-up (so the true speed-up of an arm is known), plus a learning-rate penalty (so the
sweep matters: a parabola in ln(lr) with its minimum at BEST_LR) and a little seed noise. In a WSD grid
(synthetic_params(schedule="wsd")) the budgets of a trunk share its curve up to their branch points, and each
WSD run ends a planted shift (wsd_shift) away from its cosine calibration twin. Conditioning results come
from the real analysis (ngptlab.condition.analyse) run on matrices with planted spectra: each arm gets its
own planted condition number. The speed-up files come from the real speed-up stage
(ngptlab.speedup.cell.speedup_cell). Holes (missing runs, diverged runs, runs without conditioning or
without a timing file) can be punched in on request, as a Snakemake --keep-going run or an older run would
leave them. Timings are planted too: a tokens/s per arm and context, and an MFU against a declared peak
(none: n/a, as on a CPU).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

import torch
import yaml

from ngptlab import layout
from ngptlab import schedule as schedules
from ngptlab.batch import tokens_per_step
from ngptlab.condition.analyse import Analysis, analyse_matrices
from ngptlab.condition.reference import gaussian_reference
from ngptlab.condition.run import CONVENTIONS
from ngptlab.config.load import validate_params
from ngptlab.grid.enumeration import enumerate_cells, enumerate_runs
from ngptlab.grid.runs import RunSpec
from ngptlab.models.layers import MatrixInfo
from ngptlab.models.scales import SCALES
from ngptlab.observe.kappa import Settings
from ngptlab.results import train_dir, write_json, write_spectra
from ngptlab.schedule import branch_point, shares_trunk, shares_trunks
from ngptlab.settings import Params, Train, of_section
from ngptlab.speedup.cell import speedup_cell
from support import fixture_params

# Planted truth per arm: speed-up over gpt in tokens, and the condition number of its attention/MLP matrices.
PLANTED = {
    "gpt": (1.0, 2.0e3),
    "gpt-nowd": (0.9, 5.0e3),
    "ngpt": (3.0, 4.0),
    "gpt-lrm": (1.2, 1.0e3),
    "gpt-scalar": (1.05, 2.0e3),
    "gpt-rownorm": (1.3, 3.0e2),
    "gpt-orth": (2.2, 1.0),
}
INIT_KAPPA = 50.0  # every arm's planted condition number at initialisation
VOCAB = 256  # embeddings are [VOCAB, d]: small, so the analysis stays fast
FAKE_TRAIN_SHA = hashlib.sha256(b"synthetic train.bin").hexdigest()
FAKE_VAL_SHA = hashlib.sha256(b"synthetic val.bin").hexdigest()
FLOPS_PER_TOKEN = 6.0 * 123456  # the summaries' n_params x 6
BEST_LR = 3.0e-3  # every arm's planted optimum: the final loss is a parabola in ln(lr) around it


def synthetic_params(seeds: tuple[int, ...] = (0, 1), min_budget_for_claims: int | None = None,
                     budgets: tuple[int, ...] = (16384, 65536, 262144), schedule: str = schedules.COSINE,
                     calibrate: tuple[int, ...] = (),
                     learning_rates: tuple[float, ...] | None = None) -> dict:
    """The tests' own params (TEST_PARAMS) with a grid of this module's: two contexts, the planted arms, more
    budgets and seeds (validated like any params file), so the report tests do not follow edits of that grid.
    schedule "wsd" makes it a WSD grid, with cosine calibration runs at the budgets of `calibrate`.
    learning_rates: every arm's sweep (default: gpt and ngpt 3e-3 and 1e-2, the others 3e-3 only); three
    that bracket BEST_LR off the grid, e.g. (1.5e-3, 4e-3, 1.2e-2), give every arm an interior best whose
    parabola's vertex is BEST_LR itself."""
    params = fixture_params()
    sweeps = {arm: list(learning_rates) if learning_rates else
              [BEST_LR, 1.0e-2] if arm in ("gpt", "ngpt") else [BEST_LR] for arm in PLANTED}
    params["train"].update(contexts=[64, 128], arms=list(PLANTED), learning_rates={"cpu-4l": sweeps},
                           micro_batch_tokens=8192)  # a multiple of every context the report tests use
    params["train"]["seeds"] = list(seeds)
    params["train"]["budgets"] = list(budgets)
    if shares_trunks(schedule):
        params["train"]["schedule"] = schedules.WSD
        if calibrate:
            params["train"]["calibrate"] = {"budgets": list(calibrate)}
    params["report"]["title"] = "Synthetic results (report test)"
    if min_budget_for_claims is not None:
        params["report"]["min_budget_for_claims"] = min_budget_for_claims
    validate_params(params, source="synthetic params")
    return params


def settings_of(params: Mapping | Params) -> Params:
    """The typed settings of a params mapping (as synthetic_params gives, then edited), or the settings
    themselves."""
    return params if isinstance(params, Params) else Params.of(params)


def _loss(spec: RunSpec, tokens: float) -> float:
    speedup, _ = PLANTED[spec.arm]
    lr_penalty = 0.05 * math.log(spec.lr / BEST_LR) ** 2
    noise = 0.003 * math.sin(17.0 * spec.seed + spec.context + 5.0 * list(PLANTED).index(spec.arm))
    ctx_bonus = 0.1 * math.log2(spec.context / 64)
    return 3.0 - ctx_bonus + 40.0 * (speedup * tokens) ** -0.3 + lr_penalty + noise


def wsd_shift(spec: RunSpec) -> float:
    """The planted final loss of a WSD run minus its cosine twin's (same arm, budget, lr and seed): small for
    every arm but ngpt, varying a little with lr and seed, so calibration has an interval and an arm whose
    shift differs from the baseline's."""
    return (0.03 if spec.arm == "ngpt" else 0.005) + 0.002 * math.cos(3.0 * spec.seed + 1000.0 * spec.lr)


def planted_curve(spec: RunSpec, train: Mapping | Train) -> list[tuple[int, float]]:
    train = train if isinstance(train, Train) else of_section("train", train)
    eval_every = train.eval_every_tokens
    points = list(range(eval_every, spec.budget, eval_every)) + [spec.budget]
    if shares_trunk(spec):
        # The trunk (constant lr, not annealed) is the same for every budget up to its branch point; the
        # cooldown then anneals linearly to the budget's final loss.
        start = branch_point(train, spec.context, spec.budget) * tokens_per_step(train, spec.context)
        shift = wsd_shift(spec)
        return [(t, _loss(spec, t) + (0.05 if t <= start else
                                      shift + (0.05 - shift) * (spec.budget - t) / (spec.budget - start)))
                for t in points]
    # The schedule anneals at the end of each budget: mid-run losses sit a little above the final one.
    return [(t, _loss(spec, t) + 0.05 * (1 - t / spec.budget)) for t in points]


def planted_observations(spec: RunSpec, tokens: float) -> dict:
    """An evaluation row's observations of the weights (observe/observer.py): ngpt turns 3x faster
    (between evaluation points and per step) than every other arm from its first point on, and its input
    embedding's kappa falls from the baseline's 10 to 2.5 over the run; every arm's heads have kappa 3."""
    turning = (0.03 if spec.arm == "ngpt" else 0.01) / math.sqrt(tokens / 4096)
    embed = 10.0 / (1.0 + 3.0 * tokens / spec.budget) if spec.arm == "ngpt" else 10.0
    kinds = ("embed_in", "q", "k", "v", "o", "mlp_u", "mlp_v", "mlp_o", "embed_out")
    return {"angular_rate": dict.fromkeys(kinds, turning),
            "step_angle": dict.fromkeys(kinds, 2 * turning),  # a step turns further than the steps add up
            "kappa": {"embed_in_cov_condition": embed, "layer3_q_head_condition_median": 3.0,
                      "layer4_k_head_condition_median": 3.0}}


def write_run(root: Path, spec: RunSpec, params: Mapping | Params, status: str = "completed") -> dict:
    """results/train/<cell>/<run>/summary.json + metrics.jsonl as the train stage writes them; the summary."""
    out = train_dir(root, spec)
    out.mkdir(parents=True, exist_ok=True)
    train = settings_of(params).train
    batch_tokens = train.batch_sequences * spec.context
    curve = planted_curve(spec, train)
    diagnostics = None
    if status == "diverged":
        curve = curve[: max(1, len(curve) // 2)]
        diagnostics = {"step": curve[-1][0] // batch_tokens, "loss": "nan", "grad_norm": "inf",
                       "last_finite_val_loss": curve[-1][1]}
    rows = []
    for tokens, loss in curve:
        step = tokens // batch_tokens
        rows.append({"step": step, "tokens": tokens, "train_loss": loss + 0.01, "lr": spec.lr,
                     "grad_norm": 0.5, "val_loss": loss, **planted_observations(spec, tokens)})
    if status == "diverged":
        rows.append({"step": rows[-1]["step"] + 1, "tokens": rows[-1]["tokens"] + batch_tokens,
                     "train_loss": None, "lr": spec.lr, "grad_norm": None})
    (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    checkpoint = hashlib.sha256(f"checkpoint {spec.name}".encode()).hexdigest()
    summary = {
        "run": spec.name, "spec": spec.as_dict(), "status": status,
        "final_val_loss": curve[-1][1] if status == "completed" else None,
        "tokens": curve[-1][0], "steps": curve[-1][0] // batch_tokens,
        "n_params": 123456, "train_flops": FLOPS_PER_TOKEN * curve[-1][0], "checkpoint_sha256": checkpoint,
        "data": {"source": train.source, "train_sha256": FAKE_TRAIN_SHA, "val_sha256": FAKE_VAL_SHA},
        "code_revision": "0123456789abcdef0123456789abcdef01234567",
        "params": {k: getattr(train, k)
                   for k in ("batch_sequences", "warmup_steps", "grad_clip", "eval_windows")},
        "diagnostics": diagnostics,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def planted_tokens_per_s(spec: RunSpec) -> float:
    """A run's planted speed: slower at longer contexts, nGPT 1.25x gpt's step, a little seed noise."""
    cost = 1.25 if spec.arm == "ngpt" else 1.0
    return 2.0e4 * (64 / spec.context) ** 0.5 / cost * (1 + 0.01 * spec.seed)


def write_timing(root: Path, spec: RunSpec, tokens: int, steps: int, peak_tflops: float | None) -> None:
    """results/timing/<cell>/<run>.json with the keys the train stage writes (train/loop.py timing_record)."""
    tokens_per_s = planted_tokens_per_s(spec)
    mfu = None if peak_tflops is None else FLOPS_PER_TOKEN * tokens_per_s / (peak_tflops * 1e12)
    peak = ({"peak_tflops": None, "peak_source": "unknown (cpu); declare train.peak_tflops for an MFU"}
            if peak_tflops is None else {"peak_tflops": peak_tflops, "peak_source": "declared"})
    doc = {"run": spec.name, "wall_s": tokens / tokens_per_s * 1.1, "train_s": tokens / tokens_per_s,
           "steps": steps, "tokens": tokens, "tokens_per_s": tokens_per_s, "mfu": mfu,
           "flops_per_token": FLOPS_PER_TOKEN, "world_size": 1, "device": "cpu", "precision": "fp32",
           "compile": False, **peak, "device_name": "cpu",
           "rows": [{"step": steps, "tokens": tokens, "tokens_per_s": tokens_per_s, "mfu": mfu}]}
    out = root / layout.timing_file(spec.cell, spec.name)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")


def _planted(rows: int, cols: int, kappa: float, gen: torch.Generator) -> torch.Tensor:
    """A rows x cols matrix whose singular values run geometrically from 1 down to 1/kappa."""
    k = min(rows, cols)
    u, _ = torch.linalg.qr(torch.randn(rows, k, generator=gen, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(cols, k, generator=gen, dtype=torch.float64))
    s = torch.logspace(0, -math.log10(kappa), k, dtype=torch.float64)
    return (u * s) @ v.T


def planted_matrices(arm: str, scale_name: str, kappa: float | None = None) -> list[MatrixInfo]:
    """Every matrix a model of this scale has, with the arm's planted condition number (or `kappa`)."""
    scale = SCALES[scale_name]
    d, heads = scale.d_model, scale.n_head
    kappa = PLANTED[arm][1] if kappa is None else kappa
    # A stable seed (Python's hash() of a str changes between processes).
    seed = int(hashlib.sha256(f"{arm} {scale_name}".encode()).hexdigest()[:8], 16)
    gen = torch.Generator().manual_seed(seed)

    def info(name, kind, layer, shape, norm_dim, n_heads=None) -> MatrixInfo:
        weight = _planted(*shape, kappa if kind not in ("embed_in", "embed_out") else 10 * kappa, gen).float()
        # the raw parameter, analysed for every arm: rescaled where the arm has multipliers or a scalar
        underlying = 3.0 * weight if arm in ("gpt-lrm", "gpt-scalar", "gpt-orth") else weight
        return MatrixInfo(name, kind, layer, weight, underlying, norm_dim, n_heads)

    out = [info("embed_in", "embed_in", None, (VOCAB, d), 1)]
    for i in range(scale.n_layer):
        for kind, shape, norm_dim in (("q", (d, d), 1), ("k", (d, d), 1), ("v", (d, d), 1), ("o", (d, d), 0),
                                      ("mlp_u", (4 * d, d), 1), ("mlp_v", (4 * d, d), 1),
                                      ("mlp_o", (d, 4 * d), 0)):
            out.append(info(f"layers.{i}.{kind}", kind, i, shape, norm_dim, heads if kind in "qkv" else None))
    out.append(info("embed_out", "embed_out", None, (VOCAB, d), 1))
    return out


@lru_cache(maxsize=16)
def _analysis(arm: str, scale: str, settings: Settings) -> Analysis:
    # One analysis per arm and scale: every run of an arm shares its planted matrices (keeps tests fast).
    return analyse_matrices(planted_matrices(arm, scale), settings, progress=False)


@lru_cache(maxsize=16)
def _references(arm: str, scale_name: str, settings: Settings) -> dict:
    # At initialisation every arm is planted at INIT_KAPPA; the Gaussian medians are the real ones.
    scale = SCALES[scale_name]
    at_init = analyse_matrices(planted_matrices(arm, scale_name, INIT_KAPPA), settings, progress=False)
    return {"init": {"seed": 0, "headline": at_init.headline()},
            "gaussian": gaussian_reference(scale.d_model, scale.n_head, scale.d_mlp, VOCAB)}


def write_conditioning(root: Path, spec: RunSpec, params: Mapping | Params,
                       status: str = "completed") -> None:
    """results/conditioning/<run>.json + .spectra.parquet, from the real analysis of planted matrices."""
    cond = settings_of(params).condition
    settings = Settings(singular_tol=float(cond.singular_tol), sample_rows=int(cond.sample_rows),
                        seed=int(cond.seed))
    analysis = _analysis(spec.arm, spec.scale, settings)
    summary = json.loads((train_dir(root, spec) / "summary.json").read_text())
    document = {
        "run": spec.name, "cell": spec.cell, "spec": spec.as_dict(), "status": status,
        "final_val_loss": math.nan if summary["final_val_loss"] is None else summary["final_val_loss"],
        "checkpoint": {"path": f"{layout.run_dir(spec.cell, spec.name)}/model.safetensors",
                       "sha256": summary["checkpoint_sha256"]},
        "settings": {"singular_tol": settings.singular_tol, "sample_rows": settings.sample_rows,
                     "seed": settings.seed, "device": settings.device},
        "variants": analysis.variants, "conventions": CONVENTIONS, "headline": analysis.headline(),
        "reference": _references(spec.arm, spec.scale, settings), "matrices": analysis.matrices,
    }
    files = layout.conditioning_files(spec.name)
    write_spectra(root / files["spectra"], ((spec.name, *row) for row in analysis.spectra))
    write_json(root / files["json"], document)


def write_meta(root: Path, params: Mapping | Params) -> None:
    out = root / layout.tokens_dir(settings_of(params).train.source)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"format": "synthetic", "vocab_size": 50257, "tokenizer": {"name": "r50k_base"},
            "splits": {"train": {"file": "train.bin", "tokens": 1_000_000, "documents": 900,
                                 "sha256": FAKE_TRAIN_SHA},
                       "val": {"file": "val.bin", "tokens": 20_000, "documents": 18, "sha256": FAKE_VAL_SHA}}}
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")


def write_results(root: str | Path, params: dict, missing: tuple[str, ...] = (),
                  diverged: tuple[str, ...] = (), no_conditioning: tuple[str, ...] = (),
                  no_timing: tuple[str, ...] = (), peak_tflops: float | None = None,
                  meta: bool = True) -> Path:
    """The whole tree under root; returns the path of the params file written beside it.

    missing: runs with no output at all (failed or never run); their cell gets no speed-up file, as the
    speed-up stage refuses a partial cell. diverged: runs that diverged (all outputs, status "diverged").
    no_conditioning: finished runs whose condition stage did not run. no_timing: finished runs without
    results/timing/<cell>/<run>.json (trained before timing files existed). peak_tflops: the declared peak of
    the timings' MFU (None: unknown, no MFU, as on a CPU).
    """
    root = Path(root)
    params_path = root / "params.yaml"
    params_path.write_text(yaml.safe_dump(params, sort_keys=False))
    settings = Params.of(params)
    if meta:
        write_meta(root, settings)
    specs = enumerate_runs(settings)
    for spec in specs:
        if spec.name in missing:
            continue
        status = "diverged" if spec.name in diverged else "completed"
        summary = write_run(root, spec, settings, status)
        if spec.name not in no_timing:
            write_timing(root, spec, summary["tokens"], summary["steps"], peak_tflops)
        if spec.name not in no_conditioning:
            write_conditioning(root, spec, settings, status)
    for cell in enumerate_cells(settings):
        if not any(s.name in missing for s in specs if s.cell == cell):
            speedup_cell(settings, cell, root)
    return params_path


def planted_speedup(arm: str) -> float:
    return PLANTED[arm][0]
