"""One optimizer that steps an arm's flagged matrices with torch's Muon and every other parameter with AdamW.

Muon (Jordan et al. 2024; torch.optim.Muon, torch/optim/_muon.py, `_single_tensor_muon`) on a matrix W
[m, n] with gradient G_t, momentum mu (0.95), Nesterov, weight decay lambda and learning rate lr:

    B_t  = mu B_(t-1) + (1 - mu) G_t                  the momentum buffer (torch: buf.lerp_(grad, 1 - mu))
    N_t  = (1 - mu) G_t + mu B_t                      Nesterov (torch: grad.lerp(buf, mu))
    O_t  = NS_5(N_t)                                  5 quintic Newton-Schulz iterations, coefficients
                                                      (3.4445, -4.775, 2.0315), in bf16 on N_t / ||N_t||_F:
                                                      ~ U S' V^T of N_t = U S V^T, S' within ~(0.5, 1.5)
    W   <- (1 - lr lambda) W - lr 0.2 sqrt(max(m, n)) O_t

The factor 0.2 sqrt(max(m, n)) is torch's adjust_lr_fn="match_rms_adamw" (torch's `_adjust_lr`: lr x 0.2
x sqrt(max(A, B)), A, B the first two dimensions), the scaling of Liu et al. 2025 ("Muon is scalable for
LLM training", arXiv 2502.16982, Section 2.2): an orthogonal [m, n] matrix has RMS 1 / sqrt(max(m, n)), so
the update's RMS is ~0.2 lr, the RMS of AdamW's typical update (0.2-0.4 in their measurements), and one
learning rate means about the same step size for the Muon and the AdamW groups. The decay multiplies by
1 - lr lambda with the unscaled lr, exactly AdamW's decoupled decay.

MuonAdamW is torch's AdamW for the groups without the "muon" flag and a torch.optim.Muon, sharing the
flagged group dicts and the per-parameter state, for those with it: the trainer's schedule (group["lr"] =
group["base_lr"] x factor, on optimizer.param_groups) reaches both, and the state dict is one optimizer's,
each Muon matrix's state its momentum buffer B_t ("momentum_buffer", the parameter's shape and dtype),
saved and restored as AdamW's moments are (train/state.py). Muon's settings (MUON_DEFAULTS: torch's own
defaults, with match_rms_adamw) are written into each flagged group that does not set them, before AdamW
fills in its own (its eps, 1e-8, would otherwise stand in for Muon's 1e-7). Under DDP each rank steps the
same all-reduced gradient through the same arithmetic: the ranks' weights stay equal. No step reads a
device value on the host.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

import torch

from ngptlab.models.param_groups import gradients_held

ADJUST_LR = "match_rms_adamw"  # torch's name for Liu et al.'s 0.2 sqrt(max(m, n)) (the module docstring)
# torch.optim.Muon's own defaults (momentum, nesterov, ns_coefficients, eps, ns_steps), lr and weight decay
# left to the group (the recipe's, as every group's), the learning-rate scaling Liu et al.'s
MUON_DEFAULTS: dict[str, Any] = {
    **{name: parameter.default for name, parameter in inspect.signature(torch.optim.Muon).parameters.items()
       if name not in ("params", "lr", "weight_decay")},
    "adjust_lr_fn": ADJUST_LR,
}


class MuonAdamW(torch.optim.AdamW):
    """AdamW over the groups without the "muon" flag, torch's Muon over those with it (the module
    docstring); kwargs: AdamW's."""

    def __init__(self, params: Iterable[dict], **adamw: Any) -> None:
        groups = [{**MUON_DEFAULTS, **group} if group.get("muon") else group for group in params]
        super().__init__(groups, **adamw)
        muon = [group for group in self.param_groups if group.get("muon")]
        self._muon = torch.optim.Muon(muon) if muon else None  # checks every matrix is 2-D
        self._share()

    def _share(self) -> None:
        """The inner Muon steps this optimizer's flagged group dicts and keeps its state in this one's (after
        load_state_dict, which replaces both, too)."""
        if self._muon is not None:
            self._muon.param_groups = [group for group in self.param_groups if group.get("muon")]
            self._muon.state = self.state

    @torch.no_grad()
    def step(self, closure: None = None) -> None:
        """One step of every group; no closure (the trainer computes its gradients before)."""
        if closure is not None:
            raise ValueError("MuonAdamW takes no closure")
        if self._muon is None:
            super().step()
            return
        with gradients_held(p for group in self._muon.param_groups for p in group["params"]):
            super().step()  # AdamW's groups: the Muon matrices are Muon's
        self._muon.step()

    def __setstate__(self, state: dict) -> None:
        """AdamW's (load_state_dict's last step, which replaces the groups and the state), the Muon
        matrices' state set aside meanwhile (AdamW expects a step count in each); then Muon shares them."""
        muon = {id(p) for group in state["param_groups"] if group.get("muon") for p in group["params"]}
        held = {p: state["state"].pop(p) for p in list(state["state"]) if id(p) in muon}
        super().__setstate__(state)
        self.state.update(held)
        self._share()
