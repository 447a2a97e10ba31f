"""The rotational step: AdamW whose chosen matrices turn on the sphere of their norm by a set angle per step.

With the norm of a weight fixed, an optimizer step only turns it, and the angle per step is the effective
learning rate (Kosson et al. 2023, "Rotational equilibrium", arXiv 2305.17212: AdamW with weight decay
lambda settles at an angle per step of sqrt(2 eta lambda (1 - beta1) / (1 + beta1)); their rotational
variants fix each weight's norm, remove the radial part of the optimizer's update, normalise it by a running
RMS and step by a target angle). Hyperball (Wen et al., arXiv 2606.16899) and magnitude-direction decoupling
(Hagele, Kosson et al., arXiv 2606.25971) fix the norm and control the update in the same spirit. Here a
matrix W~ of Frobenius norm r (the norm it has when first stepped; the scale the forward pass applies lives
in gains held elsewhere and stepped by plain AdamW) takes, at step t:

    m_t, v_t      Adam's moments of its gradient (the recipe's beta1, beta2), bias-corrected: m^_t, v^_t
    a_t           m^_t / (sqrt(v^_t) + eps)                     Adam's update, without weight decay
    u_t           a_t - (<a_t, W~>_F / ||W~||_F^2) W~          its tangent part: the radial part removed
    s_t           beta s_(t-1) + (1 - beta) ||u_t||_F^2,  s^_t = s_t / (1 - beta^t)   (rotation_beta)
    phi_t         theta_t ||u_t||_F / sqrt(s^_t)               the angle of this step
    W~            <- cos(phi_t) W~ - sin(phi_t) ||W~||_F u_t / ||u_t||_F, then rescaled to norm r

a turn along the great circle through W~ and -u_t, the way Adam's step points. With beta = 0 (no running
average) ||u_t|| / sqrt(s^_t) = 1: every step turns by exactly theta_t; with beta > 0 a step turns by
theta_t times its tangent update's size relative to the recent RMS, theta_t on average (Kosson et al.'s
default 0.9) once Adam's update has settled: it shrinks over its first ~1 / (1 - beta2) steps (the first
is +-1 in every entry) and the running mean follows late, so those steps turn by less (0.6-0.9 theta_t on
random tokens; tests/test_rotational.py). theta_t = theta_peak x the schedule's factor at step t: a
rotational group's "lr" is its angle in radians, so the trainer's schedule (group lr = base lr x factor)
scales it as it scales any learning rate.
The last rescaling only removes float32 rounding (the turn keeps the norm exactly in real arithmetic).

A matrix stored below float32 (train.weight_dtype bf16) is turned as a float32 master copy W~_32 kept in the
optimizer's state, and the parameter gets its rounding, W~ = bf16(W~_32): written back directly, a turn
smaller than half a bf16 ulp (~2^-9 relative) would round away, so that a 1024 x 1024 matrix realised 0.26
of a 1e-4 rad step (0.44 at 3e-4, 0.78 at 1e-3); turning W~_32 instead, step after step, accumulates the
turns exactly and the parameter follows them to its rounding. Where a step outside the optimizer wrote the
parameter since (ngpt-angle's renormalisation, Section 2.6), the entries it changed no longer are the
rounding of W~_32: those take the parameter's value, W~_32 <- where(bf16(W~_32) = W~, W~_32, W~), and the
others keep their float32 digits.

An arm declares its rotational matrices on its Recipe (models/gpt.py): `rotation`, a mapping from matrix
kind (MATRIX_KINDS, as model.matrices() and the observers name them) to its peak angle per step, and
`rotation_beta`; or overrides `rotation_angles(lr)` to tie the angles to the run's learning rate (e.g.
equilibrium_angle). param_groups moves those matrices (each Matrix's `weight`, W~ where the arm multiplies
it) out of the recipe's groups into one group per kind, flagged rotational, without weight decay; adamw
builds a RotationalAdamW for them, plain AdamW (as before) where no group is rotational. Every other
parameter gets exactly AdamW's update. The optimizer's state is AdamW's per-parameter state plus two float32
scalars per rotational matrix (s_t, r) and, for a matrix stored below float32, its float32 master copy
("master"; none for float32 weights, whose state and checkpoints are those of before), saved and restored
like AdamW's (train/state.py), and no step reads a device value on the host.

A step turns a group's matrices together (those of one step count): their whole-matrix arithmetic in
torch._foreach_* ops, their scalars (dot products, angles, norms) stacked into one vector per quantity, some
ten kernels per matrix instead of ~35 on a GPU; on a CPU the bits are those of each matrix stepped alone.
"""

from __future__ import annotations

import math
from typing import Protocol

import torch
from torch import Tensor, nn

from ngptlab.errors import ParamsError
from ngptlab.models.layers import MATRIX_KINDS
from ngptlab.models.param_groups import gradients_held, moved_to

# kept float32 whatever the parameter's dtype (bf16 weights); "master" exists only below float32
FLOAT32_STATE = ("tangent_sq", "norm", "master")
TINY = 1e-30  # a zero tangent update (no gradient) turns by 0, not by 0 / 0


def equilibrium_angle(lr: float, weight_decay: float, beta1: float) -> float:
    """AdamW's equilibrium angle per step, sqrt(2 eta lambda (1 - beta1) / (1 + beta1)) (Kosson et al.)."""
    return math.sqrt(2 * lr * weight_decay * (1 - beta1) / (1 + beta1))


class Rotating(Protocol):
    """What param_groups reads of an arm's recipe (models/gpt.py's Recipe, which builds its optimizer with
    `adamw` below, so this module does not import it back)."""

    rotation_beta: float

    def rotation_angles(self, lr: float) -> dict[str, float]: ...

    def param_groups(self, model: nn.Module, lr: float) -> list[dict]: ...


def param_groups(recipe: Rotating, model: nn.Module, lr: float) -> list[dict]:
    """The recipe's AdamW groups at learning rate `lr`, its rotational matrices moved out of them into one
    group per kind (in MATRIX_KINDS order), whose "lr" is the kind's peak angle; the recipe's groups
    unchanged where it declares none."""
    angles = recipe.rotation_angles(lr)
    groups = recipe.param_groups(model, lr)
    if not angles:
        return groups
    unknown = sorted(set(angles) - set(MATRIX_KINDS))
    if unknown:
        raise ParamsError(f"rotation: unknown matrix kind(s) {', '.join(unknown)}; "
                          f"kinds: {', '.join(MATRIX_KINDS)}")
    chosen = {kind: [model.get_submodule(info.name).weight for info in model.matrices() if info.kind == kind]
              for kind in MATRIX_KINDS if kind in angles}
    # "fused": False keeps the step count on the host through load_state_dict (torch moves a fused one)
    return moved_to(groups, [{"name": f"rotational {kind}", "params": params, "weight_decay": 0.0,
                              "lr": angles[kind], "rotational": True, "rotation_beta": recipe.rotation_beta,
                              "fused": False} for kind, params in chosen.items()])


def adamw(groups: list[dict], **kwargs) -> torch.optim.AdamW:
    """RotationalAdamW over `groups` where one is rotational, else torch's AdamW; kwargs: AdamW's."""
    if any(group.get("rotational") for group in groups):
        return RotationalAdamW(groups, **kwargs)
    return torch.optim.AdamW(groups, **kwargs)


class RotationalAdamW(torch.optim.AdamW):
    """AdamW for the groups without the "rotational" flag, the rotational step (the module docstring) for
    those with it. The state dict is AdamW's, so checkpoints save and restore it as they do AdamW's."""

    @torch.no_grad()
    def step(self, closure: None = None) -> None:
        """One step of every group; no closure (the trainer computes its gradients before)."""
        if closure is not None:
            raise ValueError("RotationalAdamW takes no closure")
        rotational = [group for group in self.param_groups if group.get("rotational")]
        with gradients_held(p for group in rotational for p in group["params"]):
            super().step()  # AdamW's groups: the rotational matrices are stepped below
        for group in rotational:
            stepped = [p for p in group["params"] if p.grad is not None]
            for p in stepped:
                self._init_state(p)
            buckets: dict[float, list[Tensor]] = {}  # by step count: each bucket's bias corrections alike
            for p in stepped:
                buckets.setdefault(float(self.state[p]["step"]) + 1, []).append(p)
            for t, params in buckets.items():
                self._turn(params, group, t)

    def _init_state(self, p: Tensor) -> None:
        state = self.state[p]
        if state:
            return
        # the step count on the host, as AdamW's (not fused, not capturable): no device read per step
        state["step"] = torch.tensor(0.0, dtype=torch.float32)
        state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        state["tangent_sq"] = torch.zeros((), dtype=torch.float32, device=p.device)
        state["norm"] = torch.linalg.vector_norm(p.float())  # r, kept from here on
        if p.dtype != torch.float32:  # W~_32: bf16 widens exactly, so it starts as the parameter
            state["master"] = p.float()

    def _turn(self, params: list[Tensor], group: dict, t: float) -> None:
        """Step t of the matrices `params` of one group: the whole-matrix arithmetic batched over them
        (torch._foreach_*), their scalars stacked into one vector per quantity. Every value is computed by
        the operation, in the order, of a matrix stepped alone: on a CPU a foreach op is the per-tensor op
        in a loop and the scalars' ops are elementwise, so the bits are the same
        (tests/test_rotational.py, against a per-matrix step, 40 matrices a kind, fp32 and bf16)."""
        states = [self.state[p] for p in params]
        beta1, beta2 = group["betas"]
        beta = group["rotation_beta"]
        for state in states:
            state["step"] += 1
        grads = [p.grad for p in params]
        exp_avg, exp_avg_sq = [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states]
        torch._foreach_lerp_(exp_avg, grads, 1 - beta1)
        if all(v.dtype == torch.float32 for v in exp_avg_sq):
            torch._foreach_mul_(exp_avg_sq, beta2)
        else:  # torch's CPU foreach rounds bf16 x scalar otherwise than mul_ does: one at a time
            for v in exp_avg_sq:
                v.mul_(beta2)
        torch._foreach_addcmul_(exp_avg_sq, grads, grads, value=1 - beta2)
        denominator = torch._foreach_div([v.float() for v in exp_avg_sq], 1 - beta2**t)
        torch._foreach_sqrt_(denominator)
        torch._foreach_add_(denominator, group["eps"])
        update = torch._foreach_div([m.float() for m in exp_avg], 1 - beta1**t)
        torch._foreach_div_(update, denominator)
        update = [u.flatten() for u in update]
        masters = [s.get("master") for s in states]
        # entries written outside the optimizer since its last step follow them; a new tensor: the sums
        # below then round alike whatever the alignment of a checkpoint's copy
        masters = [m if m is None else torch.where(m.to(p.dtype) == p, m, p.float())
                   for m, p in zip(masters, params, strict=True)]
        w = [(p.float() if m is None else m).flatten() for m, p in zip(masters, params, strict=True)]
        ww = torch.stack([torch.dot(x, x) for x in w])
        along_w = -torch.stack([torch.dot(u, x) for u, x in zip(update, w, strict=True)]) / ww
        torch._foreach_addcmul_(update, w, along_w.unbind())
        tangent = update
        size_sq = torch.stack([torch.dot(u, u) for u in tangent])
        tangent_sq = torch.stack([s["tangent_sq"] for s in states]).mul_(beta).add_((1 - beta) * size_sq)
        torch._foreach_copy_([s["tangent_sq"] for s in states], tangent_sq.unbind())
        mean_sq = tangent_sq / (1 - beta**t)
        phi = group["lr"] * (size_sq / mean_sq.clamp(min=TINY)).sqrt()
        along = -torch.sin(phi) * ww.sqrt() / size_sq.sqrt().clamp(min=TINY)  # sin(phi) ||W~|| / ||u||
        turned = torch._foreach_mul(w, torch.cos(phi).unbind())
        torch._foreach_addcmul_(turned, tangent, along.unbind())
        norms = torch.stack([s["norm"] for s in states]) / torch.stack(torch._foreach_norm(turned))
        torch._foreach_mul_(turned, norms.unbind())
        for p, state, m, x in zip(params, states, masters, turned, strict=True):
            if m is not None:  # W~_32 turned, W~ = bf16(W~_32) (round to nearest, as the check above)
                state["master"] = x.view_as(p)
        torch._foreach_copy_(params, [x.view_as(p) for p, x in zip(params, turned, strict=True)])

    def load_state_dict(self, state_dict: dict) -> None:
        """AdamW's, but FLOAT32_STATE (with the master copies) stays float32 where the parameters are bf16
        (torch casts every per-parameter tensor but the step count to the parameter's dtype)."""
        kept = {index: {key: per_param[key] for key in FLOAT32_STATE if key in per_param}
                for index, per_param in state_dict["state"].items()}
        super().load_state_dict(state_dict)
        params = [p for group in self.param_groups for p in group["params"]]
        for index, values in kept.items():
            p = params[index]
            for key, value in values.items():
                self.state[p][key] = value.to(device=p.device, dtype=torch.float32)
