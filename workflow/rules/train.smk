# train: one run of the grid (src/ngptlab/train). Exit 0 also for a diverged run (its summary says so);
# exit 75 with a checkpoint under runs/<cell>/<run>/state/ when the job's own clock (train.max_job_minutes)
# or a SIGTERM (Slurm's early signal, a preemption, a requeue, scancel) stopped it. The state is not a
# declared output, so Snakemake keeps it, and the next attempt (the rule's retries: as many as the plan's
# longest run needs, ngptlab/workflow/jobs.py) resumes the run.
#
# `trap : TERM` keeps the job's shell alive when Slurm signals every process of the job: without it the
# shell dies at once, the jobstep's Snakemake reports the job failed and leaves, and the job step ends,
# killing the run halfway through its checkpoint. The trap is the shell's own; the run (exec'd by launch.sh)
# has Python's handler (train/stop.py). Snakemake removes a job's log before each attempt: the run's log is
# its last job's; the Slurm profile keeps every job's sbatch log, and the summary lists where it resumed.
#
# How a run is launched is workflow/scripts/launch.sh, the one place for it: one process, torchrun on one
# node when the scale has processes > 1, or over nodes > 1 one torchrun agent per Slurm node (srun) meeting
# at a c10d rendezvous on the first node; train.max_restarts is torchrun's restart limit. The run name is
# positional, as in every verb (and torchrun's own parser would take a `--run` for its --run-path).
#
# What the Slurm plugin asks for (ngptlab/workflow/jobs.py): --nodes, one task per node with `threads` CPUs
# and the node's GPUs; torchrun starts the processes inside it.

rule train:
    input:
        unpack(of(GRID.branch_from, "run", inputs=True)),  # a WSD run: after its trunk segment
        tokens=settled(TOKENS),
        lineage=group_lineage_input("train", "{cell}/{run}"),
    output:
        **GRID.train_outputs("{run}", cell="{cell}"),
    log:
        layout.train_log("{cell}", "{run}"),
    priority: 1  # before the condition jobs, so a cell's speedup and evaluate can start while they run
    params:
        file=PARAMS,
        lead=train_resource("signal_lead_s"),
    threads: train_resource("processes")
    retries: JOBS.train_retries()
    resources:
        nodes=train_resource("nodes"),
        tasks=train_resource("tasks"),
        processes=train_resource("processes"),
        gpu=train_resource("gpu"),
        gres=train_resource("gres"),
        mem_mb=train_resource("mem_mb"),
        runtime=train_resource("runtime"),
        slurm_extra=train_resource("slurm_extra"),  # --signal=TERM@<signal_lead_s>
        max_restarts=JOBS.max_restarts(),
    conda:
        CONDA_ENV
    shell:
        "trap : TERM; NGPTLAB_SHUTDOWN_TIMEOUT={params.lead} bash workflow/scripts/launch.sh {resources.nodes}"
        " {resources.processes} {resources.max_restarts} train --params {params.file} --no-progress"
        " {wildcards.run} > {log} 2>&1"


# trunk: one segment of a WSD trunk (src/ngptlab/train/trunk.py), from the branch point before it to its own,
# where it keeps the trunk's state for the branches (the WSD runs of the train rule). Launched as train is;
# its record is the job's output, and its kept states under runs/trunks/ are not declared: the train job
# that starts from one and the next segment delete it when no branch needs it.
rule trunk:
    input:
        unpack(of(GRID.segment_after, "cell", "trunk", "span", inputs=True)),
        tokens=settled(TOKENS),
        lineage=group_lineage_input("trunk", "{cell}/{trunk}/{span}"),
    output:
        record=layout.trunk_record("{cell}", "{trunk}", "{span}"),
    log:
        layout.trunk_log("{cell}", "{trunk}", "{span}"),
    wildcard_constraints:
        trunk="[^/]+-trunk",
        span="from[0-9]+-to[0-9]+",
    priority: 2  # before the branches and runs that wait for it
    params:
        file=PARAMS,
        lead=trunk_resource("signal_lead_s"),
    threads: train_resource("processes")
    retries: JOBS.trunk_retries()
    resources:
        nodes=trunk_resource("nodes"),
        tasks=trunk_resource("tasks"),
        processes=trunk_resource("processes"),
        gpu=trunk_resource("gpu"),
        gres=trunk_resource("gres"),
        mem_mb=trunk_resource("mem_mb"),
        runtime=trunk_resource("runtime"),
        slurm_extra=trunk_resource("slurm_extra"),  # --signal=TERM@<signal_lead_s>
        max_restarts=JOBS.max_restarts(),
    conda:
        CONDA_ENV
    shell:
        "trap : TERM; NGPTLAB_SHUTDOWN_TIMEOUT={params.lead} bash workflow/scripts/launch.sh {resources.nodes}"
        " {resources.processes} {resources.max_restarts} train --params {params.file} --no-progress"
        " {wildcards.trunk}-{wildcards.span} > {log} 2>&1"
