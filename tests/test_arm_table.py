"""The table of arms (models/arms.yaml, read by models/arms.py): every other list of arms is derived from it,
and a row that breaks a rule is one error naming the file, the line of its row and the field."""

from __future__ import annotations

import re

import pytest

from ngptlab.models import arms
from ngptlab.models.arms import ArmTableError
from ngptlab.plan import memory
from ngptlab.report.kit import plot
from ngptlab.settings import allowed_arms, load_schema
from ngptlab.speedup import factorial, inference, reading


def test_every_list_of_arms_is_the_tables():
    names = arms.names()
    assert allowed_arms() == names
    assert load_schema()["$defs"]["angle_arm"]["enum"] == list(arms.turns_like())
    assert list(plot.ARM_STYLE) == names
    for square in (factorial.CONDITIONING, factorial.ANGLE):
        assert {arm: f"{a}{b}" for arm, (a, b) in square.arms.items()} == \
            {arm: corner for corner, arm in arms.square(square.name).items()}
    assert reading.BASELINE == arms.square("conditioning")["00"]
    assert {arm for pair in inference.CONTRASTS for arm in pair} <= set(names)
    assert all(memory.training_memory(arm, _shape(), 10**6, 100, 64, False).total > 0 for arm in names)


def _shape():
    from ngptlab.models.scales import resolve_scale
    return resolve_scale("cpu-4l")


@pytest.fixture
def table_at(tmp_path, monkeypatch):
    """Point the reader at a copy of the table edited by `edit`; the cache cleared before and after."""
    def read(edit) -> dict:
        path = tmp_path / "arms.yaml"
        path.write_text(edit(arms.TABLE.read_text()))
        monkeypatch.setattr(arms, "TABLE", path)
        arms.table.cache_clear()
        return arms.table()
    yield read
    arms.table.cache_clear()


@pytest.mark.parametrize("old, new, says", [
    ('style: {color: "tab10:5", marker: s}', 'style: {color: "tab30:5", marker: s}', "style.color"),
    ('style: {color: "tab10:5", marker: s}', 'style: {color: "tab10:6", marker: s}', "share the colour"),
    ('parameters: "7 * n_layer"', 'parameters: "7 * __import__(0)"', "integer expression"),
    ('squares: {conditioning: "10"}', 'squares: {conditioning: "11"}', "square 'conditioning'"),
    # gpt-rownorm's row holds the first saved_bytes of 26 d (bf16) and of 32 d (fp32)
    ('saved_bytes: {bf16: "26', 'saved_byte: {bf16: "26', "unknown field"),
    ('8 * d_mlp", fp32: "32', '8 * head", fp32: "32', "saved_bytes.bf16"),
    (', fp32: "32 * d_model + 16 * d_mlp"}', '}', "saved_bytes must"),
    ('model: "ngptlab.models.gpt_rownorm:GPTRowNorm"', 'model: "gpt_rownorm.GPTRowNorm"', "train.model"),
])
def test_a_broken_row_is_one_error_naming_the_file_line_and_field(table_at, old, new, says):
    with pytest.raises(ArmTableError) as raised:
        table_at(lambda text: (text.replace(old, new, 1) if old in text else pytest.fail(f"no {old!r}")))
    message = str(raised.value)
    assert says in message and "arms.yaml" in message and "\n" not in message
    if "square" not in says:  # a row's error names the line where its row starts, and the arm
        line = int(re.search(r"arms\.yaml:(\d+):", message)[1])
        row = arms.TABLE.read_text().splitlines()[line - 1]
        assert row.endswith(":") and f"{row[:-1]!r}" in message
