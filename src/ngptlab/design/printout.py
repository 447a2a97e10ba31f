"""The design's table in words: one block per planted truth and cell, then the thresholds and the cost."""

from __future__ import annotations

from ngptlab.design.resolution import resolution_line
from ngptlab.plan.estimate import gpu_hours_text


def _p(value: dict) -> str:
    return "   n/a    " if value["p"] is None else f"{value['p']:5.1%} ±{value['se']:5.1%}"


def log_value(x: float | None) -> str:
    """A signed ln-scale value to three decimals, seven wide; n/a for none."""
    return f"{'n/a':>7}" if x is None else f"{x:+7.3f}"


def expected_text(summary: dict) -> str:
    """An account's expected reading and where it is read from (measured, labels or construction)."""
    expected = summary.get("expected_label") or "on the margin's edge"
    return f"{expected}; read from {summary.get('source', 'labels')}"


def scenario_lines(scenario: dict, primary: str) -> list[str]:
    lines = []
    for cell, s in scenario["cells"].items():
        expected = expected_text(s)
        lines.append(f"{scenario['truth']} — {cell} ({scenario['worlds']} worlds; planted {primary}: "
                     f"{s['estimates']['primary']['planted']:+.3f} ln, claim {s['planted_claim']}, "
                     f"expected reading: {expected})")
        lines.append("  reading:    " + "   ".join(f"{k} {_p(v)}" for k, v in s["readings"].items()))
        if "holm_readings" in s:
            lines.append("  Holm:       " + "   ".join(f"{k} {_p(v)}" for k, v in s["holm_readings"].items()))
        lines.append("  claim:      " + "   ".join(f"{k} {_p(v)}" for k, v in s["claims"].items()))
        correct = "n/a" if s["correct"] is None else _p(s["correct"])
        lines.append(f"  correct reading {correct}   wrong directional {_p(s['wrong_directional'])}")
        for name, a in list(s.get("accounts", {}).items())[1:]:  # the first, conditioning, is the above
            expected = expected_text(a)
            correct = "n/a" if a["correct"] is None else _p(a["correct"])
            lines.append(f"  {name} account (expected {expected}): "
                         + "   ".join(f"{k} {_p(v)}" for k, v in a["readings"].items())
                         + f"   correct {correct}")
        if "protocol_gpu_hours" in scenario:
            hours = scenario["protocol_gpu_hours"]
            lines.append(f"  the protocol trains {gpu_hours_text(hours)} GPU-hours in this truth")
        lines.append(f"  {'estimate (ln)':<34} {'planted':>7} {'estimand':>8} {'gap':>7} {'bias':>7}  "
                     f"{'coverage':<15} {'of planted':<15} {'with interval':<15}")
        for name, e in s["estimates"].items():
            label = f"{name} ({primary})" if name == "primary" else name
            values = " ".join(log_value(e[key]) for key in ("planted", "estimand", "policy_gap", "bias"))
            lines.append(f"  {label:<34} {values}  "
                         f"{_p(e['coverage']):<15} {_p(e['coverage_planted']):<15} "
                         f"{_p(e['with_interval']):<15}")
        lines.append("")
    return lines


def dose_lines(dose: dict) -> list[str]:
    """The dose-response worlds' block (design/dose_table.py): per world, noise level, cell and account."""
    lines = [f"dose-response worlds (design/mechanisms.py; seed sd in ln kappa {dose['kappa_sd']:g}, in ln "
             f"angle {dose['angle_sd']:g}, and the loss's, at x{' and x'.join(map(str, dose['noises']))}):"]
    for scenario in dose["scenarios"]:
        for cell, accounts in scenario["cells"].items():
            lines.append(f"{scenario['world']} — {cell}, x{scenario['noise']} seed noise "
                         f"({scenario['worlds']} world{'s' * (scenario['worlds'] != 1)}; S follows the "
                         f"{scenario['line']} line)")
            for name, a in accounts.items():
                slope = a["slope"]
                covered = ("" if slope is None else
                           f"   slope planted {log_value(slope['planted'])} estimand "
                           f"{log_value(slope['estimand'])} coverage {_p(slope['coverage'])}")
                lines.append(f"  {name} account, expected {a['expected_label']}: correct {_p(a['correct'])}"
                             f"   consistent {_p(a['consistent'])}{covered}")
                lines += [f"    {_p(v)}  {words}" for words, v in a["readings"].items()]
    lines.append("")
    return lines


def threshold_line(c: dict) -> str:
    interval = c.get("monte_carlo_interval")
    shown = _p(c["value"]) + ("" if interval is None else f" [{interval[0]:.1%}, {interval[1]:.1%}]")
    where = (f"{c['truth']}, {c['cell']}" if "truth" in c
             else f"{c['world']}, x{c['noise']} seed noise, {c['cell']}")
    return f"  {'PASS' if c['passed'] else 'FAIL'}  {c['check']} {c['bound']}: {shown} ({where})"


def table_lines(document: dict) -> list[str]:
    """The whole printout of `ngptlab design`."""
    model = ", ".join(f"{k} {v:g}" for k, v in document["model"].items())
    lines = [f"design check of {document['params_file']}: {document['worlds']} planted worlds per truth, "
             f"primary effect {document['primary']}, margin x{document['margin']:g}",
             f"loss model (design/loss_model.py): {model}",
             "each probability ± its Monte-Carlo standard error; coverage of level-"
             f"{document['level']:.0%} intervals; ln scale throughout"]
    measured = document.get("noise_from")
    if measured:
        lines.append(f"seed_sd {measured['seed_sd']:.4g} from the pooled sd of ln S over seeds measured "
                     f"under {measured['root']}: {measured['log_sd']:.3g} (df {measured['df']}), taken at "
                     f"its one-sided {measured['confidence']:.0%} upper confidence bound "
                     f"{measured['log_sd_upper']:.3g} (chi-square)")
        for key, m in (measured.get("mechanisms") or {}).items():
            what = "ln kappa" if key == "kappa_sd" else "ln angle per step"
            lines.append(f"{key} {m['value']:.4g} from the pooled within-arm sd over seeds of the "
                         f"dose-response points' {what}: {m['sd']:.3g} "
                         f"(df {m['df']}), taken at its one-sided {measured['confidence']:.0%} upper "
                         "confidence bound")
        missing = [key for key in ("kappa_sd", "angle_sd") if key not in (measured.get("mechanisms") or {})]
        if missing:
            lines.append(f"{' and '.join(missing)}: not measured there (no arm with two seeds' points); "
                         "the design's own")
    lines.append("")
    for scenario in document["scenarios"]:
        lines += scenario_lines(scenario, document["primary"])
    lines.append(f"estimand: the noise-free world's estimate (the speed-up at the learning rates the policy "
                 f"chooses: speedup.lr_policy {document['lr_policy']}, train.schedule "
                 f"{document['schedule']}); "
                 "gap = estimand - planted, what the policy costs; bias and coverage are against the "
                 "estimand, 'of planted' against the planted law")
    dose = document.get("dose_response")
    if dose:
        lines += dose_lines(dose)
    lines.append("thresholds:")
    lines += [threshold_line(c) for c in [*document["thresholds"], *(dose["thresholds"] if dose else [])]]
    cost = document["gpu_hours"]
    projected = ("" if cost["projected"] is None
                 else f"; projected over the whole protocol at most {gpu_hours_text(cost['projected'])}")
    lines.append(f"GPU-hours (`ngptlab plan`, {cost['mfu']:.0%} MFU of {cost['peak_tflops']:g} TFLOP/s): "
                 f"{gpu_hours_text(cost['listed'])} for the runs listed now{projected}")
    if document.get("resolution"):
        lines.append(resolution_line(document["resolution"]))
    lines.append(f"design {'meets' if document['passed'] else 'does NOT meet'} every threshold")
    return lines
