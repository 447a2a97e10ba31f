# prepare: text source -> GPT-2 BPE token shards (src/ngptlab/prepare). One job per params file.


rule prepare:
    input:
        lineage=lineage_input("prepare", SOURCE),
    output:
        train=TOKENS[0],
        val=TOKENS[1],
        meta=TOKENS[2],
    log:
        f"logs/prepare/{SOURCE}.log",
    params:
        file=PARAMS,
    threads: config["prepare"]["workers"]
    resources:
        runtime=JOBS.stage_runtime("prepare"),
        mem_mb=4000,
    conda:
        CONDA_ENV
    shell:
        "ngptlab prepare --params {params.file} --no-progress > {log} 2>&1"
