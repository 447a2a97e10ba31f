# speedup: the token speed-up of every arm in one (scale, context) cell (src/ngptlab/speedup). Needs every
# run of the cell: the speed-up of a partial grid would silently change.


rule speedup:
    input:
        summaries=cell_files("summary"),
        metrics=cell_files("metrics"),
        lineage=cell_lineage_input("speedup"),
    output:
        layout.speedup_file("{cell}"),
    log:
        "logs/speedup/{cell}.log",
    priority: 2  # with evaluate, as soon as the cell's runs are trained, beside the condition jobs
    params:
        file=PARAMS,
    resources:
        runtime=JOBS.stage_runtime("speedup"),
    conda:
        CONDA_ENV
    shell:
        "ngptlab speedup --params {params.file} {wildcards.cell} > {log} 2>&1"
