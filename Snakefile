# ngptlab: does nGPT train faster, and is conditioning why? The whole experiment as one DAG.
#
#   prepare -> train (one job per run) -> condition (per run) -> speedup (per cell) -> report
#
# The experiment is params.yaml (see workflow/presets/ for bigger ones); each rule runs one
# `ngptlab <verb>` and lives in workflow/rules/<verb>.smk. dvc.yaml runs the same rules one by one.
#
#   snakemake --cores 2                    the default (smoke) grid on this machine
#   snakemake --cores 2 --profile slurm    the same on Slurm (profile: workflow/profiles/slurm)

from snakemake.utils import min_version

min_version("9.0")


configfile: "params.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/prepare.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/condition.smk"
include: "workflow/rules/speedup.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        rules.report.output,
    default_target: True
