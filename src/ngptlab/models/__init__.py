"""The arms (model + optimizer recipe) at any shape.

  arms.yaml arms.py  the table of arms, one row each, and its reader (torch-free): what every other part of
                     the project knows of an arm
  registry.py     the one way to build an arm, loading its classes from its row
  init_device.py  where a build's initialisation runs (gpt-orth's QR on the run's device)
  layers.py       what every arm shares
  gpt.py          the paper's baseline GPT                      ngpt.py      the normalized transformer
  <arm>.py        one module per other arm (its row of arms.yaml names it): only how it differs from gpt
                  (or ngpt)
  scales.py       model shapes                                  size.py      parameters and FLOPs in
                                                                             closed form
  rotational.py   the rotational step: the matrices an arm's recipe names turn by a set angle per step
  muon.py         one optimizer: torch's Muon on an arm's flagged matrices, AdamW on the rest (gpt-muon)
  param_groups.py  moving an arm's own parameters out of gpt's AdamW groups, and out of AdamW's step
  saved_tensors.py  the bytes each arm's block saves for backward, measured (arms.yaml's saved_bytes)
  pc_level.py     the PC arms' levels and the bytes their PC layer saves for backward (torch-free, for plan)

Import each module by its own name (`from ngptlab.models.registry import build`): this package loads nothing,
so `scales`, `size`, `arms` and `pc_level` stay torch-free for `ngptlab plan`, and a run's code key
(plan/closure.py) reads which modules it imports from the source alone.
"""
