"""How far a job has come: the record a checkpoint stores (its state.json, train/state.py) and a job resumes.

One record per job, updated as it trains: its step, its wall and training time, its metrics rows, its last
finite val loss, where it was resumed, the steps its timer left out (train/timing.py), the steps computed
twice and the attention kernels it disabled (train/attention.py), its peak GPU memory.

The checkpoint's JSON is the record as a dict (to_dict), and reading it back gives the same record
(from_dict). Its keys keep the order they have always had: a new job's keys in the order they first
appear (the field order below), a resumed job's in the order of the file it read, followed by any key that
file lacked; keys this record does not know (written by another version) are kept as they were found. So a
job resumed from any checkpoint writes the same checkpoint bytes as one that ran through.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

# Present only once they have a value: a job started from a trunk's kept state, a job on a GPU.
OPTIONAL = ("started_at", "max_memory_allocated_mib", "max_memory_reserved_mib")


@dataclass
class Progress:
    step: int = 0  # optimizer steps done
    wall_s: float = 0.0  # wall time of the training so far, every job of it
    metrics_rows: int = 0  # rows of the metrics log that belong to this state
    last_val_loss: float | None = None  # the last finite val loss, and its step (a diverged run's summary)
    last_val_step: int | None = None
    resumed_from: list[int] = field(default_factory=list)  # the steps this run resumed from
    started_at: int | None = None  # a job that started from a trunk's kept state: that state's step
    identity: dict = field(default_factory=dict)  # what the state is made from (train/identity.py)
    timed_steps: int = 0  # steps whose time counts (train/timing.py), and their seconds
    excluded_steps: dict[str, int] = field(default_factory=dict)  # steps not timed, by reason
    excluded_s: float = 0.0
    train_s: float = 0.0
    nonfinite_retries: list[dict] = field(default_factory=list)  # steps computed twice (train/attention.py)
    attention_disabled: list[str] = field(default_factory=list)  # kernels a non-finite step disabled
    max_memory_allocated_mib: float | None = None  # peak GPU memory over the job's starts (train/timing.py)
    max_memory_reserved_mib: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # keys of other versions, as read
    layout: tuple[str, ...] = ()  # the key order of the checkpoint this record was read from

    def to_dict(self) -> dict[str, Any]:
        """The record as a checkpoint stores it."""
        values = {name: getattr(self, name) for name in RECORDED
                  if name not in OPTIONAL or getattr(self, name) is not None}
        values.update(self.extra)
        order = [key for key in self.layout if key in values]
        order += [key for key in values if key not in self.layout]
        return {key: values[key] for key in order}

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> Progress:
        """The record a checkpoint stored (to_dict's dict, or an older version's)."""
        progress = cls(**{name: record[name] for name in RECORDED if name in record},
                       extra={key: value for key, value in record.items() if key not in RECORDED},
                       layout=tuple(record))
        if "timed_steps" not in record:  # a job from before exclusions: every step it took counted
            progress.timed_steps = record.get("step", 0) if "train_s" in record else 0
            progress.excluded_steps, progress.excluded_s = {}, 0.0
        return progress


RECORDED = tuple(f.name for f in fields(Progress) if f.name not in ("extra", "layout"))
