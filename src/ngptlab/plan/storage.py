"""What a grid keeps on disk, for `ngptlab plan`: its final checkpoints, the resume state of the runs that
train at once, and what DVC's cache and remote add. Closed form from plan/estimate.py's rows (parameter
counts), so sizing the paper's grid never imports torch. Decimal units: 1 GB = 10^9 bytes, 1 TB = 10^12.

- Final checkpoints, runs/<cell>/<run>/model.safetensors: the model's state dict as train/outputs.py saves
  it, fp32 parameters (bf16 autocast keeps fp32 master weights; the rotary tables are not persistent
  buffers): 4 bytes per parameter, 2 for a run that stores its weights in bf16 (train.weight_dtype). The
  header (run config, tensor index: tens of kB) and config.json beside it are left out, under 0.01% of a
  model's bytes.
- Resume state, runs/<cell>/<run>/state/ while a run trains (train/state.py): one checkpoint of weights and
  AdamW's two moments, 12 bytes per parameter, 6 in bf16 (ngptlab/checkpoint_cost.py); writing the next one
  briefly holds two, and the whole directory goes when the run ends. At most the Slurm profile's `jobs`
  train at once, so the peak is that many of the largest jobs. A WSD trunk's segments train one after
  another: each trunk adds one job of its own, and its kept states (runs/trunks/) at least one state per
  trunk (the latest is never deleted), up to one per segment while branches are still to run.
- DVC: `dvc commit` stores the cached outputs of dvc.yaml, nearly all of it the checkpoints; the token
  shards, spectra tables and report are cached too but small beside them, and the small results are
  `cache: false` (git). With cache.type copy, what DVC's default `reflink,copy` falls back to on a filesystem
  without reflinks, the cache is a second full copy; with hardlink or symlink on the workspace's filesystem
  DVC moves each file into the cache and links it back, no second copy. `dvc push` uploads the cache's bytes
  to the remote, another full copy wherever the remote lives.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from ngptlab import weight_dtype as weight_dtypes
from ngptlab.checkpoint_cost import STATE_BYTES_PER_PARAMETER, state_bytes
from ngptlab.errors import ParamsError

CHECKPOINT_BYTES_PER_PARAMETER = 4  # fp32 weights
PROFILE = "workflow/profiles/slurm/config.yaml"  # under the project root: its `jobs` bound the concurrency


def profile_jobs(path: str | Path) -> int | None:
    """The Slurm profile's `jobs` (how many jobs Snakemake keeps queued at once); None when it sets none or
    says `unlimited`."""
    try:
        profile = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as err:
        raise ParamsError(f"{path}: cannot read the Slurm profile ({err})") from None
    jobs = profile.get("jobs") if isinstance(profile, dict) else None
    if jobs is None or jobs == "unlimited":
        return None
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ParamsError(f"{path}: jobs must be a positive integer or 'unlimited', not {jobs!r}")
    return jobs


def plan_storage(plan: dict, root: str | Path, profile: str | None = None) -> dict:
    """storage_summary with the concurrency of `profile` (a Snakemake profile's config.yaml; default the
    project's Slurm profile under root). A default profile that is not there (a copy without workflow/)
    leaves the concurrency unbounded: every job at once."""
    path = Path(profile) if profile else Path(root) / PROFILE
    if profile is None and not path.is_file():
        return storage_summary(plan, None, str(path), profile_found=False)
    return storage_summary(plan, profile_jobs(path), str(path))


def final_checkpoint_bytes(n_params: int, weight_dtype: str = weight_dtypes.FP32) -> int:
    return CHECKPOINT_BYTES_PER_PARAMETER * n_params * weight_dtypes.BYTES[weight_dtype] // 4


def storage_summary(plan: dict, jobs: int | None, profile: str, profile_found: bool = True) -> dict:
    """The grid's disk figures in bytes, from estimate_plan's rows (`runs` and `trunks`, each with `n_params`;
    runs with `scale`); jobs is the profile's `jobs` (None: every job at once)."""
    runs, segments = plan["runs"], plan["trunks"]
    per_scale: dict[str, dict] = {}
    for r in runs:
        entry = per_scale.setdefault(r["scale"], {"runs": 0, "bytes": 0})
        entry["runs"] += 1
        entry["bytes"] += final_checkpoint_bytes(r["n_params"], weight_dtypes.of_record(r))
    final = sum(entry["bytes"] for entry in per_scale.values())

    trunk_state = {s["trunk"]: state_bytes(s["n_params"], weight_dtypes.of_record(s))
                   for s in segments}  # one size per trunk
    # what can train at once: every run, and one segment per trunk (its segments follow one another)
    training = sorted([state_bytes(r["n_params"], weight_dtypes.of_record(r)) for r in runs]
                      + list(trunk_state.values()), reverse=True)
    concurrent = len(training) if jobs is None else min(jobs, len(training))
    running, kept = sum(training[:concurrent]), sum(trunk_state.values())
    resume = {"bytes_per_parameter": STATE_BYTES_PER_PARAMETER, "profile": profile,
              "profile_found": profile_found, "profile_jobs": jobs, "concurrent_jobs": concurrent,
              "running_bytes": running, "kept_trunk_states_bytes": kept,
              "kept_trunk_states_worst_bytes": sum(state_bytes(s["n_params"], weight_dtypes.of_record(s))
                                                   for s in segments),
              "peak_bytes": running + kept}
    # the cache holds the cached outputs, the remote what the cache holds
    dvc = {"cache_bytes_copy": final, "cache_bytes_link": 0, "remote_bytes": final}
    return {"units": "bytes; the text output is decimal: 1 GB = 1e9 bytes, 1 TB = 1e12",
            "final_checkpoints": {"bytes": final, "runs": len(runs), "per_scale": per_scale,
                                  "bytes_per_parameter": CHECKPOINT_BYTES_PER_PARAMETER},
            "resume_state": resume, "dvc": dvc,
            # one filesystem with the workspace and the cache, at worst (the remote comes on top, wherever)
            "workspace_peak_bytes": {"copy": final + resume["peak_bytes"] + dvc["cache_bytes_copy"],
                                     "link": final + resume["peak_bytes"]}}


def describe_storage(storage: dict) -> list[str]:
    """The plan's text lines on disk: checkpoints, resume state at the profile's concurrency, DVC."""
    final, resume, dvc = storage["final_checkpoints"], storage["resume_state"], storage["dvc"]
    scales = ", ".join(f"{scale} {_size(entry['bytes'])}" for scale, entry in final["per_scale"].items())
    lines = [f"disk (decimal: 1 GB = 10^9 bytes, 1 TB = 10^12): final checkpoints {_size(final['bytes'])} "
             f"({final['runs']} runs, fp32 weights: {final['bytes_per_parameter']} bytes per parameter; "
             f"{scales or 'no runs'})"]
    peak = f"peak {_size(resume['peak_bytes'])}"
    if resume["kept_trunk_states_worst_bytes"]:
        peak += (f" ({_size(resume['running_bytes'])} of training jobs, kept trunk states "
                 f"{_size(resume['kept_trunk_states_bytes'])}: one per trunk, up to "
                 f"{_size(resume['kept_trunk_states_worst_bytes'])} if every segment's exists at once)")
    lines += [f"  resume state at {_concurrency(resume)}, the largest first: {peak}",
              f"    {resume['bytes_per_parameter']} bytes per parameter (fp32 weights, AdamW's moments) in "
              "runs/<cell>/<run>/state/ while a run trains, gone when it ends; writing a checkpoint briefly "
              "holds two",
              f"  DVC cache (dvc commit): +{_size(dvc['cache_bytes_copy'])} with cache.type copy (the "
              "default reflink,copy where the filesystem has no reflinks), 0 with hardlink/symlink on the "
              "workspace's filesystem (docs/cluster.md, 'Storage'); "
              f"remote (dvc push): {_size(dvc['remote_bytes'])}",
              f"  workspace and cache at most {_size(storage['workspace_peak_bytes']['copy'])} with copy, "
              f"{_size(storage['workspace_peak_bytes']['link'])} with links; the token shards, spectra "
              "tables and report are not counted (small beside the checkpoints)"]
    return lines


def _concurrency(resume: dict) -> str:
    """How many jobs train at once, and where that comes from."""
    jobs, concurrent = resume["profile_jobs"], resume["concurrent_jobs"]
    if jobs is None:
        why = "sets no jobs limit" if resume["profile_found"] else "absent; --profile-config"
        return f"all the grid's {concurrent} training jobs at once ({resume['profile']} {why})"
    text = f"the profile's {jobs} concurrent jobs ({resume['profile']}: jobs)"
    return text if concurrent >= jobs else f"{text}, capped at the grid's {concurrent} training jobs"


def _size(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} bytes"
