"""What a job's results are made from, as the job checks it before it resumes a state or calls itself done.

A run's identity is its spec (scale, context, arm, budget, lr, seed; a schedule other than cosine and a
weight dtype other than fp32, as RunSpec.as_dict records them), the settings that shape it and the hashes of
its token shards. The settings are those the lineage hashes for it (plan/lineage.py): every key whose schema
entry says it shapes the train stage (settings/roles.py, `shaping`), by dotted key, and for a WSD run also
what its trunk is made from, since a branch continues its trunk; a trunk segment's are the trunk's. So no
list of settings is written here: a key the schema classes as shaping a run moves its identity, a key it
classes as execution (speed, roundoff, placement, ...) does not, and a run may resume under another
micro_batch_tokens or device. The grid's keys enter by the spec alone (a run's own budget, lr, seed), so a
run's identity stays when the grid grows around it; but a trunk warms up over the grid's smallest budget
(ngptlab.schedule), which enters a WSD job's identity as the lineage's trunk key holds it.

The identity is written where the job's state lies (a summary, a checkpoint's state.json, a trunk segment's
record) and read back from there: outputs or a checkpoint of another identity are refused, naming the keys
that differ, never overwritten nor resumed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from ngptlab import schedule as schedules
from ngptlab.grid.runs import RunSpec
from ngptlab.grid.trunks import TrunkSpec
from ngptlab.settings import Params, Train, of_section
from ngptlab.settings.roles import shaping
from ngptlab.settings.typed import SECTIONS

SETTINGS = "settings"  # the identity's shaping settings, {dotted key: value}; its other keys: spec and data
WARMUP_BUDGET = "min(train.budgets)"  # a trunk's warmup follows the grid's smallest budget
DATA = ("train_sha256", "val_sha256")
SHOWN = 3  # differing keys a refusal names; more are counted
WIDTH = 40  # characters of a value a refusal shows


def full_params(train: Train, params: Params | None = None) -> dict[str, Any]:
    """Every params key, defaults filled in, as the lineage reads them (dataclasses.asdict of Params), with
    `train` as the train section (the one the job trains with). Without `params` (a test or a benchmark that
    drives the trainer with a train section alone), the other sections are their schema defaults."""
    others = (asdict(params) if params is not None else
              {name: asdict(of_section(name, {})) for name in SECTIONS if name != "train"})
    return {**others, "train": asdict(train)}


def _canonical(identity: dict) -> dict:
    """As JSON reads it back (tuples as lists, keys as strings), so a written identity compares equal."""
    return json.loads(json.dumps(identity, sort_keys=True))


def _data(data: Mapping) -> dict:
    return {key: data.get(key) for key in DATA}


def _trunk_settings(full: Mapping, arm: str) -> dict[str, Any]:
    return {**shaping(full, "trunk", schedules.WSD, arm), WARMUP_BUDGET: min(full["train"]["budgets"])}


def run_identity(spec: RunSpec, full: Mapping, data: Mapping) -> dict[str, Any]:
    """A run's identity: its spec, the settings that shape it (a WSD run's trunk's too), its data."""
    settings = shaping(full, "train", spec.schedule, spec.arm)
    if schedules.shares_trunk(spec):  # a key shaping both has the same value in both: one entry
        settings = {**_trunk_settings(full, spec.arm), **settings}
    return _canonical({**spec.as_dict(), SETTINGS: settings, **_data(data)})


def trunk_identity(trunk: TrunkSpec, full: Mapping, data: Mapping) -> dict[str, Any]:
    """A trunk's identity (all its segments'): its spec, the settings that shape a trunk, its data."""
    return _canonical({**trunk.as_dict(), SETTINGS: _trunk_settings(full, trunk.arm), **_data(data)})


def _shown(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= WIDTH else text[:WIDTH - 3] + "..."


def _flat(identity: Mapping) -> dict[str, Any]:
    """The identity by dotted key: a setting by its params key, a spec field or shard hash by its name."""
    return {**{k: v for k, v in identity.items() if k != SETTINGS}, **identity.get(SETTINGS, {})}


def mismatch(found: Any, expected: Mapping) -> str | None:
    """None where `found` (an identity read from disk) is `expected`; else why not, in words for one line:
    the keys that differ with their values on disk and now, or that it was written before identities were."""
    if found == expected:
        return None
    if not isinstance(found, Mapping) or not isinstance(found.get(SETTINGS), Mapping):
        return "written before runs recorded their identity"
    disk, now = _flat(found), _flat(expected)
    differing = [key for key in sorted(disk.keys() | now.keys())
                 if key not in disk or key not in now or disk[key] != now[key]]
    words = [f"{key} differs: {_shown(disk[key]) if key in disk else 'absent'} on disk, "
             f"{_shown(now[key]) if key in now else 'absent'} now" for key in differing[:SHOWN]]
    more = f"; and {len(differing) - SHOWN} more" if len(differing) > SHOWN else ""
    return "; ".join(words) + more or "its record differs"
