"""The table of arms (arms.yaml beside this file, whose header says what each field means), read and checked
once; torch-free, so the plan, the schema, the speed-up and the report read an arm's facts without loading a
model. models/registry.py builds an arm from its `train` block.

A row that breaks the table's rules is one error naming the row and the field, at the first read.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

TABLE = Path(__file__).with_name("arms.yaml")
SHAPE_NAMES = ("n_layer", "d_model", "d_mlp", "head_dim", "vocab")  # the names `parameters` may use
SAVED_NAMES = ("d_model", "d_mlp")  # the names `saved_bytes` may use: a block's saved bytes scale with
PRECISIONS = ("bf16", "fp32")  # `saved_bytes`' keys: under bf16 autocast, in fp32
SQUARE_CORNERS = ("00", "10", "01", "11")
COLORMAPS = {"tab10": 10, "tab20": 20}


class ArmTableError(ValueError):
    """arms.yaml breaks a rule: the message names the row and the field."""


@dataclass(frozen=True)
class Training:
    """What training reads of an arm (its row's `train` block): the only part of the table in its runs' code
    key (plan/closure.py)."""
    model: str  # "module:attr"
    recipe: str  # "module:attr"
    warmup: bool
    turns_like: str | None = None  # an angle arm: the arm whose angle per step it takes
    not_turned: tuple[str, ...] = ()  # an angle arm: the matrix kinds it leaves to AdamW

    @property
    def modules(self) -> tuple[str, ...]:
        """The modules its classes live in, in the order the registry loads them."""
        return tuple(dict.fromkeys(ref.split(":")[0] for ref in (self.model, self.recipe)))


@dataclass(frozen=True)
class Arm:
    name: str
    train: Training
    architecture: str
    norms: str  # DESIGN.md's "norms" column
    conditioning: str  # DESIGN.md's "conditioning" column
    summary: str
    parameters: str  # what it adds to gpt's parameter count, in closed form (models/size.py)
    saved_bytes: dict[str, str]  # precision -> bytes a block saves per token, of d_model and d_mlp
    color: tuple[str, int]  # (colormap, index)
    marker: str
    squares: dict[str, str]  # square -> corner "ab"

    def extra_parameters(self, **shape: int) -> int:
        """`parameters` evaluated at a shape (SHAPE_NAMES as keywords)."""
        return _evaluate(ast.parse(self.parameters, mode="eval").body, shape)

    def saved_per_token(self, bf16: bool, d_model: int, d_mlp: int) -> int:
        """The bytes one block saves for the backward pass per token (`saved_bytes` at a shape)."""
        expression = self.saved_bytes["bf16" if bf16 else "fp32"]
        return _evaluate(ast.parse(expression, mode="eval").body, {"d_model": d_model, "d_mlp": d_mlp})


def _evaluate(node: ast.AST, names: dict[str, int]) -> int:
    """An integer expression of + - * and the shape's names, nothing else (no call, no attribute)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
        left, right = _evaluate(node.left, names), _evaluate(node.right, names)
        if isinstance(node.op, ast.Add):
            return left + right
        return left - right if isinstance(node.op, ast.Sub) else left * right
    raise ArmTableError(f"not an integer expression of {', '.join(names)}: {ast.unparse(node)!r}")


_LINES: dict[str, int] = {}  # arm -> the line of its row in TABLE


def _where(name: str) -> str:
    """TABLE and the line of an arm's row: where to edit."""
    return f"{TABLE}:{_LINES[name]}" if name in _LINES else str(TABLE)


def _field(row: dict, name: str, field: str, kind: type) -> Any:
    if field not in row:
        raise ArmTableError(f"{_where(name)}: arm {name!r} has no {field!r}")
    value = row[field]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ArmTableError(f"{_where(name)}: arm {name!r}: {field} must be a {kind.__name__}, got {value!r}")
    return value


def _reference(name: str, field: str, value: Any) -> str:
    if not isinstance(value, str) or value.count(":") != 1 or not value.startswith("ngptlab.models."):
        raise ArmTableError(f"{_where(name)}: arm {name!r}: train.{field} must be "
                            f"'ngptlab.models.<module>:<attr>', got {value!r}")
    return value


def _arm(name: str, row: Any) -> Arm:
    if not isinstance(row, dict):
        raise ArmTableError(f"{_where(name)}: arm {name!r} is not a mapping")
    known = {"train", "architecture", "norms", "conditioning", "summary", "parameters", "saved_bytes",
             "style", "squares"}
    if set(row) - known:
        raise ArmTableError(f"{_where(name)}: arm {name!r}: unknown field {sorted(set(row) - known)[0]!r}")
    train = _field(row, name, "train", dict)
    unknown = set(train) - {"model", "recipe", "warmup", "turns_like", "not_turned"}
    if unknown:
        raise ArmTableError(f"{_where(name)}: arm {name!r}: unknown field train.{sorted(unknown)[0]}")
    training = Training(_reference(name, "model", train.get("model")), _reference(name, "recipe",
                        train.get("recipe")), _field(train, name, "warmup", bool), train.get("turns_like"),
                        tuple(train.get("not_turned", ())))
    style = _field(row, name, "style", dict)
    colormap, _, index = str(style.get("color", "")).partition(":")
    if colormap not in COLORMAPS or not index.isdigit() or int(index) >= COLORMAPS[colormap]:
        raise ArmTableError(f"{_where(name)}: arm {name!r}: style.color must be 'tab10:<0-9>' or "
                            f"'tab20:<0-19>', got {style.get('color')!r}")
    squares = row.get("squares", {})
    if not isinstance(squares, dict) or any(c not in SQUARE_CORNERS for c in squares.values()):
        raise ArmTableError(f"{_where(name)}: arm {name!r}: squares must map a square to a corner of "
                            f"{', '.join(SQUARE_CORNERS)}, got {squares!r}")
    arm = Arm(name, training, _field(row, name, "architecture", str), _field(row, name, "norms", str),
              _field(row, name, "conditioning", str), _field(row, name, "summary", str),
              str(_field(row, name, "parameters", (str, int))), _saved_bytes(name, row),
              (colormap, int(index)), str(_field(style, name, "marker", str)), dict(squares))
    try:
        arm.extra_parameters(**dict.fromkeys(SHAPE_NAMES, 1))
    except (ArmTableError, SyntaxError) as error:
        raise ArmTableError(f"{_where(name)}: arm {name!r}: parameters: {error}") from None
    return arm


def _saved_bytes(name: str, row: dict) -> dict[str, str]:
    """`saved_bytes`: one integer expression of SAVED_NAMES per precision, checked by evaluating it."""
    saved = _field(row, name, "saved_bytes", dict)
    if sorted(saved) != sorted(PRECISIONS):
        raise ArmTableError(f"{_where(name)}: arm {name!r}: saved_bytes must have the keys "
                            f"{', '.join(PRECISIONS)}, got {sorted(saved)}")
    for precision, expression in saved.items():
        try:
            _evaluate(ast.parse(str(expression), mode="eval").body, dict.fromkeys(SAVED_NAMES, 1))
        except (ArmTableError, SyntaxError) as error:
            raise ArmTableError(f"{_where(name)}: arm {name!r}: saved_bytes.{precision}: {error}") from None
    return {precision: str(saved[precision]) for precision in PRECISIONS}


def _checked(arms: dict[str, Arm]) -> dict[str, Arm]:
    """Rules across rows: references to other arms exist, styles are distinct, each square's corners are
    held once each."""
    for arm in arms.values():
        for field, other in (("architecture", arm.architecture), ("train.turns_like", arm.train.turns_like)):
            if other is not None and other not in arms:
                raise ArmTableError(f"{_where(arm.name)}: arm {arm.name!r}: {field} names no arm: {other!r}")
    styles: dict[tuple, str] = {}
    for arm in arms.values():
        for style in ((arm.color,), (arm.marker,)):
            if style in styles:
                raise ArmTableError(f"{_where(arm.name)}: arms {styles[style]!r} and {arm.name!r} share the "
                                    f"{'colour' if isinstance(style[0], tuple) else 'marker'} {style[0]!r}")
            styles[style] = arm.name
    for square in {s for arm in arms.values() for s in arm.squares}:
        corners = sorted(arm.squares[square] for arm in arms.values() if square in arm.squares)
        if corners != sorted(SQUARE_CORNERS):
            raise ArmTableError(f"{TABLE}: square {square!r} must have one arm at each corner "
                                f"{', '.join(SQUARE_CORNERS)}; it has {', '.join(corners)}")
    return arms


@cache
def table() -> dict[str, Arm]:
    """Every arm by name, in the file's order."""
    text = TABLE.read_text()
    rows = yaml.safe_load(text)
    _LINES.update({m[1]: text[:m.start()].count("\n") + 1
                   for m in re.finditer(r"^([A-Za-z0-9_.-]+):", text, re.M)})
    if not isinstance(rows, dict) or not rows:
        raise ArmTableError(f"{TABLE}: not a mapping of arm names to rows")
    return _checked({str(name): _arm(str(name), row) for name, row in rows.items()})


def names() -> list[str]:
    return list(table())


def arm(name: str) -> Arm:
    arms = table()
    if name not in arms:
        raise KeyError(f"unknown arm {name!r}; allowed: {', '.join(arms)}")
    return arms[name]


def warms_up(name: str) -> bool:
    return arm(name).train.warmup


def square(name: str) -> dict[str, str]:
    """One 2x2's arms: corner "ab" -> arm."""
    return {a.squares[name]: a.name for a in table().values() if name in a.squares}



def turns_like() -> dict[str, str]:
    """Each angle arm -> the arm whose angle per step it takes."""
    return {name: a.train.turns_like for name, a in table().items() if a.train.turns_like is not None}
