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
             "| ctx | mode | arm | median step (ms) | compile s | x gpt | tokens/s | MFU | MFU causal | "
             "peak MB | reserved MB | estimate MB |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in s["rows"]:
        util, causal = (_percent(r.get(key)) for key in ("mfu", "mfu_causal"))
        compile_s = "" if r.get("compile_s") is None else f"{r['compile_s']:.1f}"
        lines.append(f"| {r['context']} | {r['mode']} | {r['arm']} | {r['median_ms']:.2f} | {compile_s} | "
                     f"{r['ratio_vs_gpt']:.2f} | {r['tokens_per_s']:,.0f} | {util} | {causal} | "
                     f"{_mb(r['peak_memory_mb'])} | {_mb(r['reserved_memory_mb'])} | "
                     f"{_mb(r['memory_estimate_mb'])} |")
    if s["skipped"]:
        lines.append(f"skipped past the {s['budget_s']:g} s budget: {', '.join(s['skipped'])}")
    return lines + anchor_lines(s)


def anchor_lines(s: dict) -> list[str]:
    """ngpt/gpt and GPT's MFU at the first context beside the reference implementation's anchor."""
    a = s["anchor"]
    at = {(r["mode"], r["arm"]): r for r in s["rows"] if r["context"] == s["rows"][0]["context"]}
    lines = []
    for mode in ("compiled", "eager"):
        if (mode, "ngpt") in at:
            lines.append(f"ngpt/gpt {mode}: {at[(mode, 'ngpt')]['ratio_vs_gpt']:.2f}x "
                         f"(reference on {a['device']}: {a[f'ngpt_over_gpt_{mode}']:.2f}x)")
    gpt = at.get(("compiled", "gpt")) or at.get(("eager", "gpt"))
    if gpt and gpt["mfu"] is not None:
        lines.append(f"gpt MFU: {gpt['mfu']:.1%} (reference on {a['device']}: {a['gpt_mfu']:.1%})")
    return lines


def format_parts(doc: dict) -> list[str]:
    """The memory, bf16 and angles parts, where measured."""
    lines = []
    if "memory" in doc:
        m = doc["memory"]
        lines += [f"memory: every preset arm as the {m['preset']} preset trains it, {m['steps']} eager "
                  f"steps; {m['memory']}",
                  "| arm | cell | checkpointing | peak MB | reserved MB | estimate MB |",
                  "|---|---|---|---:|---:|---:|"]
        lines += [f"| {r['arm']} | {r['cell']} | {r['checkpointing']} | "
                  f"{'out of memory' if r['out_of_memory'] else _mb(r['peak_memory_mb'])} | "
                  f"{_mb(r['reserved_memory_mb'])} | {_mb(r['memory_estimate_mb'])} |" for r in m["rows"]]
    if "bf16" in doc:
        b = doc["bf16"]
        lines.append(f"bf16 weights vs fp32 master ({b['scale']} ctx {b['context']}, eager):")
        lines += [f"  {arm}: first {b['compare_steps']} max |diff| {_diff(a['max_abs_diff_first_steps'])}, "
                  f"last {b['window']}-step mean gap {a['last_window_gap']:+.3f} nats"
                  for arm, a in b["arms"].items()]
    if "angles" in doc:
        g = doc["angles"]
        lines += [f"angles: {arm} realised {min(a['realised_rad'].values()):.4g}-"
                  f"{max(a['realised_rad'].values()):.4g} rad/step vs target {g['target_rad']:g}"
                  for arm, a in g["arms"].items()]
    return lines


def format_report(doc: dict) -> str:
    peak = "n/a" if doc["peak_tflops"] is None else f"{doc['peak_tflops']:g} TFLOP/s"
    lines = [f"bench gpu: {doc['device']} ({doc['device_name']}), peak {peak} [{doc['peak_source']}], "
             f"torch {doc['torch']}, {doc['wall_s']:.0f} s"]
    if "steps" in doc:
        lines += format_steps(doc["steps"])
    for part, v in doc.get("parts", {}).items():
        said = (f" ({v['seconds']:.0f} s; estimate {v['estimate_s']:.0f} s)" if "seconds" in v
                else f": {v['why']}")
        lines.append(f"part {part}: {v['status']}{said}")
    if "first-light" in doc:
        t = doc["first-light"]
        mode = "compiled" if t["bf16_compiled"] else "eager"
        lines.append(f"first-light: {t['scale']} ctx {t['context']}, bf16 {mode} vs fp32 eager:")
        for arm, a in t["arms"].items():
            losses = a["bf16_losses"]
            window = (f", {t['window']}-step means max |diff| {_diff(a['max_abs_diff_windows'])}"
                      if "max_abs_diff_windows" in a else "")
            lines.append(f"  {arm}: {a['steps']} steps, {a['grad_accum_steps']} micro-batches a step, first "
                         f"{t['compare_steps']} max |diff| {_diff(a['max_abs_diff_first_steps'])}{window}, "
                         f"loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    lines += format_parts(doc)
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
