"""The planted truths a design is checked on: each arm's token speed-up over gpt, for ngpt at each of
design.ngpt_speedups (default: 1.5x and 4x, the figures independent replications report at 1k and 4k
context, and the paper's own claim at each context of the grid, so a design shows it can measure the claim:
4x at 1k, 10x at 4k, 20x at 8k, paper/paper_numbers.yaml).

  account true   fixing the conditioning is what speeds nGPT up: gpt-orth = ngpt, gpt-rownorm = gpt
  account false  the mirror, the norms do it: gpt-rownorm = ngpt, gpt-orth = gpt
  ngpt only      neither control is faster: only ngpt's own combination is (gpt-orth = gpt-rownorm = gpt)
  partial        conditioning does half of it: gpt-orth at the square root of ngpt's speed-up, gpt-rownorm
                 = gpt
  null           no arm is faster: every arm = gpt, ngpt included
and two in which the arms also differ in their learning-rate law (design/loss_model.py LrLaw: how sharply
the loss rises away from the best learning rate, where that optimum lies and how fast it falls with the
budget), so one learning-rate grid serves them unequally (SENSITIVITY):
  null, ngpt's law other              the null; ngpt's curvature half gpt's, its optimum x sqrt 2 (nGPT
                                      takes larger learning rates) drifting half as fast
  account true, both laws other       the account at 1.5x; gpt-orth's curvature twice gpt's and its optimum
                                      / sqrt 2, ngpt's as in the null
The factors keep every arm's optimum inside the presets' sweeps over their budgets, so what is tested is
the unequal service of one grid, not an optimum the sweep never reaches (the tuning check's concern).
Where the grid runs the angle square (gpt-angle, ngpt-angle), two more truths, at each speed-up:
  angle account        the per-step angle does it: gpt-angle = ngpt, ngpt-angle = gpt, gpt-orth = gpt-rownorm
                       = gpt
  angle account, half  the angle does half of it: gpt-angle and ngpt-angle at the square root of ngpt's
In every other truth the angle arms run as fast as their architecture (gpt-angle as gpt, ngpt-angle as
ngpt). "The account" in a truth's name is the conditioning account; "account false" is the world of its
mirror, the norm account. Arms outside both squares (the dial gpt-pc<L>, gpt-muon) sit on the line of the
mechanism the world's account credits, through gpt and ngpt (account true: ln S against ln kappa; the angle
account: against ln angle), and at gpt's speed in every other world: so where only ngpt is fast, or the norms
do it, the dial moves kappa and S stays, which the conditioning line reads.

Every truth also plants each arm's mechanism (Truth.mechanism): every arm at its place (design/placements.py:
ln kappa of the layer 3-4 Q and K heads, ln angle per step; gpt-orth at kappa 1, ngpt conditioned and turning
twice as far per step, gpt-rownorm at gpt's kappa and angle, gpt-angle at gpt's kappa and ngpt's angle,
ngpt-angle the reverse, the dial's levels at falling kappa, gpt-muon conditioned and turning x sqrt 2). The
reading a design should give of the conditioning and effective-learning-rate accounts is then the
dose-response rule applied to the planted values (design/mechanisms.py expected_fits), as the cell reads them
(speedup/reading.py: from the arms' measured mechanisms); of the norm account, read by construction, and of
any account where the planted values give no line, the one the planted speed-ups give by its label pattern
(Truth.reading): each prediction's claim on the planted log ratio against the margin; consistent only where
every prediction holds. The planted values can read otherwise than a world's name, and the design then says
what the grid cannot tell: a "consistent" reading of an account the world makes false by construction
(MADE_TRUE: every account but the one it makes true; the partial worlds claim none) counts as a false
positive whatever the planted values read (design/table.py). On the planted values (margin x1.25):
  the 2x2 alone   "only ngpt" and, at ngpt x4 and x10, "account true" read the conditioning account not
                  resolved: gpt-orth at kappa 1 lies below the line through ngpt beyond the margin (read as
                  the capacity cost), which leaves ngpt the only arm that moved kappa, and a line through the
                  baseline and one arm fits that arm whatever the account (speedup/dose_response.py
                  MIN_MOVED); the null reads "the accounts cannot be told apart"
  with the dial   account true reads consistent (at x4 and x10 with gpt-orth's capacity cost), only ngpt
  and gpt-muon    and the norms inconsistent (the dial at gpt's speed below the line); at ngpt x1.5 on the
                  2x2 with the dial and gpt-muon, only ngpt fast reads the effective-learning-rate account
                  consistent (gpt-muon's x sqrt 2 angle at gpt's speed lies within x1.25 of the line through
                  ngpt): a false positive the design reports
  angle square    the angle account consistent at every speed-up, the conditioning account inconsistent
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

from ngptlab.design.loss_model import SAME_LAW, LrLaw
from ngptlab.design.placements import placement
from ngptlab.paper import paper_speedup
from ngptlab.settings import Params
from ngptlab.speedup.equivalence import CLAIMS
from ngptlab.speedup.estimate import Estimate
from ngptlab.speedup.factorial import ANGLE, effect_of
from ngptlab.speedup.factorial import CONDITIONING as CONDITIONING_SQUARE
from ngptlab.speedup.reading import ACCOUNTS as READ_ACCOUNTS
from ngptlab.speedup.reading import CONDITIONING, EFFECTIVE_LR, HOLDS, NORM, SHOWN_NOT, Account

ACCOUNTS = ("account true", "account false", "ngpt only", "partial", "null")
ANGLE_ACCOUNTS = ("angle account", "angle account, half")  # planted only where the grid runs the angle arms
# the arms each account makes as fast as ngpt (partial and the half angle account: at its square root)
FAST = {"account true": ("gpt-orth", "ngpt", "ngpt-angle"),
        "account false": ("gpt-rownorm", "ngpt", "ngpt-angle"),
        "ngpt only": ("ngpt", "ngpt-angle"), "partial": ("ngpt", "ngpt-angle"), "null": (),
        "angle account": ("gpt-angle", "ngpt"), "angle account, half": ("ngpt",)}
HALF = {"partial": ("gpt-orth",), "angle account, half": ("gpt-angle", "ngpt-angle")}
# (account, ngpt's speed-up, {arm: its learning-rate law}): the worlds of unequal learning-rate laws
NGPT_LAW = LrLaw(curvature=0.5, optimum=math.sqrt(2.0), drift=0.5)
SENSITIVITY = (("null", 1.0, (("ngpt", NGPT_LAW),)),
               ("account true", 1.5, (("gpt-orth", LrLaw(curvature=2.0, optimum=math.sqrt(0.5))),
                                      ("ngpt", NGPT_LAW))))
REPLICATED = (1.5, 4.0)  # what independent replications report at 1k and 4k context
SQUARE_ARMS = frozenset({*CONDITIONING_SQUARE.arms, *ANGLE.arms})
# the account each world makes true by construction (None: none of them); the partial worlds claim none
MADE_TRUE = {"account true": CONDITIONING.name, "account false": NORM.name,
             "angle account": EFFECTIVE_LR.name, "ngpt only": None, "null": None}
LINE_AXIS = {"account true": 0, "angle account": 1}  # the placement's axis (ln kappa, ln angle) of its line


@dataclass(frozen=True)
class Truth:
    """One planted world's law: its account and ngpt's speed-up."""

    account: str
    ngpt: float
    lr_laws: tuple[tuple[str, LrLaw], ...] = ()  # (arm, its learning-rate law); none: every arm gpt's

    @property
    def label(self) -> str:
        base = self.account if self.account == "null" else f"{self.account}, ngpt x{self.ngpt:g}"
        return base + "".join(f", {arm} {law.label}" for arm, law in self.lr_laws)

    def mechanism(self, arm: str) -> tuple[float, float] | None:
        """(ln kappa, ln angle per step) planted for the arm (None: none, as runs trained before they were
        logged): every arm at its place (design/placements.py)."""
        return placement(arm)

    def lr_law(self, arm: str) -> LrLaw:
        """The arm's learning-rate law (gpt's unless this truth plants another)."""
        return dict(self.lr_laws).get(arm, SAME_LAW)

    def speedup(self, arm: str) -> float:
        """The arm's planted token speed-up over gpt: an arm of the squares by its label (FAST, HALF), any
        other on the line of the mechanism the world's account credits (module docstring)."""
        if arm not in SQUARE_ARMS:
            return self._on_line(arm)
        if arm in HALF.get(self.account, ()):
            return math.sqrt(self.ngpt)
        return self.ngpt if arm in FAST[self.account] else 1.0

    def _on_line(self, arm: str) -> float:
        """S of an arm outside the squares: on the line through gpt and ngpt of the mechanism the account
        credits (conditioning: ln kappa; the angle account: ln angle), at gpt's speed in any other world."""
        axis = LINE_AXIS.get(self.account)
        if axis is None:
            return 1.0
        gpt, ngpt = placement("gpt")[axis], placement("ngpt")[axis]
        return math.exp(math.log(self.ngpt) * (placement(arm)[axis] - gpt) / (ngpt - gpt))

    def false_accounts(self) -> tuple[str, ...]:
        """The accounts this world makes false by construction (MADE_TRUE): a "consistent" reading of one is
        a false positive whatever the planted values' own reading; none in the partial worlds."""
        if self.account not in MADE_TRUE:
            return ()
        return tuple(a.name for a in READ_ACCOUNTS if a.name != MADE_TRUE[self.account])

    def log_speedups(self) -> dict[str, float]:
        """ln S of every arm of both squares."""
        return {arm: math.log(self.speedup(arm)) for arm in {**CONDITIONING_SQUARE.arms, **ANGLE.arms}}

    def effect(self, name: str) -> float:
        """The planted factorial effect (ln scale), by the factorial's own weights."""
        logs = self.log_speedups()
        return effect_of({arm: Estimate(logs[arm]) for arm in CONDITIONING_SQUARE.arms}, name).value

    def claim(self, name: str, margin: float) -> str | None:
        """The claim the planted effect makes on the symmetric rule, None on the margin's edge."""
        return _claim(self.effect(name), margin)

    def reading(self, margin: float, account: Account = CONDITIONING,
                arms: Collection[str] = tuple(CONDITIONING_SQUARE.arms)) -> str | None:
        """The reading a design should give of an account in a cell of these arms: its predictions read on
        the planted speed-ups (None where a planted ratio sits on the margin's edge)."""
        logs, tests = self.log_speedups(), []
        for a, b, predicted, required in account.predictions(arms):
            claim = _claim(logs[a] - logs[b], margin)
            if claim is None:
                return None
            tests.append({"status": HOLDS if claim == predicted else SHOWN_NOT, "required": required})
        return account.words(tests)


def _claim(value: float, margin: float) -> str | None:
    """The claim a planted log ratio makes on the symmetric rule, None on the margin's edge."""
    band = math.log(margin)
    if math.isclose(abs(value), band):
        return None
    return CLAIMS[0] if value > band else CLAIMS[1] if value < -band else CLAIMS[2]


def truths(ngpt_speedups: list[float], arms: Collection[str] = ()) -> list[Truth]:
    """Every planted truth: each account at each ngpt speed-up, the null once, then the SENSITIVITY worlds,
    then, where the grid's arms hold the angle square, the angle account in full and at half strength."""
    angle = [Truth(account, s) for account in ANGLE_ACCOUNTS for s in ngpt_speedups
             ] if set(ANGLE.arms) <= set(arms) else []
    return ([Truth(account, s) for account in ACCOUNTS[:-1] for s in ngpt_speedups] + [Truth("null", 1.0)]
            + [Truth(account, s, laws) for account, s, laws in SENSITIVITY] + angle)


def planted_speedups(params: Params) -> list[float]:
    """design.ngpt_speedups, or by default REPLICATED and the paper's claim at each context of the grid."""
    if params.design.ngpt_speedups is not None:
        return list(params.design.ngpt_speedups)
    claims = [float(entry["factor"]) for entry in map(paper_speedup, params.train.contexts) if entry]
    return sorted({*REPLICATED, *claims})
