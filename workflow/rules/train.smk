# train: one run of the grid (src/ngptlab/train). Exit 0 also for a diverged run (its summary says so);
# exit 75 after SIGTERM (a Slurm time limit or preemption) with a checkpoint under runs/<run>/state/, which
# is not a declared output, so Snakemake keeps it and a retry resumes the run.
#
# A scale with processes > 1 launches DDP through torchrun; the Slurm `tasks` resource is deliberately not
# set (for GPU jobs the plugin turns it into --ntasks-per-gpu): Slurm grants one task with the GPUs and
# CPUs, and torchrun starts the processes inside it. The run name is positional because torchrun's own
# parser would take a `--run` anywhere on its command line for an abbreviation of its --run-path.


rule train:
    input:
        settled(TOKENS),
    output:
        **train_outputs("{run}"),
    log:
        "logs/train/{run}.log",
    params:
        file=PARAMS,
        settings=section("train", TRAIN_SETTINGS),
    threads: lambda wildcards: scale_resources(wildcards.run)["processes"]
    resources:
        processes=lambda wildcards: scale_resources(wildcards.run)["processes"],
        gpu=lambda wildcards: scale_resources(wildcards.run)["gpus"],
        mem_mb=lambda wildcards: scale_resources(wildcards.run)["mem_mb"],
        runtime=lambda wildcards: train_runtime(wildcards.run),
    conda:
        CONDA_ENV
    shell:
        "if [ {resources.processes} -gt 1 ]; then"
        "  launch='torchrun --standalone --nproc_per_node {resources.processes} -m ngptlab.cli';"
        " else"
        "  launch=ngptlab; export OMP_NUM_THREADS={threads};"
        " fi;"
        " $launch train --params {params.file} --no-progress {wildcards.run} > {log} 2>&1"
