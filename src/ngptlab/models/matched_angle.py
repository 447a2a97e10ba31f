"""Which arms turn their matrices at another arm's angle per step, and which matrix kinds they leave to
AdamW: a fact of each angle arm's recipe (gpt_angle.py, ngpt_angle.py read it), kept torch-free so that the
plan reads it without loading a model."""

from __future__ import annotations

# angle arm -> the arm whose angle per step it takes (the angle square: gpt-angle has ngpt's angle)
TURNS_LIKE = {"gpt-angle": "ngpt", "ngpt-angle": "gpt"}
# angle arm -> the arm whose architecture it keeps
ARCHITECTURE = {"gpt-angle": "gpt", "ngpt-angle": "ngpt"}
# the kinds it leaves on AdamW: gpt-angle's LM head, which has no scalar to carry its norm
NOT_TURNED = {"gpt-angle": ("embed_out",), "ngpt-angle": ()}
