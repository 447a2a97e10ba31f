# lineage: a job's key file, results/lineage/<stage>/<job>/<key> (ngptlab/plan/lineage.py). Every job of the
# other rules takes its key file as an input, so a new key (a changed setting, code or upstream key) is a
# missing file and the job runs again, in Snakemake as in DVC, which declares the same key as a param.
#
# The file records what the job is made from. Writing it retires the job's old key file and removes the
# job's outputs, which were made from something else and are about to be remade: Snakemake would delete
# them before the job anyway, and an interruption between the two jobs must not leave the old outputs
# standing beside the new key (DVC keeps every committed version in its cache).

rule lineage:
    output:
        layout.lineage_file("{stage}", "{job}", "{key}"),
    log:
        "logs/lineage/{stage}/{job}/{key}.log",
    wildcard_constraints:
        stage="|".join(STAGES),
        job=".+",
        key="[0-9a-f]{16}",
    localrule: True
    run:
        record_lineage(wildcards.stage, wildcards.job, wildcards.key, output[0], log[0])
