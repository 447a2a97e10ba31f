"""Where each arm sits in the planted worlds' mechanisms: its ln kappa (layer 3-4 Q and K heads; rivals.kappa)
and ln angle per step (rivals.angular_rate), the placements every planted world draws its runs' kappa and
angle from (design/truths.py Truth.mechanism, design/mechanisms.py DoseWorld.mechanism):
  gpt          ln K, ln R                      K = 1000 (the paper's gpt 0.5B layer 4 Q and K: 1.4e3-1.5e3,
                                               Figs 11-12), R = 0.01 rad / step (illustrative)
  gpt-rownorm  ln K, ln R                      the norms fixed, not the conditioning, nor the angle (had it
                                               moved the angle, the label worlds' gpt-rownorm, at gpt's speed,
                                               would contradict their own angle account)
  gpt-orth     0, ln R                         kappa = 1 by construction
  ngpt         ln k, ln R + ln 2               k = 4 (nGPT 0.5B layers 3-4 Q and K: 2.9-4.5, Figs 11-12); it
                                               turns twice as fast as gpt (illustrative)
  gpt-angle    ln K + f (ln k - ln K), ngpt's angle   gpt turned at ngpt's angle; f the share of the way
                                               to ngpt's kappa that setting the angle also conditions it (0
                                               unless a world plants more)
  ngpt-angle   ln k, ln R                      ngpt turned at gpt's angle
  gpt-pc<L>    ln K / (1 + L), ln R            the PC layer at level L: level 0 is gpt, the limit gpt-orth
                                               (kappa = 1); the angle gpt's
  gpt-muon     ln K / 3 (well conditioned) or ln K (ill conditioned), ln R + ln sqrt 2
  any other    its architecture's (models/arms.yaml: gpt's or ngpt's)
"""

from __future__ import annotations

import math
import re

from ngptlab.models import arms as arm_table

GPT_KAPPA, NGPT_KAPPA, GPT_RATE = 1000.0, 4.0, 0.01
NGPT_TURN, MUON_TURN = 2.0, math.sqrt(2.0)  # angle per step over gpt's
MUON = "gpt-muon"
PC_ARM = re.compile(r"gpt-pc(\d+)$")  # the PC layer at level L
LN_K, LN_k, LN_R = math.log(GPT_KAPPA), math.log(NGPT_KAPPA), math.log(GPT_RATE)
GPT = (LN_K, LN_R)  # gpt's place


def pc_level(arm: str) -> int | None:
    """L of gpt-pc<L>, None for any other arm."""
    match = PC_ARM.match(arm)
    return int(match.group(1)) if match else None


def kin(arm: str) -> tuple[float, float]:
    """Where an arm with no place of its own sits: at its architecture's (models/arms.yaml), gpt's for an arm
    the table does not have."""
    architecture = arm_table.arm(arm).architecture if arm in arm_table.names() else "gpt"
    return (LN_k, LN_R + math.log(NGPT_TURN)) if architecture == "ngpt" else GPT


def placement(arm: str, conditioned: float = 0.0, muon_kappa: float = LN_K / 3) -> tuple[float, float]:
    """(ln kappa, ln angle per step) of the arm (module docstring); conditioned: f, gpt-angle's share of the
    way from gpt's ln kappa to ngpt's; muon_kappa: gpt-muon's ln kappa."""
    level = pc_level(arm)
    if level is not None:
        return LN_K / (1 + level), LN_R
    return {"gpt": GPT,
            "gpt-rownorm": GPT,
            "gpt-orth": (0.0, LN_R),
            "ngpt": (LN_k, LN_R + math.log(NGPT_TURN)),
            "gpt-angle": (LN_K + conditioned * (LN_k - LN_K), LN_R + math.log(NGPT_TURN)),
            "ngpt-angle": (LN_k, LN_R),
            MUON: (muon_kappa, LN_R + math.log(MUON_TURN))}.get(arm) or kin(arm)
