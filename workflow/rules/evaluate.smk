# evaluate: zero-shot accuracy of a cell's selected runs through lm-eval (src/ngptlab/evaluate). One job per
# cell: which runs are evaluated (each arm's best learning rate) is known only from the cell's speed-up, so
# the job depends on every checkpoint of the cell and picks its runs at run time; the DAG stays static.
# A cell longer than train.max_job_minutes stops by its own clock (exit 75) with each finished run's
# accuracies kept, and the rule's next attempt continues.


rule evaluate:
    input:
        speedup=settled(layout.speedup_file("{cell}")),
        models=cell_files("model"),  # every checkpoint: the job picks the speed-up's best runs among them
        val=settled(TOKENS[1]),
        tokens_meta=settled(TOKENS[2]),
        lineage=cell_lineage_input("evaluate"),
    output:
        layout.evaluate_file("{cell}"),
    log:
        "logs/evaluate/{cell}.log",
    priority: 2  # a long job on one core: started while condition jobs remain, not last and alone
    params:
        file=PARAMS,
    retries: JOBS.evaluate_retries()  # a long evaluation continues over jobs (train.max_job_minutes)
    resources:
        runtime=of(JOBS.evaluate_runtime, "cell"),
        gpu=of(JOBS.evaluate_gpus, "cell"),
        mem_mb=of(JOBS.evaluate_memory, "cell"),
    conda:
        CONDA_ENV
    shell:
        "NGPTLAB_JOB_STARTED=$(date +%s) OMP_NUM_THREADS={threads} ngptlab evaluate --params {params.file}"
        " --no-progress {wildcards.cell} > {log} 2>&1"
