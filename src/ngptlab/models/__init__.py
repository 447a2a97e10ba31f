"""The arms (model + optimizer recipe) at any shape. See registry.py for the table of arms.

  registry.py     the arms and the one way to build them       layers.py    what every arm shares
  gpt.py          the paper's baseline GPT                     ngpt.py      the normalized transformer
  gpt_nowd.py gpt_lrm.py gpt_scalar.py gpt_rownorm.py gpt_orth.py gpt_qknorm.py ngpt_freew.py gpt_angle.py
  ngpt_angle.py   one arm each: only how it differs from gpt (or ngpt)
  scales.py       model shapes                                  size.py      parameters and FLOPs in
                                                                             closed form
  warmup.py       which arms warm up                            placement.py where ngpt sits in the 2x2
  matched_angle.py  which arms turn at another arm's angle per step (torch-free)
  rotational.py   the rotational step: the matrices an arm's recipe names turn by a set angle per step

Imports are lazy (PEP 562): `ngptlab.models.scales`, `size` and `placement` are torch-free, so sizing a
grid (`ngptlab plan`) never loads torch; the names below load their module on first use.
"""

from importlib import import_module

_WHERE = {
    "ARMS": "registry", "Arm": "registry", "build": "registry", "build_seeded": "registry",
    "count_parameters": "registry",
    "Recipe": "gpt", "MATRIX_KINDS": "layers", "MatrixInfo": "layers",
    "SCALES": "scales", "Scale": "scales", "resolve_scale": "scales",
    "parameter_count": "size", "train_flops_per_token": "size", "padded_vocab": "size",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
