"""Edit the params file in place, keeping its comments and layout (ruamel.yaml round trip, merged with the
file's own lines so that a line the edit does not change stays as written), and never write one that does not
validate. Used by `ngptlab plan --set`, `--extend-sweeps`, `--prune-sweeps`, `--add-seeds` and
`--match-angles`."""

from __future__ import annotations

import io
from collections.abc import Callable, MutableSequence
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from ngptlab.config.load import validate_params
from ngptlab.errors import ParamsError
from ngptlab.files import write_text_atomic
from ngptlab.plan.linemerge import merged


def _round_trip() -> YAML:
    yaml = YAML()  # round trip: comments, order and flow style stay as the user wrote them
    yaml.preserve_quotes = True
    yaml.width = 4096
    return yaml


def _dump(yaml: YAML, document: CommentedMap) -> list[str]:
    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue().splitlines(keepends=True)


def edit_params_file(path: str | Path, edit: Callable[[CommentedMap], None]) -> None:
    """Apply `edit` to the file's document and write it back, if the result is a valid params file. Only the
    lines the edit changes are written anew: ruamel's round trip alone re-lays some lines it did not touch
    (a flow list wrapped over lines joins into one), so those keep the file's own text (merged)."""
    yaml, path = _round_trip(), Path(path)
    text = path.read_text()
    document = yaml.load(text)
    unedited = _dump(yaml, document)
    edit(document)
    edited = "".join(merged(unedited, text.splitlines(keepends=True), _dump(yaml, document)))
    validate_params(YAML(typ="safe").load(edited), source=str(path))
    write_text_atomic(path, edited)


def parse_assignment(assignment: str, example: str = "train.budgets=[2048,8192]",
                     option: str = "--set") -> tuple[str, object]:
    """`KEY=VALUE` with a dotted KEY and a YAML VALUE, as `dvc exp run -S` takes them; `option` and `example`
    are the command's own, for the message of a malformed one."""
    key, sep, value = assignment.partition("=")
    if not sep or not key:
        raise ParamsError(f"{option} {assignment!r}: expected KEY=VALUE, e.g. {option} {example}")
    try:
        return key, YAML(typ="safe").load(value)
    except Exception as err:  # ruamel raises several error types for malformed YAML
        raise ParamsError(f"{option} {assignment!r}: the value is not valid YAML: {err}") from None


def set_value(document: CommentedMap, key: str, value: object) -> None:
    """Set a dotted key. A scale name may hold dots ("0.5B"), so each level takes the longest run of parts
    that names an existing key; only the last part may be new."""
    parts, node, path = key.split("."), document, []
    while parts:
        if not isinstance(node, dict):
            raise ParamsError(f"--set {key}: {'.'.join(path)} is not a mapping")
        for n in range(len(parts), 0, -1):
            name = ".".join(parts[:n])
            if name in node or n == 1:
                break
        parts = parts[n:]
        path.append(name)
        if not parts:
            node[name] = styled(value, node.get(name))
        elif name not in node:
            raise ParamsError(f"--set {key}: no key {'.'.join(path)} in the params file")
        else:
            node = node[name]


def styled(value: object, old: object) -> object:
    """A list or mapping to set in place of `old`, in old's style: block where old was a block collection,
    else flow, as the params files write lists (on the key's line, its comment after it)."""
    if not isinstance(value, list | dict):
        return value
    block = isinstance(old, CommentedSeq | CommentedMap) and not old.fa.flow_style()
    node = CommentedSeq(value) if isinstance(value, list) else CommentedMap(value)
    if not block:
        node.fa.set_flow_style()
    return node


def add_entries(document: CommentedMap, key: str, entries: list[dict], match: tuple[str, ...]) -> None:
    """Append each entry to the list train.<key> (created at the end of train if absent), one flow-style
    mapping per line; an entry equal to an existing one on the `match` fields replaces it in place."""
    train = document["train"]
    if key not in train:
        train[key] = CommentedSeq()
    merge_entries(train[key], entries, match, _flow_row)


def merge_entries(listed: MutableSequence, entries: list[dict], match: tuple[str, ...],
                  row: Callable[[dict], dict] = dict) -> None:
    """Each entry (as `row` makes it) appended to listed, or in place of the one equal on the `match`
    fields: how a params file's train.pruned_sweeps and train.added_seeds grow, in the file or in memory."""
    for entry in entries:
        same = [i for i, old in enumerate(listed) if match and all(old[f] == entry[f] for f in match)]
        if same:
            listed[same[0]] = row(entry)
        else:
            listed.append(row(entry))


def _flow_row(entry: dict) -> CommentedMap:
    """One entry as a flow-style mapping on one line, its lists flow-style too."""
    row = CommentedMap(entry)
    row.fa.set_flow_style()
    for field, value in entry.items():
        if isinstance(value, list):
            row[field] = CommentedSeq(value)
            row[field].fa.set_flow_style()
    return row
