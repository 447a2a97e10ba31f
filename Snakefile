# ngptlab: does nGPT train faster, and is conditioning why? The whole experiment as one DAG.
#
#   prepare -> train (one job per run) -> condition (per run) -> speedup (per cell) -> evaluate (per cell)
#   -> report; each job also takes its lineage key file (rules/lineage.smk), which decides when it is stale.
#   With train.schedule wsd, the budgets of a run's (arm, lr, seed) share a trunk: trunk jobs (one segment
#   per branch point, in rules/train.smk) come before the train jobs that branch from them.
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
include: "workflow/rules/lineage.smk"
include: "workflow/rules/prepare.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/condition.smk"
include: "workflow/rules/speedup.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/report.smk"


# Every file of the grid, not only the report: Snakemake reruns a job whose output exists only for a recorded
# reason (params, code, input set in .snakemake/metadata), and a fresh clone or a DVC checkout has no such
# records. Listed here, the files of runs added to the grid are missing targets, so `snakemake` plans
# exactly them, their cells and the report, with or without metadata (as `dvc status` does). The same holds
# for every job's lineage key file: Snakemake makes a missing intermediate file only for a job that must run,
# so a key file is a target too; and for the token shards, so that a shard deleted to repair it (every input
# is settled, workflow/rules/common.smk) is made again by prepare, which writes the same bytes.
rule all:
    input:
        rules.report.output,
        GRID.all_outputs(),  # the token shards, every run's, trunk segment's (WSD) and cell's files
        GRID.lineage_files(),  # a new key is a missing target: its job and the jobs after it run again
    default_target: True


# After a failed job (with --keep-going: once every job that could run has run) the report still renders
# from the results that exist, naming the missing runs and where their logs are, so a grid with one failed
# run still shows the others. Not inside a DVC stage (`--allowed-rules`), which builds one output only.
onerror:
    if "--allowed-rules" not in sys.argv:
        shell(f"mkdir -p logs/report && ngptlab report --params {PARAMS} > logs/report/report.log 2>&1 || true")
