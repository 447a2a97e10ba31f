#!/usr/bin/env bash
# Snakemake runs this once inside the freshly created conda environment, from the working directory (the
# repository root): install the pinned dependencies, then this project itself.
set -euo pipefail
pip install -r requirements.lock
pip install --no-deps -e .
