"""`ngptlab design`: check a design (a params file: its grid, sweeps, seeds, train.protocol and speed-up
settings) on planted worlds before any GPU-hour is spent.

For every planted truth (design/truths.py) it plays --worlds worlds: the loss model (design/loss_model.py)
gives every run's losses, the protocol runs through the stages' own functions and the speed-up stage's
analyse_cell reads the result (design/protocol.py); the table (design/table.py) says how often the reading
is right, how often intervals cover the truth, and whether the design meets the project's thresholds,
beside its GPU-hours as `ngptlab plan` prices them.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from dataclasses import asdict

from ngptlab import options
from ngptlab.config.load import read_mapping, validate_params
from ngptlab.design.dose_table import NOISES, dose_table, scaled_noise
from ngptlab.design.loss_model import DESIGN_KEYS, loss_model
from ngptlab.design.measured_noise import pooled_log_variance, pooled_mechanism_sd, seed_sd_from
from ngptlab.design.mechanisms import dose_worlds
from ngptlab.design.policies import (
    CANDIDATES,
    MAX_GAP,
    adopted,
    comparison_lines,
    comparison_rows,
    under_policy,
)
from ngptlab.design.printout import table_lines
from ngptlab.design.resolution import readable_range
from ngptlab.design.simulate import simulate
from ngptlab.design.table import design_table
from ngptlab.design.truths import planted_speedups, truths
from ngptlab.errors import ParamsError
from ngptlab.plan.edit import parse_assignment
from ngptlab.plan.estimate import MFU, PEAK_TFLOPS, estimate_plan
from ngptlab.plan.printout import projection
from ngptlab.progress_lines import ProgressLines
from ngptlab.sample_size import SD_CONFIDENCE, sd_upper_bound
from ngptlab.settings import Params
from ngptlab.speedup.estimator import reference_tokens
from ngptlab.stats import LEVEL

LOSS_MODEL = "--loss-model"
LABELS, DOSE = "labels", "dose-response"
ONLY = (LABELS, DOSE)
DOSE_STREAM = 1  # the dose-response worlds' draws: [seed, DOSE_STREAM, noise, world, w] (design/simulate.py)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = options.examples(
        "ngptlab design --params workflow/presets/settle.yaml  # the table on stdout, progress on stderr",
        "ngptlab design --params workflow/presets/settle.yaml --loss-model seed_sd=0.005 --json")
    options.add_json(parser)
    options.add_no_progress(parser)
    parser.add_argument("--worlds", type=int, metavar="N",
                        help="planted worlds per truth (default: design.worlds, 200)")
    parser.add_argument("--seed", type=int, help="the worlds' random seed (default: design.seed, 0)")
    parser.add_argument("--jobs", type=int, metavar="N", help="processes (default: every CPU available)")
    parser.add_argument("--loss-model", action="append", default=[], metavar="KEY=VALUE",
                        help=f"a loss-model parameter over the params file's design section, the value as "
                             f"YAML (keys: {', '.join(DESIGN_KEYS)}); repeatable. The params file is not "
                             f"edited (that is `ngptlab plan --set`)")
    options.add_renamed(parser, "--set", "--loss-model KEY=VALUE: a loss-model parameter of this design "
                        "(`ngptlab plan --set` edits params keys)", metavar="KEY=VALUE")
    parser.add_argument("--compare-policies", action="store_true",
                        help="the design under each learning-rate policy (largest, crossing, budget, and "
                             "cosine as the paper), side by side: gap to the planted law, coverage, correct "
                             "readings, GPU-hours (design/policies.py)")
    parser.add_argument("--resolution", action="store_true",
                        help="also scan ngpt's planted speed-up upward for the smallest the design reads "
                             "right, and on from there for the largest (design/resolution.py): the readable "
                             "range a preset states, beside the budgets' span the grid can express")
    parser.add_argument("--only", choices=ONLY,
                        help="play only the label-based truths (design/truths.py) or only the dose-response "
                             "worlds (design/mechanisms.py); default: both")
    parser.add_argument("--noise-from", metavar="DIR",
                        help="set seed_sd from the one-sided 80%% upper confidence bound of a pilot's sd of "
                             "ln S over seeds, pooled over DIR/results/speedup/*.json, and kappa_sd and "
                             "angle_sd from that bound of the sd of ln kappa and ln angle per step over "
                             "seeds within each arm, pooled over those files' dose-response points "
                             "(design/measured_noise.py)")


def with_design(params: dict, assignments: list[str], source: str) -> Params:
    """The typed settings of a params mapping with design.<KEY> set from each KEY=VALUE, validated (a bad key
    or value names itself)."""
    design = dict(params.get("design", {}))
    for key, value in (parse_assignment(a, example="seed_sd=0.005", option=LOSS_MODEL) for a in assignments):
        if key not in DESIGN_KEYS:
            raise ParamsError(f"{LOSS_MODEL} {key}: not a loss-model parameter; "
                              f"keys: {', '.join(DESIGN_KEYS)}")
        design[key] = value
    return validate_params({**params, "design": design}, source=source)


def gpu_hours(params: Params) -> dict:
    """What `ngptlab plan` prints: the runs listed now and, with train.protocol, the whole protocol."""
    projected = projection(params, mfu=MFU, peak_tflops=PEAK_TFLOPS)
    return {"mfu": MFU, "peak_tflops": PEAK_TFLOPS,
            "listed": estimate_plan(params, MFU, PEAK_TFLOPS)["total_gpu_hours"],
            "projected": None if projected is None else projected["total_gpu_hours"]}


def dose_document(params: Params, worlds: int, seed: int, jobs: int | None = None,
                  say: Callable[[str], None] | None = None) -> dict | None:
    """The dose-response worlds' table (design/dose_table.py) at each noise level; None where the grid's
    arms hold none of them."""
    planted = dose_worlds(params.train.arms)
    if not planted:
        return None
    model, outcomes = loss_model(params), {}
    for noise in NOISES:
        def played(i: int, noise: int = noise) -> None:
            say(f"dose-response world {i + 1}/{len(planted)} at x{noise} seed noise ({planted[i].label}): "
                f"{worlds} world{'s' * (worlds != 1)} played")
        outcomes[noise], _ = simulate(params, scaled_noise(model, noise), planted, worlds, seed, jobs,
                                      played if say else None, stream=(DOSE_STREAM, noise))
    return {"kappa_sd": model.kappa_sd, "angle_sd": model.angle_sd, **dose_table(outcomes, planted)}


def design_document(params: Params, params_file: str, worlds: int | None = None, seed: int | None = None,
                    jobs: int | None = None, say: Callable[[str], None] | None = None,
                    only: str | None = None) -> dict:
    """The table of the module docstring, with the settings it was made under; `say`: a progress line per
    planted truth played; only: LABELS or DOSE plays only those (default: both)."""
    design = params.design
    worlds = worlds or design.worlds
    seed = design.seed if seed is None else seed
    model = loss_model(params)
    planted = truths(planted_speedups(params), params.train.arms) if only != DOSE else []
    primary = params.speedup.primary_contrast
    margin = float(params.speedup.equivalence_margin)

    def truth_played(i: int) -> None:
        say(f"truth {i + 1}/{len(planted)} ({planted[i].label}): {worlds} world{'s' * (worlds != 1)} played")

    outcomes, noise_free = simulate(params, model, planted, worlds, seed, jobs, truth_played if say else None)
    table = design_table(outcomes, planted, primary, margin)
    for scenario, played in zip(table["scenarios"], noise_free, strict=True):
        # what the protocol trains in this truth: its seeds go where the policy sends them
        scenario["protocol_gpu_hours"] = estimate_plan(played["params"], MFU, PEAK_TFLOPS)["total_gpu_hours"]
    dose = dose_document(params, worlds, seed, jobs, say) if only != LABELS else None
    return {"params_file": params_file, "worlds": worlds, "seed": seed, "level": LEVEL,
            "model": asdict(model), "lr_policy": params.speedup.lr_policy, "schedule": params.train.schedule,
            "primary": primary, "margin": margin, "gpu_hours": gpu_hours(params), **table,
            "dose_response": dose, "passed": table["passed"] and (dose is None or dose["passed"])}


def measured_seed_sd(params: Params, root: str) -> dict:
    """{root, log_sd, df, log_sd_upper, confidence, seed_sd}: the seed noise a pilot's speed-ups measured
    (design/measured_noise.py), read at the reference budget, where the target is
    (speedup.reference_budget). A pilot's few seeds measure the sd loosely, so seed_sd is taken from the
    sd's one-sided upper confidence bound (chi-square, sample_size.sd_upper_bound), not its point estimate:
    a design that holds there does not rest on a lucky pilot."""
    variance, df = pooled_log_variance(root)
    reference = reference_tokens(params.speedup.reference_budget, params.train.budgets)
    upper = sd_upper_bound(math.sqrt(variance), df + 1)
    seed_sd = seed_sd_from(loss_model(params), upper**2, reference)
    return {"root": root, "log_sd": math.sqrt(variance), "df": df, "log_sd_upper": upper,
            "confidence": SD_CONFIDENCE, "seed_sd": seed_sd}


def measured_mechanism_sd(root: str) -> dict[str, dict]:
    """{kappa_sd / angle_sd: {sd, df, upper, value}}: the seed sd of ln kappa and ln angle per step a pilot's
    dose-response points measured (design/measured_noise.py), each taken, as seed_sd is, at its one-sided
    upper confidence bound (value: the bound); a key the pilot did not measure is absent (the design keeps
    its own)."""
    return {key: {"sd": sd, "df": df, "value": sd_upper_bound(sd, df + 1)}
            for key, (sd, df) in pooled_mechanism_sd(root).items()}


def run(args: argparse.Namespace, params: Params) -> int:
    written = read_mapping(args.params)  # the file's own mapping: --loss-model sets it before validation
    params = with_design(written, args.loss_model, args.params)
    measured = measured_seed_sd(params, args.noise_from) if args.noise_from else None
    if measured:
        measured["mechanisms"] = measured_mechanism_sd(args.noise_from)
        sets = [f"seed_sd={measured['seed_sd']!r}",
                *(f"{key}={m['value']!r}" for key, m in measured["mechanisms"].items())]
        params = with_design(written, [*args.loss_model, *sets], args.params)
    say = ProgressLines("design", shown=not args.no_progress)  # stderr: stdout is the table's (or JSON's)
    if args.compare_policies:
        documents = {name: design_document(under_policy(params, name), args.params, args.worlds, args.seed,
                                           args.jobs, lambda line, name=name: say(f"{name}: {line}"),
                                           only=LABELS)  # the policies' gaps are the label truths'
                     for name in CANDIDATES}
        rows = comparison_rows(documents)
        if args.json:
            print(json.dumps({"policies": rows, "adopted": adopted(rows), "max_gap": MAX_GAP,
                              "noise_from": measured}, indent=1))
        else:
            print("\n".join(comparison_lines(rows)))
        return 0
    document = {**design_document(params, args.params, args.worlds, args.seed, args.jobs, say, args.only),
                "noise_from": measured}
    if args.resolution:
        # the speed-ups the document played already are read from its table, not played again
        document["resolution"] = readable_range(params, loss_model(params), document["worlds"],
                                                document["seed"], args.jobs, say, document)
    if args.json:
        print(json.dumps(document, indent=1))
    else:
        print("\n".join(table_lines(document)))
    return 0
