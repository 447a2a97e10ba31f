"""The cell's reading: what its pre-specified primary factorial effect says about the account that
conditioning explains nGPT's speed-up.

The primary effect is speedup.primary_contrast (conditioning, norm or interaction; one per params file, set
before the data). The account predicts, on the symmetric rule (speedup/equivalence.py):
  conditioning  exceeds by more than xM (fixing conditioning speeds training up),
  norm          equivalent within xM (fixing the norms alone does nothing),
  interaction   equivalent within xM (conditioning helps alike with the norms fixed or free).
The reading is "consistent with" the account when the effect's verdict is the predicted one, "inconsistent
with" it when another claim holds, else "not resolved" (no interval, or an interval across a margin's
edge). It never proves the account: the factorial is not clean (speedup/factorial.py).
The same words serve the cell's own level-interval and, in the report, the Holm-adjusted claims across cells.
Beside it, whether the effective learning rate confounds the effect (speedup/rivals.py: the interval of the
arms' difference in ln angular rate against the margin): the words gain "; " and that verdict with its
interval (effective_lr_clause), e.g. "; confounded by the effective learning rate: the arms it credits turn
their weights x1.73 [1.61, 1.86] as fast ...", where the effect cannot tell conditioning from the effective
learning rate; confounded_by_effective_lr is true, false, or null where not resolved or not measured.
"""

from __future__ import annotations

from collections.abc import Mapping

from ngptlab.speedup.equivalence import NOT_RESOLVED, held_claim
from ngptlab.speedup.rivals import clause
from ngptlab.stats import LEVEL

ACCOUNT = "the account that conditioning explains nGPT's speed-up"
PREDICTED = {"conditioning": "exceeds", "norm": "equivalent", "interaction": "equivalent"}
CONSISTENT = f"consistent with {ACCOUNT}"
INCONSISTENT = f"inconsistent with {ACCOUNT}"


def reading_words(primary: str, p_values: dict[str, float] | None, level: float = LEVEL) -> str:
    """consistent with / inconsistent with the account / not resolved, from the primary effect's (possibly
    adjusted) claim p-values."""
    claim = held_claim(p_values, level)
    if claim is None:
        return NOT_RESOLVED
    return CONSISTENT if claim == PREDICTED[primary] else INCONSISTENT


def primary_reading(factorial: dict | None, primary: str, margin: float, level: float = LEVEL,
                    confound: Mapping | None = None) -> dict:
    """{primary, predicted, estimate {ln, ratio}, log_interval, interval, method, level, n_seeds, verdict,
    p_values, reading, confounded_by_effective_lr, effective_lr_clause, note}: the cell's primary effect and
    the words the report uses for it; confound is rivals()'s primary entry (None: not checked)."""
    out = {"primary": primary, "predicted": PREDICTED[primary], "margin": margin, "estimate": None,
           "log_interval": None, "interval": None, "method": None, "level": level, "n_seeds": 0,
           "verdict": None, "p_values": None, "reading": NOT_RESOLVED, "confounded_by_effective_lr": None,
           "effective_lr_clause": None, "note": None}
    if factorial is None:
        out["note"] = "the cell lacks one of gpt, gpt-rownorm, gpt-orth, ngpt: no factorial"
        return out
    effect = factorial["effects"][primary]
    out.update({key: effect[key] for key in ("estimate", "log_interval", "interval", "method", "level",
                                               "n_seeds", "verdict", "p_values")})
    effective_lr = clause(confound or {})
    out["reading"] = reading_words(primary, effect["p_values"], level) + (f"; {effective_lr}" if effective_lr
                                                                           else "")
    out["confounded_by_effective_lr"] = (confound or {}).get("confounded")
    out["effective_lr_clause"] = effective_lr
    out["note"] = factorial["note"]
    return out
