# condition: the conditioning of one run's final weights (src/ngptlab/condition).


rule condition:
    input:
        unpack(run_files("model", "config", "summary")),
        lineage=group_lineage_input("condition", "{run}"),
    output:
        **layout.conditioning_files("{run}"),
    log:
        "logs/condition/{run}.log",
    params:
        file=PARAMS,
    resources:
        runtime=of(JOBS.condition_runtime, "run"),
        gpu=JOBS.condition_gpus(),
        mem_mb=of(JOBS.condition_memory(), "run"),
    conda:
        CONDA_ENV
    shell:
        "OMP_NUM_THREADS={threads} ngptlab condition --params {params.file} --no-progress {wildcards.run}"
        " > {log} 2>&1"
