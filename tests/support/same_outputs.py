"""Do two pipeline trees hold the same outputs? The proof a refactor owes: run the same grid before and after
(each in a fresh clone), then

    python tests/support/same_outputs.py BEFORE AFTER

compares every output the stages produce, file by file, and prints one line per difference (exit 1 if any):

- results/train/**/summary.json, results/trunk/**/*.json, results/conditioning/*.json, results/speedup/*.json,
  results/evaluate/*.json: equal as JSON once the fields named in VOLATILE are removed;
- results/train/**/metrics.jsonl: equal line by line, the same way;
- runs/**/*.safetensors: every tensor's bytes equal (the header's metadata records the code revision, so the
  file's own bytes and sha256 differ whenever the code does);
- reports/report.md: equal once code revisions, the hashes derived from them and the measured speed (the
  compute table's tokens/s and MFU) are masked.

Files present on one side only are differences too, and so are keys, except those named with `--added KEY`:
a record the newer code writes and the older did not (the after side may carry them, anywhere). Not a test
in CI: it needs two full pipeline runs.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

# Fields that record the code revision, or a hash of a file that carries it; they differ whenever the code
# does and say nothing of the numbers. Everything else must be equal.
VOLATILE = frozenset({"code_revision", "checkpoint_sha256", "revision", "code"})
VOLATILE_NESTED = frozenset({("checkpoint", "sha256")})  # (parent key, key): a conditioning JSON's checkpoint
# In report.md: the code fingerprints and hashes (whole or cut to 12 digits) of files that record them, and
# the columns that report measured speed.
MASKED = re.compile(r"code:[0-9a-f]{7,}|\b[0-9a-f]{12,64}\b")
VOLATILE_COLUMNS = frozenset({"tokens/s (median)", "MFU (median)"})
KEPT_STATE = re.compile(r"(ckpt-\d+)-\d+")

JSON_GLOBS = ("results/train/**/summary.json", "results/trunk/**/*.json", "results/conditioning/*.json",
              "results/speedup/*.json", "results/evaluate/*.json")
METRICS, TENSORS, REPORT = "results/train/**/metrics.jsonl", "runs/**/*.safetensors", "reports/report.md"
PATTERNS = (*JSON_GLOBS, METRICS, TENSORS, REPORT)


def without(value: object, keys: frozenset[str], parent: str | None = None) -> object:
    if isinstance(value, dict):
        return {k: without(v, keys, k) for k, v in value.items()
                if k not in keys and (parent, k) not in VOLATILE_NESTED}
    if isinstance(value, list):
        return [without(v, keys, parent) for v in value]
    return value


def masked_report(text: str) -> list[str]:
    """report.md's lines with hashes and the measured-speed columns of its tables masked."""
    lines, volatile = [], set()
    for line in MASKED.sub("<hash>", text).splitlines():
        cells = line.split("|")
        if line.startswith("|") and not line.startswith("|---"):
            if not volatile and any(c.strip() in VOLATILE_COLUMNS for c in cells):
                volatile = {i for i, c in enumerate(cells) if c.strip() in VOLATILE_COLUMNS}
            elif volatile:
                line = "|".join("<measured>" if i in volatile else c for i, c in enumerate(cells))
        elif not line.startswith("|"):
            volatile = set()
        lines.append(line)
    return lines


def same_json(before: object, after: object, added: frozenset[str]) -> str | None:
    """Where two records differ, the code revision's fields left out, and `added` keys on the after side."""
    return first_difference(without(before, VOLATILE), without(after, VOLATILE | added))


def by_name(root: Path, pattern: str) -> dict[str, Path]:
    """The files of `pattern` under root by their path, a kept state's directory named by its step alone
    (ckpt-<step>-<unique suffix>: the suffix differs run to run)."""
    return {KEPT_STATE.sub(r"\1", p.relative_to(root).as_posix()): p
            for p in root.glob(pattern) if p.is_file()}


def paired(before: Path, after: Path, pattern: str) -> Iterator[tuple[str, Path, Path]]:
    """The files of `pattern` present on both sides (compare_presence reports the others)."""
    files_a, files_b = by_name(before, pattern), by_name(after, pattern)
    for name in sorted(files_a.keys() & files_b.keys()):
        yield name, files_a[name], files_b[name]


def compare_presence(before: Path, after: Path, added: frozenset[str]) -> Iterator[str]:
    for pattern in PATTERNS:
        files_a, files_b = by_name(before, pattern), by_name(after, pattern)
        for name in sorted(files_a.keys() ^ files_b.keys()):
            yield f"{name}: only in {'before' if name in files_a else 'after'}"


def first_difference(a: object, b: object, where: str = "") -> str | None:
    """Where two JSON values first differ, as a key path."""
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            return f"{where or '.'}: keys {list(a)} != {list(b)}"
        for key in a:
            found = first_difference(a[key], b[key], f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_difference(x, y, f"{where}[{i}]")
            if found:
                return found
        return None
    return None if a == b else f"{where or '.'}: {a!r} != {b!r}"


def compare_json(before: Path, after: Path, added: frozenset[str]) -> Iterator[str]:
    for pattern in JSON_GLOBS:
        for name, a, b in paired(before, after, pattern):
            found = same_json(json.loads(a.read_text()), json.loads(b.read_text()), added)
            if found:
                yield f"{name}: {found}"


def compare_metrics(before: Path, after: Path, added: frozenset[str]) -> Iterator[str]:
    for name, a, b in paired(before, after, METRICS):
        lines_a, lines_b = a.read_text().splitlines(), b.read_text().splitlines()
        if len(lines_a) != len(lines_b):
            yield f"{name}: {len(lines_a)} lines != {len(lines_b)}"
            continue
        for i, (x, y) in enumerate(zip(lines_a, lines_b, strict=True)):
            found = same_json(json.loads(x), json.loads(y), added)
            if found:
                yield f"{name} line {i + 1}: {found}"
                break


def compare_tensors(before: Path, after: Path, added: frozenset[str]) -> Iterator[str]:
    from safetensors import safe_open

    for name, a, b in paired(before, after, TENSORS):
        with safe_open(a, "pt") as fa, safe_open(b, "pt") as fb:
            if sorted(fa.keys()) != sorted(fb.keys()):
                yield f"{name}: tensor names differ"
                continue
            for key in sorted(fa.keys()):
                x, y = fa.get_tensor(key), fb.get_tensor(key)
                if x.dtype != y.dtype or x.shape != y.shape or not bool((x.view(-1) == y.view(-1)).all()):
                    yield f"{name}: tensor {key} differs"
                    break


def compare_report(before: Path, after: Path, added: frozenset[str]) -> Iterator[str]:
    for name, a, b in paired(before, after, REPORT):
        lines_a, lines_b = masked_report(a.read_text()), masked_report(b.read_text())
        for i, (x, y) in enumerate(zip(lines_a, lines_b, strict=False)):
            if x != y:
                yield f"{name} line {i + 1}: {x!r} != {y!r}"
                break
        else:
            if len(lines_a) != len(lines_b):
                yield f"{name}: {len(lines_a)} lines != {len(lines_b)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--added", action="append", default=[], metavar="KEY",
                        help="a key the after side's records may add (repeat for several)")
    args = parser.parse_args(argv)
    added = frozenset(args.added)
    differences = 0
    for check in (compare_presence, compare_json, compare_metrics, compare_tensors, compare_report):
        for line in check(args.before, args.after, added):
            print(line)
            differences += 1
    files = {pattern: len(list(args.before.glob(pattern))) for pattern in PATTERNS}
    print(f"compared {sum(files.values())} files ({', '.join(f'{n} {p}' for p, n in files.items() if n)}); "
          f"{differences} difference(s)")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
