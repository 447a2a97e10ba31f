"""params.yaml validation: every malformed file gets one clear error naming the key and allowed values; an
optional key's default comes from the schema, without being filled into the mapping."""

from __future__ import annotations

import copy
import dataclasses
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from support import TEST_PARAMS, fixture_params

from ngptlab.batch import BatchSplit, split_batch
from ngptlab.config.load import load_params, validate_params
from ngptlab.errors import ParamsError
from ngptlab.grid.enumeration import enumerate_cells, enumerate_runs, find_run
from ngptlab.grid.resources import run_shape, scale_layout
from ngptlab.grid.runs import RunSpec, parse_run_name
from ngptlab.grid.sweeps import lr_sweep
from ngptlab.layout import REPO_ROOT
from ngptlab.models.scales import SCALES
from ngptlab.settings import Params, allowed_arms, default, load_schema, of_section

DEFAULT = fixture_params()  # the tests' own params; the researcher's params.yaml can change freely


def _edit(edit) -> dict:
    params = copy.deepcopy(DEFAULT)
    edit(params)
    return params


def test_default_params_are_valid():
    load_params(REPO_ROOT / "params.yaml")  # the researcher's experiment, whatever grid it holds
    assert load_params(TEST_PARAMS).train.arms == tuple(allowed_arms())  # the tests' grid runs every arm


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda p: p["train"].update(budgets=[16384, -5]),
         "train.budgets[1]: -5 must be >= 1"),
        (lambda p: p["train"].update(arms=["gpt", "ngtp"]),
         f"train.arms[1]: 'ngtp' is not allowed; allowed values: {', '.join(allowed_arms())}"),
        (lambda p: p["train"].update(scales=["2B"]),
         f"train.scales: unknown scale '2B'; named scales: {', '.join(SCALES)}; "
         "train.shapes: cpu-4l (define a new one under train.shapes)"),
        (lambda p: p["train"]["shapes"].update({"w100": {"n_layer": 2, "d_model": 100, "n_head": 3,
                                                         "mlp_ratio": 4}}),
         "train.shapes.w100: d_model 100 is not a multiple of n_head 3"),
        (lambda p: p["train"]["shapes"].update({"odd": {"n_layer": 2, "d_model": 96, "n_head": 32,
                                                        "mlp_ratio": 4}}),
         "train.shapes.odd: head_dim 3 (d_model / n_head) must be even for rotary embeddings"),
        (lambda p: p["train"]["shapes"].update({"frac": {"n_layer": 2, "d_model": 64, "n_head": 4,
                                                         "mlp_ratio": 2.01}}),
         "train.shapes.frac: mlp_ratio 2.01 x d_model 64 must be a positive whole number of MLP units"),
        (lambda p: p["train"]["shapes"].update({"x": {"n_layer": 2, "d_model": 64, "n_head": 4}}),
         "train.shapes.x: missing required key 'mlp_ratio'"),
        (lambda p: p["train"]["shapes"]["cpu-4l"].update(n_layer=0),
         "train.shapes.cpu-4l.n_layer: 0 must be >= 1"),
        (lambda p: p["train"].update(batch_sequences="512"),
         "train.batch_sequences: expected integer, got str '512'"),
        (lambda p: p["train"].update(learnig_rate=1e-3),
         "unknown key train.learnig_rate; allowed keys: activation_checkpointing, added_seeds, angles, arms, "
         "batch_sequences"),
        (lambda p: p["train"].update(warmup_steps=-1),
         "train.warmup_steps: -1 must be >= 0"),
        (lambda p: p["train"]["learning_rates"]["cpu-4l"].update(gpt={"ctx128": [0.0]}),
         "train.learning_rates.cpu-4l.gpt.ctx128[0]: 0.0 must be > 0"),
        (lambda p: p["train"]["learning_rates"]["cpu-4l"].update(gpt={"ctx64": [1e-3]}),
         "train.learning_rates.cpu-4l.gpt: missing ctx128 (train.contexts lists 128)"),
        (lambda p: p["train"]["learning_rates"]["cpu-4l"].update(gpt={"ctx128": [1e-3], "ctx256": [1e-3]}),
         "train.learning_rates.cpu-4l.gpt: ctx256 is not in train.contexts [128]"),
        (lambda p: p["train"].update(batch_sequences=6, micro_batch_tokens=512),
         "train.micro_batch_tokens (512) = 4 sequences of 128 must divide train.batch_sequences (6)"),
        (lambda p: p["train"].update(budgets=[256]),
         "train.budgets: 256 is smaller than one batch at context 128 (train.batch_sequences 4 x 128 = 512 "
         "tokens)"),
        (lambda p: p.update(extra={}),
         "unknown key extra; allowed keys: condition, design, evaluate, prepare, report, speedup, train"),
        (lambda p: p["train"]["learning_rates"].update({"bad name": {"gpt": [1e-3]}}),
         "train.learning_rates: 'bad name' does not match"),
        (lambda p: p["train"]["learning_rates"]["cpu-4l"].update(gpt=[0.0]),
         "train.learning_rates.cpu-4l.gpt[0]: 0.0 must be > 0"),
        (lambda p: p["train"]["learning_rates"]["cpu-4l"].pop("ngpt"),
         "train.learning_rates.cpu-4l: missing arm 'ngpt' (listed in train.arms)"),
        (lambda p: p["prepare"]["source"].update(kind="s3"),
         "prepare.source.kind: 's3' is not allowed; allowed values: embedded, hf, local"),
        (lambda p: p["prepare"]["source"].update(kind="local"),
         "prepare.source: missing required key 'files'"),
        (lambda p: p["prepare"]["source"].update(kind="hf", dataset="d", max_documents=5, min_documents=10),
         "prepare.source.max_documents (5) is below prepare.source.min_documents (10)"),
        (lambda p: p["prepare"]["source"].update(min_documents=0),
         "prepare.source.min_documents: 0 must be >= 1"),
        (lambda p: p["train"].pop("seeds"),
         "train: missing required key 'seeds'"),
        (lambda p: p["train"].update(micro_batch_tokens=500),
         "train.micro_batch_tokens (500) must be a multiple of every context in train.contexts; 128 does not "
         "divide it"),
        (lambda p: p["speedup"].update(baseline="gpt-orth") or p["train"].update(arms=["gpt", "ngpt"]),
         "speedup.baseline 'gpt-orth' is not among train.arms: gpt, ngpt"),
        (lambda p: p["speedup"].update(reference_budget=100),
         "speedup.reference_budget: 100 tokens lies outside train.budgets (2,048 to 8,192): a target there "
         "would be an extrapolation"),
        (lambda p: p["speedup"].update(reference_budget="smallest"),
         "speedup.reference_budget: 'smallest' is not allowed; allowed values: largest, middle"),
        (lambda p: p["train"].update(source="owt"),
         "train.source 'owt' must name the prepared source prepare.source.name 'shakespeare-news'"),
        (lambda p: p["train"]["resources"]["cpu-4l"].update(nodes=0),
         "train.resources.cpu-4l.nodes: 0 must be >= 1"),
        (lambda p: p["train"].update(max_restarts=-1),
         "train.max_restarts: -1 must be >= 0"),
        (lambda p: p["train"]["resources"]["cpu-4l"].update(nodes=3),
         "train.resources.cpu-4l: 3 node(s) x 1 process(es) = 3 process(es): train.batch_sequences (4) "
         "cannot be split evenly over 3 processes"),
        (lambda p: p["train"]["resources"]["cpu-4l"].update(nodes=2, processes=1) or p["train"].update(
            batch_sequences=12, micro_batch_tokens=512, budgets=[12 * 128]),
         "train.resources.cpu-4l: 2 node(s) x 1 process(es) = 2 process(es): train.micro_batch_tokens "
         "(512) = 4 sequences does not divide the 6 sequences each of 2 processes gets per step"),
        (lambda p: p["train"]["resources"]["cpu-4l"].update(gpus=2, processes=1),
         "train.resources.cpu-4l: processes (1) must equal gpus (2): one training process per GPU, on each "
         "node"),
        (lambda p: p["train"]["learning_rates"]["cpu-4l"]["gpt"].__setitem__(0, float("nan")),
         "train.learning_rates.cpu-4l.gpt[0]: nan is not a finite number"),
        (lambda p: p["train"].update(grad_clip=float("inf")), "train.grad_clip: inf is not a finite number"),
        (lambda p: p["prepare"].update(val_fraction=float("nan")),
         "prepare.val_fraction: nan is not a finite"),
        (lambda p: p["speedup"].update(equivalence_margin=float("inf")),
         "speedup.equivalence_margin: inf is not a finite number"),
        (lambda p: p["train"].update(warmup_max_fraction=float("nan")),
         "train.warmup_max_fraction: nan is not a finite number"),
        (lambda p: p["train"].update(batch_sequences=3, micro_batch_tokens=128),
         "train.budgets: 2,048 tokens at context 128 are 5.33 batches of 384 tokens "
         "(train.batch_sequences 3 x 128): a run would train 1,920 tokens, 6.2% short"),
    ],
)
def test_malformed_params_name_the_key(edit, expected):
    with pytest.raises(ParamsError) as err:
        validate_params(_edit(edit), source="params.yaml")
    assert str(err.value).startswith(f"params.yaml: {expected}")


def test_unreadable_files(tmp_path: Path):
    (tmp_path / "empty.yaml").write_text("# nothing here\n")
    with pytest.raises(ParamsError, match=r"empty.yaml is empty; copy params.yaml"):
        load_params(tmp_path / "empty.yaml")
    with pytest.raises(ParamsError, match="params file not found"):
        load_params(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("train: [unclosed\n")
    with pytest.raises(ParamsError, match="not valid YAML"):
        load_params(broken)
    broken.write_text("- just a list\n")
    with pytest.raises(ParamsError, match="expected a mapping of sections"):
        load_params(broken)


def test_runs_and_cells_of_the_tests_grid():
    runs = enumerate_runs(Params.of(DEFAULT))
    train = DEFAULT["train"]
    lrs_per_scale = sum(len(v) for v in train["learning_rates"]["cpu-4l"].values())
    assert len(runs) == len(train["contexts"]) * len(train["budgets"]) * len(train["seeds"]) * lrs_per_scale
    assert len({r.name for r in runs}) == len(runs)
    assert enumerate_cells(Params.of(DEFAULT)) == ["cpu-4l-ctx128"]
    assert runs[0].name == "cpu-4l-ctx128-gpt-t2048-lr0.005-s0"


def test_shipped_grids_give_every_arm_the_same_sweep():
    for path in [TEST_PARAMS, *sorted((REPO_ROOT / "workflow" / "presets").glob("*.yaml"))]:
        train = load_params(path).train
        for scale in train.scales:
            for context in train.contexts:
                sweeps = {tuple(lr_sweep(train, scale, context, arm)) for arm in train.arms}
                assert len(sweeps) == 1 and len(sweeps.pop()) >= 3, (path, scale, context)


def test_shipped_grids_total_training_tokens():
    # the researcher's default grid must keep `make` within 15 minutes on 2 cores: at most the 737,280
    # training tokens of the earlier grid
    assert sum(run.budget for run in enumerate_runs(load_params(REPO_ROOT / "params.yaml"))) <= 737_280


@pytest.mark.parametrize("spec", [
    RunSpec("0.5B", 1024, "gpt-nowd", 10**10, 1.5e-5, 3),
    RunSpec("cpu-4l", 64, "gpt-orth", 16384, 0.01, 0),
    RunSpec("gpu-small", 8192, "ngpt", 2 * 10**9, 3e-3, 12),
])
def test_run_names_round_trip(spec: RunSpec):
    assert parse_run_name(spec.name) == spec


def test_bad_run_names():
    with pytest.raises(ParamsError, match="is not of the form"):
        parse_run_name("cpu-4l-ctx64-transformer-t1-lr1-s0")
    with pytest.raises(ParamsError, match="is not in the grid"):
        find_run(Params.of(DEFAULT), "cpu-4l-ctx64-gpt-t16384-lr0.5-s0")


def test_schema_names_match_the_model_registry():
    from ngptlab.models.arms import table as arm_table

    assert allowed_arms() == list(arm_table())
    validator = jsonschema.Draft202012Validator(load_schema()["$defs"]["scale"])
    assert all(validator.is_valid(name) for name in SCALES)


def test_a_shape_defined_in_params_names_runs_and_resolves():
    params = _edit(lambda p: p["train"]["shapes"].update(
        {"w96-3l": {"n_layer": 3, "d_model": 96, "n_head": 4, "mlp_ratio": 2.5}}) or p["train"].update(
        scales=["w96-3l"], learning_rates={"w96-3l": p["train"]["learning_rates"]["cpu-4l"]},
        resources={"w96-3l": p["train"]["resources"]["cpu-4l"]}))
    settings = validate_params(params)
    run = enumerate_runs(settings)[0]
    assert run.name.startswith("w96-3l-ctx") and parse_run_name(run.name) == run
    shape = run_shape(settings.train, "w96-3l")
    assert (shape.n_layer, shape.d_model, shape.n_head, shape.head_dim, shape.d_mlp) == (3, 96, 4, 24, 240)
    assert run_shape(settings.train, "0.5B").d_model == 1024  # named scales stay the defaults


def test_scale_names_that_would_break_run_names_are_refused():
    for bad in ("a-ctx1-b", "-lead", "sp ace"):
        with pytest.raises(ParamsError, match=r"train\.shapes: .* does not match"):
            validate_params(_edit(lambda p, bad=bad: p["train"]["shapes"].update(
                {bad: {"n_layer": 1, "d_model": 8, "n_head": 2, "mlp_ratio": 4}})))


def test_cli_rejects_bad_params_before_anything_runs(tmp_path: Path):
    bad = tmp_path / "params.yaml"
    bad.write_text(yaml.safe_dump(_edit(lambda p: p["train"].update(arms=["gpt", "ngtp"]))))
    before = sorted(tmp_path.rglob("*"))
    result = subprocess.run([sys.executable, "-m", "ngptlab.cli", "plan", "--params", str(bad)],
                            capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()  # one line, naming the file, the key and the allowed arms
    assert line.startswith(f"ngptlab plan: error: {bad}: train.arms[1]: 'ngtp' is not allowed")
    assert line.endswith(f"allowed values: {', '.join(allowed_arms())}")
    assert sorted(tmp_path.rglob("*")) == before


def test_the_global_batch_is_the_same_on_any_number_of_nodes():
    """nodes x processes share batch_sequences; accumulation fills what one forward pass does not."""
    two_nodes = _edit(lambda p: p["train"]["resources"]["cpu-4l"].update(nodes=2, processes=2))
    layout = scale_layout(validate_params(two_nodes).train, "cpu-4l")
    assert (layout.nodes, layout.world_size, layout.gpus) == (2, 4, 0)
    no_nodes = _edit(lambda p: p["train"]["resources"]["cpu-4l"].pop("nodes"))
    assert scale_layout(validate_params(no_nodes).train, "cpu-4l").nodes == 1  # nodes is optional
    # the paper: 512 sequences of 1k, 32 per forward pass; 1, 4 and 8 nodes of 8 GPUs
    assert split_batch(512, 32768, 1024, 8) == BatchSplit(64, 32, 2)
    assert split_batch(512, 32768, 1024, 32) == BatchSplit(16, 16, 1)
    assert split_batch(512, 32768, 8192, 64) == BatchSplit(8, 4, 2)
    with pytest.raises(ParamsError, match=r"cannot be split evenly over 24 processes"):
        split_batch(512, 32768, 1024, 24)


def test_load_gives_typed_settings_with_the_schemas_defaults_and_the_files_values_first():
    params = load_params(TEST_PARAMS)
    assert params == Params.of(DEFAULT) and "schedule" not in DEFAULT["train"]
    train = params.train
    assert train.schedule == "cosine" and train.cooldown_fraction == 0.2  # the schema's defaults
    assert train.final_eval_tokens == DEFAULT["train"]["final_eval_tokens"]  # the file's value
    assert of_section("train", {**DEFAULT["train"], "schedule": "wsd"}).schedule == "wsd"
    assert train.resources["cpu-4l"].nodes == 1 and train.peak_tflops is None  # null stays null
    assert train.budgets == (2048, 8192) and train.pruned_sweeps == ()  # lists become tuples
    with pytest.raises(dataclasses.FrozenInstanceError):
        train.budgets = (1,)  # type: ignore[misc]
    assert params.speedup.baselines == ("gpt",)
    assert default("train.pruned_sweeps") == []
    with pytest.raises(KeyError, match="train.batch_sequences"):
        default("train.batch_sequences")  # required: no default
