# condition: the conditioning of one run's final weights (src/ngptlab/condition).


rule condition:
    input:
        model=run_files("model"),
        config=run_files("config"),
        summary=run_files("summary"),
    output:
        **condition_outputs("{run}"),
    log:
        "logs/condition/{run}.log",
    params:
        file=PARAMS,
        settings=section("condition"),
    resources:
        gpu=1 if config["condition"]["device"] == "cuda" else 0,
        mem_mb=per_job(lambda wildcards: process_memory(wildcards.run)),
    conda:
        CONDA_ENV
    shell:
        "OMP_NUM_THREADS={threads} ngptlab condition --params {params.file} --run {wildcards.run} --no-progress"
        " > {log} 2>&1"
