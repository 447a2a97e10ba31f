"""Where every stage's files live, relative to the project root: the one place that spells these paths.

The Snakemake rules (workflow/rules/common.smk) and every `ngptlab <verb>` use these; dvc.yaml spells the same
paths in its own syntax (tests/test_workflow.py checks that both tools name the same outputs).

A run's files sit under its cell, because the cell stages (speedup, evaluate) depend on all of a cell's runs
and DVC can only name them as one directory (and Snakemake wants every file of a job to carry the job's
wildcards, here cell and run):

    data/tokens/<source>/                   train.bin, val.bin, meta.json (prepare)
    runs/<cell>/<run>/                      model.safetensors, config.json, state/ (train)
    runs/<cell>/<run>/tensorboard/          the run's curves as TensorBoard event files (train; a view of
                                            metrics.jsonl, never DVC-hashed: .dvcignore)
    logs/train/<cell>/<run>.log             (train)
    results/train/<cell>/<run>/             summary.json, metrics.jsonl (train)
    results/timing/<cell>/<run>.json        wall time, tokens/s, MFU (train; read by the report only)
    results/conditioning/<run>.json         + <run>.spectra.parquet (condition)
    results/speedup/<cell>.json             (speedup)
    results/evaluate/<cell>.json            (evaluate)
    results/evaluate/<cell>.partial/<run>.json  a run's results while its cell's job runs (evaluate; never
                                            DVC-tracked, removed once <cell>.json is written)
    results/lineage/<stage>/<job>/<key>     what the job's results are made from (the lineage rule)

With train.schedule wsd, a trunk's segments (ngptlab/train/trunk.py) add

    results/trunk/<cell>/<trunk>/<span>.json     a segment's record (trunk); span "from<step>-to<step>"
    runs/trunks/<cell>/<trunk>/                  its kept states and resume checkpoints, never DVC-tracked
    runs/trunks/<cell>/<trunk>/tensorboard/      the trunk's curves (TensorBoard event files)
    logs/trunk/<cell>/<trunk>/<span>.log         (trunk)

A new run in one cell therefore changes that cell's directories only, and both tools rerun that cell's
stages, not every cell's.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]  # the project of this checkout (src/ngptlab/..)
ACCEPTED_CODE = "results/accepted-code.json"  # the refactors accepted as changing no number (plan/accept.py)


def tokens_dir(source: str) -> str:
    """A source's token shards and their description: train.bin, val.bin, meta.json."""
    return f"data/tokens/{source}"


def run_dir(cell: str, run: str) -> str:
    """A run's weights and its resumable training state."""
    return f"runs/{cell}/{run}"


def tensorboard_dir(cell: str, run: str) -> str:
    """A run's curves as TensorBoard event files: a view of its metrics log that differs from one identical
    run to the next (wall times), so never part of a hash the pipeline checks (.dvcignore)."""
    return f"{run_dir(cell, run)}/tensorboard"


def train_results_dir(cell: str, run: str) -> str:
    """A run's small training results: summary.json and metrics.jsonl."""
    return f"results/train/{cell}/{run}"


def train_log(cell: str, run: str) -> str:
    return f"logs/train/{cell}/{run}.log"


def timing_file(cell: str, run: str) -> str:
    return f"results/timing/{cell}/{run}.json"


def trunk_dir(cell: str, trunk: str) -> str:
    """A trunk's kept states and resume checkpoints (runs/trunks/ is in .dvcignore)."""
    return f"runs/trunks/{cell}/{trunk}"


def trunk_tensorboard_dir(cell: str, trunk: str) -> str:
    """A trunk's curves as TensorBoard event files, over all its segments."""
    return f"{trunk_dir(cell, trunk)}/tensorboard"


def trunk_record(cell: str, trunk: str, span: str) -> str:
    """The record of a trunk segment; span is "from<start>-to<step>" (ngptlab.grid.trunks.Segment.span)."""
    return f"results/trunk/{cell}/{trunk}/{span}.json"


def trunk_log(cell: str, trunk: str, span: str) -> str:
    return f"logs/trunk/{cell}/{trunk}/{span}.log"


def conditioning_files(run: str) -> dict[str, str]:
    return {"json": f"results/conditioning/{run}.json",
            "spectra": f"results/conditioning/{run}.spectra.parquet"}


def speedup_file(cell: str) -> str:
    return f"results/speedup/{cell}.json"


def evaluate_file(cell: str) -> str:
    return f"results/evaluate/{cell}.json"


def evaluate_partial_dir(cell: str) -> str:
    """The runs an evaluate job has finished, so that its retry continues (ngptlab.evaluate.partial)."""
    return f"results/evaluate/{cell}.partial"


def evaluate_partial_file(cell: str, run: str) -> str:
    return f"{evaluate_partial_dir(cell)}/{run}.json"


def lineage_dir(stage: str, job: str) -> str:
    """Where a job's lineage key file lives (ngptlab.plan.lineage); job is a run's `<cell>/<run>`, a cell,
    the source (prepare) or "report"."""
    return f"results/lineage/{stage}/{job}"


def lineage_file(stage: str, job: str, key: str) -> str:
    return f"{lineage_dir(stage, job)}/{key}"
