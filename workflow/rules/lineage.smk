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
    params:
        record=per_job(lineage_record),
        retired=per_job(retired_outputs),
    localrule: True
    conda:
        CONDA_ENV
    # A shell command, not a `run:` block, which Snakemake executes in a new Python process that parses the
    # whole workflow again (about 10 s a job here, for a file of a few lines).
    shell:
        "rm -rf {params.retired:q}"
        " && find $(dirname {output:q}) -mindepth 1 -maxdepth 1 ! -name {wildcards.key} -delete"
        " && printf '%s\\n' {params.record:q} > {output:q}"
        " && echo '{wildcards.stage} {wildcards.job}: key {wildcards.key}; outputs of another key removed'"
        " > {log:q}"
