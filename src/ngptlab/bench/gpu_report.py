"""`bench gpu`'s printed report: what was measured, then every verdict (bench/checks.py)."""

from __future__ import annotations

from ngptlab.bench.checks import format_verdicts


def _mb(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _diff(value: float | None) -> str:
    return "steps differ" if value is None else f"{value:.2e}"


def format_steps(s: dict) -> list[str]:
    lines = [f"steps: {s['scale']} {s['shape']}, {s['batch_tokens']} tokens/step, vocab {s['vocab_size']}, "
             f"{s['precision']}, fused AdamW {s['fused_adamw']}; memory = {s['memory']}",
             "| ctx | mode | arm | median step (ms) | x gpt | tokens/s | MFU | MFU causal | peak MB | "
             "reserved MB | estimate MB |", "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in s["rows"]:
        util, causal = (_percent(r.get(key)) for key in ("mfu", "mfu_causal"))
        lines.append(f"| {r['context']} | {r['mode']} | {r['arm']} | {r['median_ms']:.2f} | "
                     f"{r['ratio_vs_gpt']:.2f} | {r['tokens_per_s']:,.0f} | {util} | {causal} | "
                     f"{_mb(r['peak_memory_mb'])} | {_mb(r['reserved_memory_mb'])} | "
                     f"{_mb(r['memory_estimate_mb'])} |")
    if s["skipped"]:
        lines.append(f"skipped past the {s['budget_s']:g} s budget: {', '.join(s['skipped'])}")
    return lines


def format_report(doc: dict) -> str:
    peak = "n/a" if doc["peak_tflops"] is None else f"{doc['peak_tflops']:g} TFLOP/s"
    lines = [f"bench gpu: {doc['device']} ({doc['device_name']}), peak {peak} [{doc['peak_source']}], "
             f"torch {doc['torch']}, {doc['wall_s']:.0f} s"]
    if "steps" in doc:
        lines += format_steps(doc["steps"])
    if "train" in doc:
        t = doc["train"]
        mode = "compiled" if t["bf16_compiled"] else "eager"
        lines.append(f"train: {t['scale']} ctx {t['context']}, bf16 {mode} vs fp32 eager:")
        for arm, a in t["arms"].items():
            losses = a["bf16_losses"]
            window = (f", {t['window']}-step means max |diff| {_diff(a['max_abs_diff_windows'])}"
                      if "max_abs_diff_windows" in a else "")
            lines.append(f"  {arm}: {a['steps']} steps, {a['grad_accum_steps']} micro-batches a step, first "
                         f"{t['compare_steps']} max |diff| {_diff(a['max_abs_diff_first_steps'])}{window}, "
                         f"loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    if "path" in doc:
        p = doc["path"]
        d, r, c = p["ddp"], p["resume"], p["checkpointing"]
        mode = "compiled" if p["compiled"] else "eager"
        lines += [f"path ({p['arm']}, bf16, {mode}) vs the uninterrupted run:",
                  f"  DDP of one ({d['backend']}, {d['grad_accum_steps']} micro-batches, no_sync): "
                  f"max |diff| {_diff(d['max_abs_diff'])}",
                  f"  resume: SIGTERM after step {r['stop_after_step']} -> exit {r['first_exit']}, "
                  f"checkpoint at {r['checkpoint_step']}, rerun exit {r['second_exit']}: max |diff| "
                  f"{_diff(r['max_abs_diff'])}, weights {'equal' if r['weights_equal'] else 'differ'}",
                  f"  activation checkpointing: max |diff| {_diff(c['max_abs_diff'])}, peak "
                  f"{_mb(c['peak_mb'])} MB vs {_mb(c['reference_peak_mb'])} MB"]
    if "ddp" in doc:
        d = doc["ddp"]
        lines.append(f"ddp: not run ({d['skipped']})" if "skipped" in d else
                     f"ddp ({d['backend']}, {d['processes']} processes): max |loss diff| "
                     f"{_diff(d['max_abs_loss_diff'])}")
    if "condition" in doc:
        c = doc["condition"]
        lines.append(f"condition: {c['scale']} checkpoint, {c['matrices']} matrices, {c['seconds']:.1f} s "
                     f"on {c['device']}")
    return "\n".join([*lines, *format_verdicts(doc["checks"])])
