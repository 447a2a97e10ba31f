"""A new arm is its module and one row of models/arms.yaml: written into a copy of the tree, the params schema
accepts it, the report has its style, the memory plan and the parameter count know it, a square can take it,
the README and docs tables list it, and it trains. Everything runs in a child process on the copy's code
(PYTHONPATH first, before the venv's editable install), as the project would run after the edit."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support import new_arm
from support.workflow import default_params

from ngptlab.layout import REPO_ROOT
from ngptlab.models import arms

# The child reads every derived fact of the copy; the conditioning square's corner 01 moves to the new arm,
# so the square and the accounts that read it must follow the table too.
PROBE = """
import json, sys, torch
from ngptlab.docs_reference import arm_table
from ngptlab.config.load import validate_params
from ngptlab.models import arms
from ngptlab.models.registry import build, count_parameters
from ngptlab.models.scales import resolve_scale
from ngptlab.models.size import parameter_count
from ngptlab.plan.memory import training_memory
from ngptlab.report.kit.plot import ARM_STYLE, arm_marker
from ngptlab.settings import allowed_arms
from ngptlab.speedup.factorial import CONDITIONING
from ngptlab.speedup.reading import CONDITIONING as ACCOUNT

arm, params = sys.argv[1], json.loads(sys.argv[2])
shape = resolve_scale("cpu-4l")
model, recipe = build(arm, shape, 512, 32)
before = {n: p.norm().item() for n, p in model.layers.named_parameters() if p.ndim == 2}
optimizer = torch.optim.AdamW(recipe.param_groups(model, 1e-2))
tokens = torch.randint(0, 512, (2, 33))
for _ in range(3):
    _, loss = model(tokens[:, :-1], tokens[:, 1:])
    optimizer.zero_grad(); loss.backward(); optimizer.step(); recipe.post_step(model)
after = {n: p.norm().item() for n, p in model.layers.named_parameters() if p.ndim == 2}
params["train"]["arms"] = ["gpt", arm]
for sweeps in params["train"]["learning_rates"].values():
    sweeps[arm] = sweeps["gpt"]
validate_params(params, "the copy's params")
print(json.dumps({
    "allowed": allowed_arms(), "style": [list(ARM_STYLE[arm][0]), arm_marker(arm)],
    "parameters": [parameter_count(arm, shape, 512), count_parameters(model)],
    "memory": [training_memory(arm, shape, 10**6, 512, 1024, False).total,
               training_memory("gpt", shape, 10**6, 512, 1024, False).total],
    "norm_drift": max(abs(after[n] / before[n] - 1) for n in before), "loss": loss.item(),
    "square": CONDITIONING.arms, "pattern": [list(p) for p in ACCOUNT.pattern], "table": arm_table(),
}))
"""


@pytest.fixture(scope="module")
def probed(tmp_path_factory) -> dict:
    package = new_arm.copy_package(REPO_ROOT / "src" / "ngptlab", tmp_path_factory.mktemp("new-arm"))
    table = package / "models" / "arms.yaml"
    # the square's corner 01: from gpt-orth's row to the new one's
    table.write_text(table.read_text().replace('squares: {conditioning: "01"}\n', "", 1))
    new_arm.add_to(package, new_arm.ROW + '  squares: {conditioning: "01"}\n')
    params = default_params()
    env = {**os.environ, "PYTHONPATH": str(package.parent)}
    out = subprocess.run([sys.executable, "-c", PROBE, new_arm.ARM, json.dumps(params)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def test_the_schema_and_the_styles_take_the_new_arm_from_its_row(probed):
    assert probed["allowed"] == [*arms.names(), new_arm.ARM]
    assert probed["style"][1] == "v"


def test_its_parameter_count_and_memory_follow_its_row(probed):
    counted, built = probed["parameters"]
    assert counted == built  # `parameters: "0"`: gpt's count, as its model has
    assert probed["memory"][0] == probed["memory"][1]  # saved_bytes as gpt's


def test_a_square_and_the_accounts_follow_the_table(probed):
    assert probed["square"][new_arm.ARM] == [0, 1] and "gpt-orth" not in probed["square"]
    assert [new_arm.ARM, "gpt", "exceeds"] in probed["pattern"]  # the conditioning account credits it


def test_the_docs_tables_list_it_and_it_trains_with_its_norms_fixed(probed):
    assert f"| {new_arm.ARM} |" in probed["table"]
    assert probed["norm_drift"] < 1e-5 and probed["loss"] == probed["loss"]  # a finite loss, norms kept
