"""The rehearsal preset is settle in miniature: every key equal to settle's but the sizes listed here, and the
protocol's shape (both squares, WSD, a sweep of three x2 apart, the reference budget inside the budgets, the
pruning at it, the calibration at the budget below it, added seeds, the angle arms waiting) held as
relations, so a change to settle's protocol fails here until workflow/presets/rehearsal.yaml follows it."""

from __future__ import annotations

from pathlib import Path

import yaml

PRESETS = Path(__file__).resolve().parents[1] / "workflow" / "presets"

# What may differ between settle and its rehearsal: sizes (the model, the context, the batch, the budgets and
# every token count derived from them, how many seeds are added), where the corpus lives and how big it is,
# the device, and the offline evaluation. Anything else is settle's protocol and must be equal.
SIZES = {
    "prepare.source.name", "prepare.source.files", "prepare.source.min_documents", "prepare.val_fraction",
    "prepare.batch_documents", "prepare.workers",
    "train.source", "train.shapes", "train.scales", "train.contexts", "train.budgets", "train.learning_rates",
    "train.batch_sequences", "train.micro_batch_tokens", "train.eval_every_tokens", "train.eval_windows",
    "train.final_eval_tokens", "train.vocab_multiple", "train.device", "train.compile",
    "train.checkpoint_every_tokens", "train.step_angle_every", "train.resources", "train.calibrate.budgets",
    "train.protocol.prune_sweeps.after_budget", "train.protocol.add_seeds",
    "condition.sample_rows",
    "evaluate.tasks", "evaluate.limit", "evaluate.device",
    "speedup.reference_budget",
    "report.title",
}


def load(name: str) -> dict:
    return yaml.safe_load((PRESETS / f"{name}.yaml").read_text())


def flat(tree: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and path not in SIZES:
            out |= flat(value, path + ".")
        else:
            out[path] = value
    return out


def test_the_rehearsal_differs_from_settle_in_sizes_only():
    settle, rehearsal = flat(load("settle")), flat(load("rehearsal"))
    differing = {key for key in settle.keys() | rehearsal.keys() if settle.get(key) != rehearsal.get(key)}
    assert differing <= SIZES, (
        f"workflow/presets/rehearsal.yaml differs from settle.yaml in {sorted(differing - SIZES)}, which are "
        "settle's protocol, not sizes: make rehearsal.yaml follow settle.yaml")


def test_the_rehearsal_keeps_the_shape_of_settles_protocol():
    for name in ("settle", "rehearsal"):
        train, speedup = load(name)["train"], load(name)["speedup"]
        budgets, reference = train["budgets"], speedup["reference_budget"]
        assert budgets[0] < reference < budgets[-1] and reference in budgets, name  # reference inside
        assert train["protocol"]["prune_sweeps"]["after_budget"] == reference, name
        # the calibration at the budget below the reference (settle's 10B: half the cost of 20B's)
        assert train["calibrate"]["budgets"] == [budgets[budgets.index(reference) - 1]], name
        assert train["protocol"]["add_seeds"] >= 1, name
        for scale in train["scales"]:
            sweeps = train["learning_rates"][scale]
            assert set(sweeps) == set(train["arms"]), name
            for lrs in sweeps.values():
                ratios = [b / a for a, b in zip(lrs, lrs[1:], strict=False)]
                assert len(lrs) == 3 and all(abs(r - 2) < 1e-9 for r in ratios), name
    assert load("rehearsal")["prepare"]["source"]["kind"] == "local"  # the data path of a downloaded corpus
    assert load("rehearsal")["train"]["resources"]["cpu-2l"]["processes"] > 1  # torchrun, as on the GPUs
