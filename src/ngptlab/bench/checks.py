"""`bench gpu`'s verdicts: every measurement against a stated threshold, as pass, FAIL or not proven.

Not proven is neither: a check skipped (--skip, --deadline-s, past the step-time budget, DDP on fewer than
2 GPUs) or one whose threshold does not apply where it ran (on a CPU: compiled-vs-eager speed, MFU and the
memory peak, unless a threshold is given on the command line). The exit status says which:

    0  every check passed
    1  a check failed (whatever else was not proven)
    2  the bench could not run (bad input, or --device auto found no GPU): one line on stderr
    3  no check failed, but some were not proven

Thresholds, on a GPU (G) and on a CPU (C); each has its command-line option:

    compile    compiled median step / eager median step < 1 (G; --compile-max-ratio), per arm and context;
               C: not proven (a compile's gains on a CPU are not what the GPU path needs)
    mfu        the compiled gpt step's MFU >= the floor for the GPU model (MFU_FLOORS) at the default step
               shape (0.5B, 16,384 tokens a step); --mfu-floor elsewhere; C: not proven
    memory     peak reserved and peak allocated <= plan/memory.py's estimate x (1 + 0.25) (G;
               --memory-headroom); C: not proven (the peak RSS also counts what the allocator keeps)
    agreement  |bf16 - fp32| train loss over the first 5 steps <= 0.05 nats (--loss-tolerance)
    falls      the bf16 loss falls by >= 0.1 nats over the run
    trajectory nGPT's 10-step mean losses over 100 steps, bf16 vs fp32, within 0.1 nats
               (--trajectory-tolerance)
    same run   the presets' path, DDP of one with no_sync and the resumed run, against the uninterrupted
               bf16 run: max |loss diff| over every step <= 1e-4 (C; measured 0) or 0.02 nats (G: CUDA's
               embedding and attention backward accumulate with atomics, so two identical GPU runs differ
               in the last bits, which 40 steps grow; a lost optimizer state or micro-batch moves the loss
               by more) (--same-run-tolerance)
    checkpoint activation checkpointing against the same run without: max |loss diff| over the first 5
               steps <= 0.01 nats (--checkpointing-tolerance; compiled, the recomputed forward fuses and
               rounds bf16 intermediates elsewhere: measured 2e-3 at the tiny CPU shape, after which the two
               drift apart as bf16 and fp32 runs do), and on a GPU a lower peak allocated memory
    ddp        2 processes vs 1, fp32 eager: max |loss diff| <= 1e-4 (C), 1e-3 (G) (--ddp-tolerance)
    condition  condition_run's seconds <= 600 (G, a 1B checkpoint) or 60 (C) (--condition-max-s), and its
               headline number finite
    finite     every timed step's time and loss finite
    memory     (part memory) every preset arm's peak at 0.5B 4k, 8k and 1B 8k as above; out of memory fails
    bf16       bf16 weights vs fp32 master: |diff| over the first 5 steps <= 0.05 nats (--loss-tolerance),
               and the bf16-weights loss falls by >= 0.1 nats
    angles     each angle arm's realised angle per step within 5% of its target, every turned kind
               (--angle-tolerance; renormalising ngpt-angle's rows moves it by ~1.5% at the tiny CPU shape)

A part not run (not named by --parts, past --deadline-s by its estimate, or needing first-light's runs) is
not proven, saying why.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict, dataclass

PASS, FAIL, NOT_PROVEN = "pass", "FAIL", "not proven"
EXIT_PASSED, EXIT_FAILED, EXIT_ERROR, EXIT_NOT_PROVEN = 0, 1, 2, 3
# Compiled gpt at 0.5B, 16,384 tokens a step, bf16 autocast, fused AdamW (MFU over the dense bf16 peak of
# train/throughput.py, attention counted over the full T x T square): substring of the GPU's name -> floor.
MFU_FLOORS = {"GH200": 0.35, "H200": 0.35, "H100": 0.35, "A100": 0.35, "B200": 0.30}
MFU_SHAPE = ("0.5B", 16384)  # the step shape the floors are stated for
# The reference implementation's step on one H200 at 0.5B, context 1k: printed beside ours, not judged
ANCHOR = {"device": "H200", "ngpt_over_gpt_compiled": 1.26, "ngpt_over_gpt_eager": 1.95, "gpt_mfu": 0.447}


def configure(parser: argparse.ArgumentParser) -> None:
    """The thresholds' options (defaults: the table above, by device)."""
    parser.add_argument("--compile-max-ratio", type=float, help="compiled / eager median step must be below "
                        "this (GPU 1.0; CPU: none, not proven)")
    parser.add_argument("--mfu-floor", type=float, help="the compiled gpt step's MFU must reach it (GPU: by "
                        "model at 0.5B, 16384 tokens/step, e.g. H100/H200 0.35; CPU: none, not proven)")
    parser.add_argument("--memory-headroom", type=float, help="peak memory must be within the plan's "
                        "estimate x (1 + this) (GPU 0.25; CPU: none, not proven)")
    parser.add_argument("--loss-tolerance", type=float, default=0.05,
                        help="max |bf16 - fp32| train loss over the compared steps, nats (default 0.05)")
    parser.add_argument("--trajectory-tolerance", type=float, default=0.1, help="max |bf16 - fp32| of "
                        "nGPT's 10-step mean losses over its 100 steps, nats (default 0.1)")
    parser.add_argument("--same-run-tolerance", type=float, help="max |loss diff| of the DDP-of-one, resumed "
                        "and checkpointed runs against the uninterrupted one (GPU 0.02, CPU 1e-4)")
    parser.add_argument("--checkpointing-tolerance", type=float, default=0.01, help="max |loss diff| of the "
                        "activation-checkpointed run over the compared steps, nats (default 0.01)")
    parser.add_argument("--ddp-tolerance", type=float, help="max |loss diff|, 2 processes vs 1 (GPU 1e-3, "
                        "CPU 1e-4)")
    parser.add_argument("--condition-max-s", type=float, help="seconds condition may take (GPU 600, CPU 60)")
    parser.add_argument("--angle-tolerance", type=float, default=0.05, help="max |realised / target - 1| of "
                        "the angle arms' angle per step (default 0.05)")


@dataclass(frozen=True)
class Thresholds:
    device: str
    compile_max_ratio: float | None
    mfu_floor: float | None
    mfu_floor_source: str
    memory_headroom: float | None
    loss_tolerance: float
    trajectory_tolerance: float
    same_run_tolerance: float
    checkpointing_tolerance: float
    ddp_tolerance: float
    condition_max_s: float
    angle_tolerance: float = 0.05
    loss_drop: float = 0.1

    def as_dict(self) -> dict:
        return asdict(self)


def mfu_floor(device_name: str, shape: tuple[str, int] | None) -> tuple[float | None, str]:
    """The stated floor for this GPU at this step shape (scale name, tokens a step), and where it is from."""
    if shape != MFU_SHAPE:
        return None, f"no floor stated for {shape} (floors are for {MFU_SHAPE}); --mfu-floor states one"
    for key, floor in sorted(MFU_FLOORS.items(), key=lambda kv: -len(kv[0])):  # GH200 before H200
        if key in device_name:
            return floor, f"MFU_FLOORS[{key}]"
    return None, f"no floor stated for {device_name}; --mfu-floor states one"


def resolve(args: argparse.Namespace, device: str, device_name: str,
            step_shape: tuple[str, int] | None) -> Thresholds:
    gpu = device == "cuda"
    pick = lambda value, on_gpu, on_cpu: value if value is not None else on_gpu if gpu else on_cpu  # noqa: E731
    if args.mfu_floor is not None:
        floor, source = args.mfu_floor, "--mfu-floor"
    elif gpu:
        floor, source = mfu_floor(device_name, step_shape)
    else:
        floor, source = None, "not applicable on a CPU; --mfu-floor states one"
    return Thresholds(device, pick(args.compile_max_ratio, 1.0, None), floor, source,
                      pick(args.memory_headroom, 0.25, None), args.loss_tolerance, args.trajectory_tolerance,
                      pick(args.same_run_tolerance, 0.02, 1e-4), args.checkpointing_tolerance,
                      pick(args.ddp_tolerance, 1e-3, 1e-4),
                      pick(args.condition_max_s, 600.0, 60.0), args.angle_tolerance)


def _verdict(check: str, subject: str, status: str, value: float | None, threshold: str,
             note: str = "") -> dict:
    return {"check": check, "subject": subject, "status": status, "value": value, "threshold": threshold,
            "note": note}


def _at_most(check: str, subject: str, value: float | None, limit: float | None, what: str,
             missing: str = "no value") -> dict:
    threshold = "n/a" if limit is None else f"{what} <= {limit:g}"
    if limit is None:
        return _verdict(check, subject, NOT_PROVEN, value, threshold, "no threshold here")
    if value is None or not math.isfinite(value):
        return _verdict(check, subject, FAIL, value, threshold, missing)
    return _verdict(check, subject, PASS if value <= limit else FAIL, value, threshold)


def _skipped(check: str, why: str) -> dict:
    return _verdict(check, "all", NOT_PROVEN, None, "n/a", why)


def judge_steps(s: dict, t: Thresholds) -> list[dict]:
    out = []
    for r in s["rows"]:
        subject = f"{r['arm']} ctx {r['context']} {r['mode']}"
        finite = math.isfinite(r["median_ms"]) and math.isfinite(r["loss"])
        out.append(_verdict("finite", subject, PASS if finite else FAIL, r["median_ms"], "time, loss finite"))
    eager = {(r["context"], r["arm"]): r for r in s["rows"] if r["mode"] == "eager"}
    compiled = [r for r in s["rows"] if r["mode"] == "compiled"]
    if not compiled:
        out.append(_skipped("compile", "no compiled step (--no-compile, or every compile past the budget)"))
    for r in compiled:
        base = eager.get((r["context"], r["arm"]))
        ratio = None if base is None else r["median_ms"] / base["median_ms"]
        threshold = "n/a" if t.compile_max_ratio is None else f"compiled/eager < {t.compile_max_ratio:g}"
        subject = f"{r['arm']} ctx {r['context']}"
        if t.compile_max_ratio is None or ratio is None:
            why = "not proven on a CPU (--compile-max-ratio states a threshold)" if ratio is not None else \
                "no eager step to compare"
            out.append(_verdict("compile", subject, NOT_PROVEN, ratio, threshold, why))
        else:
            out.append(_verdict("compile", subject, PASS if ratio < t.compile_max_ratio else FAIL, ratio,
                                threshold))
    mode = "compiled" if compiled else "eager"
    for r in (r for r in s["rows"] if r["arm"] == "gpt" and r["mode"] == mode):
        subject = f"gpt ctx {r['context']} {mode}"
        threshold = "n/a" if t.mfu_floor is None else f"MFU >= {t.mfu_floor:g}"
        if t.mfu_floor is None or r["mfu"] is None:
            why = t.mfu_floor_source if t.mfu_floor is None else "no peak FLOP/s (--peak-tflops)"
            out.append(_verdict("mfu", subject, NOT_PROVEN, r["mfu"], threshold, why))
        else:
            status = PASS if r["mfu"] >= t.mfu_floor else FAIL
            out.append(_verdict("mfu", subject, status, r["mfu"], threshold, t.mfu_floor_source))
    for r in s["rows"]:
        out.append(judge_memory(r, t))
    out += [_verdict("skipped", job, NOT_PROVEN, None, "n/a", f"past the {s['budget_s']:g} s budget")
            for job in s["skipped"]]
    return out


def judge_memory(r: dict, t: Thresholds) -> dict:
    """Peak reserved (GPU) and allocated (GPU) or resident (CPU) MiB against estimate x (1 + headroom)."""
    subject = f"{r['arm']} {r['cell']}" if "cell" in r else f"{r['arm']} ctx {r['context']} {r['mode']}"
    estimate = r["memory_estimate_mb"]
    if r.get("out_of_memory"):
        return _verdict("memory", subject, FAIL, None, "fits",
                        f"out of memory (estimate {estimate:,.1f} MiB)")
    measured = [m for m in (r.get("reserved_memory_mb"), r["peak_memory_mb"]) if m is not None]
    if t.memory_headroom is None:
        return _verdict("memory", subject, NOT_PROVEN, max(measured, default=None), "n/a",
                        f"estimate {estimate:,.1f} MiB; a CPU's peak RSS is not the allocator's peak "
                        "(--memory-headroom states a threshold)")
    limit = estimate * (1 + t.memory_headroom)
    note = f"estimate {estimate:,.1f} MiB x (1 + {t.memory_headroom:g})"
    return _at_most("memory", subject, max(measured, default=None), limit, "peak MiB", "no peak measured") | \
        {"note": note}


def judge_train(tr: dict, t: Thresholds) -> list[dict]:
    out = []
    for arm, a in tr["arms"].items():
        out.append(_at_most("agreement", f"{arm} first {tr['compare_steps']} steps",
                            a["max_abs_diff_first_steps"], t.loss_tolerance, "max |bf16 - fp32| nats"))
        drop = a["loss_drop"]
        out.append(_verdict("falls", f"{arm} {a['steps']} steps", PASS if drop >= t.loss_drop else FAIL, drop,
                            f"bf16 loss drop >= {t.loss_drop:g} nats"))
        if "max_abs_diff_windows" in a:
            out.append(_at_most("trajectory", f"{arm} {a['steps']} steps, {tr['window']}-step means",
                                a["max_abs_diff_windows"], t.trajectory_tolerance, "max |bf16 - fp32| nats"))
    return out


def judge_path(p: dict, t: Thresholds) -> list[dict]:
    tol, out = t.same_run_tolerance, []
    ddp = p["ddp"]
    v = _at_most("path ddp", f"DDP of one ({ddp['backend']}), {ddp['grad_accum_steps']} micro-batches",
                 ddp["max_abs_diff"], tol, "max |loss diff| vs uninterrupted")
    if ddp["grad_accum_steps"] < 2 or ddp["world_size"] != 1:
        v |= {"status": FAIL, "note": "no_sync never ran (one micro-batch a step) or not a group of one"}
    out.append(v)
    r = p["resume"]
    v = _at_most("path resume", f"SIGTERM after step {r['stop_after_step']}, resumed", r["max_abs_diff"], tol,
                 "max |loss diff| vs uninterrupted")
    stopped = r["first_exit"] == 75 and r["checkpoint_step"] == r["stop_after_step"] and \
        r["resumed_from"] == [r["stop_after_step"]]
    if not stopped:
        v |= {"status": FAIL, "note": f"exit {r['first_exit']}, checkpoint at {r['checkpoint_step']}, "
                                      f"resumed from {r['resumed_from']}"}
    else:
        v["note"] = "weights bytes equal" if r["weights_equal"] else "weights bytes differ"
    out.append(v)
    c = p["checkpointing"]
    v = _at_most("path checkpointing", f"activation checkpointing, first {c['compare_steps']} steps",
                 c["max_abs_diff_first_steps"], t.checkpointing_tolerance, "max |loss diff| vs without")
    if not c["applied"]:
        v |= {"status": FAIL, "note": "the run did not record activation_checkpointing"}
    out.append(v)
    if c["peak_mb"] is None or c["reference_peak_mb"] is None:
        out.append(_verdict("path checkpointing", "peak memory", NOT_PROVEN, None, "n/a",
                            "on a CPU the allocator's peak is not measured"))
    else:
        lower = c["peak_mb"] < c["reference_peak_mb"]
        out.append(_verdict("path checkpointing", "peak memory", PASS if lower else FAIL, c["peak_mb"],
                            f"< {c['reference_peak_mb']:,.0f} MiB without"))
    return out


def judge_bf16(b: dict, t: Thresholds) -> list[dict]:
    out = []
    for arm, a in b["arms"].items():
        out.append(_at_most("bf16", f"{arm} bf16 weights vs fp32 master, first {b['compare_steps']} steps",
                            a["max_abs_diff_first_steps"], t.loss_tolerance, "max |diff| nats"))
        out.append(_verdict("bf16", f"{arm} bf16 weights, {a['steps']} steps",
                            PASS if a["loss_drop"] >= t.loss_drop else FAIL, a["loss_drop"],
                            f"loss drop >= {t.loss_drop:g} nats"))
    return out


def judge_angles(a: dict, t: Thresholds) -> list[dict]:
    return [_at_most("angles", f"{arm}, {len(v['realised_rad'])} kinds", v["max_relative_error"],
                     t.angle_tolerance, "max |realised / target - 1|") for arm, v in a["arms"].items()]


def judge_ddp(ddp: dict, t: Thresholds) -> dict:
    if "skipped" in ddp:
        return _skipped("ddp", ddp["skipped"])
    return _at_most("ddp", f"{ddp['processes']} processes ({ddp['backend']}) vs 1", ddp["max_abs_loss_diff"],
                    t.ddp_tolerance, "max |loss diff|")


def judge_condition(c: dict, t: Thresholds) -> dict:
    v = _at_most("condition", f"{c['scale']} checkpoint on {c['device']}", c["seconds"], t.condition_max_s,
                 "seconds")
    return v if c["finite"] else v | {"status": FAIL, "note": "headline not finite"}


JUDGES = {"steps": judge_steps, "first-light": judge_train, "memory": lambda m, t: [judge_memory(r, t)
                                                                                   for r in m["rows"]],
          "bf16": judge_bf16, "angles": judge_angles, "path": judge_path,
          "ddp": lambda d, t: [judge_ddp(d, t)], "condition": lambda c, t: [judge_condition(c, t)]}


def judge(doc: dict, t: Thresholds) -> list[dict]:
    """Every verdict of a bench document, part by part in their order; a pure function of its measurements
    and the thresholds. A part not measured is not proven, saying why."""
    out = []
    for part, judge_part in JUDGES.items():
        if part in doc:
            out += judge_part(doc[part], t)
        else:
            why = doc.get("parts", {}).get(part, {}).get("why", f"not run (--parts {part} runs it)")
            out.append(_skipped(part, why))
    return out


def exit_code(verdicts: list[dict]) -> int:
    statuses = {v["status"] for v in verdicts}
    return EXIT_FAILED if FAIL in statuses else EXIT_NOT_PROVEN if NOT_PROVEN in statuses else EXIT_PASSED


def shown(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def format_verdicts(verdicts: list[dict]) -> list[str]:
    lines = ["| check | subject | value | threshold | verdict | note |", "|---|---|---:|---|---|---|"]
    for v in verdicts:
        lines.append(f"| {v['check']} | {v['subject']} | {shown(v['value'])} | {v['threshold']} | "
                     f"{v['status']} | {v['note']} |")
    counts = {s: sum(v["status"] == s for v in verdicts) for s in (PASS, FAIL, NOT_PROVEN)}
    code = exit_code(verdicts)
    lines.append(f"verdicts: {counts[PASS]} passed, {counts[FAIL]} failed, {counts[NOT_PROVEN]} not proven "
                 f"-> exit {code} (0 all passed, 1 a check failed, 3 none failed but some not proven)")
    return lines
