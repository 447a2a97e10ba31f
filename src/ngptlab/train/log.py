"""What a training job prints: one line per start, evaluation and end, for logs without a progress bar."""

from __future__ import annotations

import sys
import time

from tqdm import tqdm


def say(line: str) -> None:
    """One line for the log, whether or not a progress bar is drawn (Slurm and Snakemake logs have none)."""
    # the newline in the same write: the ranks of a node share one log, and their lines must not interleave
    tqdm.write(f"ngptlab train: {line}\n", file=sys.stderr, end="")


def eval_line(run: str, step: int, plan, row: dict, tokens_per_s: float, causal_share: float = 1.0) -> str:
    """Progress at an evaluation: tokens, losses, throughput since this process started, MFU, ETA. MFU counts
    the full T x T attention square; beside it the causal MFU, the row's MFU times causal_share (the causal
    FLOPs over the counted ones, models/size.py)."""
    tokens, total = row["tokens"], plan.steps * plan.batch_tokens
    val = row.get("val_loss")
    eta = clock((total - tokens) / tokens_per_s) if tokens_per_s > 0 else "?"
    mfu = row.get("mfu")
    utilisation = "n/a" if mfu is None else f"{mfu:.1%} (causal {mfu * causal_share:.1%})"
    return (f"{run} step {step}/{plan.steps} tokens {tokens:,}/{total:,} ({tokens / total:.0%}) "
            f"train loss {row['train_loss']:.4f} val loss {'n/a' if val is None else f'{val:.4f}'} "
            f"tok/s {tokens_per_s:,.0f} MFU {utilisation} ETA {eta}")


def clock(seconds: float) -> str:
    """HH:MM:SS, with a day count in front past 24 hours (a multi-day Slurm job)."""
    days, rest = divmod(int(seconds), 86400)
    return (f"{days}d " if days else "") + time.strftime("%H:%M:%S", time.gmtime(rest))
