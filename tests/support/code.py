"""Code fingerprints as results/plan.json holds them (ngptlab.plan.closure.stage_fingerprints), made up for
lineage tests that vary settings, not code: a run stage's per arm (the same for every arm), one per other
stage. Not a test module."""

from __future__ import annotations

from collections import defaultdict

from ngptlab.settings.roles import PER_RUN, STAGES


def made_up_code(**edited: str) -> dict:
    """{stage: fingerprint}, a run stage's per arm; `edited` replaces a stage's (every arm's)."""
    def of(stage: str) -> str:
        return edited.get(stage, f"{stage}-code")
    return {stage: defaultdict(lambda stage=stage: of(stage)) if stage in PER_RUN else of(stage)
            for stage in STAGES}
