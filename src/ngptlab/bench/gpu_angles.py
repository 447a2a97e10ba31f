"""`bench gpu`, part angles: the angle arms' realised angle per step against the angle they are set to turn.

gpt-angle and ngpt-angle (models/gpt_angle.py, models/ngpt_angle.py) turn each of their matrix kinds by a
set angle per optimizer step (the rotational step, models/rotational.py); the angle each matrix actually
turned is measured around the step (observe/step_angle.py, the run's own record of it). Under bf16
autocast the master weights stay fp32, so the realised angle must be the target: ngpt-angle's
renormalisation of rows moves it slightly, a bf16-rounded master would lose small turns altogether.
Eager, at first-light's shape, on a fixed random batch.
"""

from __future__ import annotations

import torch

from ngptlab.bench.gpu_sizes import ANGLE_ARMS, Sizes


def angles_check(sizes: Sizes, device: torch.device) -> dict:
    """Per angle arm and turned kind: the mean angle per step over the part's steps, and its relative
    error against the target."""
    from ngptlab.bench.step import ROTATIONAL_ANGLE, STEP_ANGLE, _Arm

    out: dict = {"target_rad": ROTATIONAL_ANGLE, "steps": sizes.angle_steps, "scale": sizes.train_scale,
                 "context": sizes.train_context, "bf16": device.type == "cuda", "arms": {}}
    for arm in ANGLE_ARMS:
        runner = _Arm(arm + STEP_ANGLE, sizes.train_shape, sizes.vocab, sizes.train_context,
                      sizes.train_sequences, device, False, bf16=device.type == "cuda")
        for _ in range(sizes.angle_steps):
            runner.step()
        realised = runner.angles.close()["step_angle"]
        turned = {kind: realised[kind] for kind in runner.recipe.rotation if kind in realised}
        out["arms"][arm] = {"realised_rad": turned,
                            "max_relative_error": max(abs(a / ROTATIONAL_ANGLE - 1) for a in turned.values())}
        del runner
    return out
