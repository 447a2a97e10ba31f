# condition: the conditioning of one run's final weights (src/ngptlab/condition).


rule condition:
    input:
        unpack(run_files("model", "config", "summary")),
        lineage=run_lineage_input("condition", "{run}"),
    output:
        **condition_outputs("{run}"),
    log:
        "logs/condition/{run}.log",
    params:
        file=PARAMS,
    resources:
        runtime=stage_runtime("condition"),
        gpu=1 if config["condition"]["device"] == "cuda" else 0,
        mem_mb=condition_memory(),
    conda:
        CONDA_ENV
    shell:
        "OMP_NUM_THREADS={threads} ngptlab condition --params {params.file} --run {wildcards.run} --no-progress"
        " > {log} 2>&1"
