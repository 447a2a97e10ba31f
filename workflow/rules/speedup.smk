# speedup: the token speed-up of every arm in one (scale, context) cell (src/ngptlab/speedup). Needs every
# run of the cell: the speed-up of a partial grid would silently change.


rule speedup:
    input:
        summaries=cell_files("summary"),
        metrics=cell_files("metrics"),
    output:
        speedup_output("{cell}"),
    log:
        "logs/speedup/{cell}.log",
    params:
        file=PARAMS,
        settings=section("speedup"),
        grid=section("train", CELL_GRID_KEYS),
    conda:
        CONDA_ENV
    shell:
        "ngptlab speedup --params {params.file} --cell {wildcards.cell} > {log} 2>&1"
