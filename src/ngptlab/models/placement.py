"""Where ngpt sits in the 2x2, in the words the arm table (registry.py) and the factorial
(ngptlab.speedup.factorial) both use; torch-free, so the speed-up stage reads it without loading the models.

ngpt constrains no singular value of its matrices, but the paper observes them well conditioned, so the 2x2
counts its conditioning as fixed: ngpt sits in the (norms fixed, conditioning fixed) cell (README, "why ngpt,
and not a fourth gpt-family arm").
"""

NGPT_CONDITIONING = "counted fixed (not constrained; observed well conditioned)"
