# report: everything -> reports/ (src/ngptlab/report). Reads results/ and data/tokens/*/meta.json only, never
# a checkpoint, so a fresh clone re-renders it from the committed results and the pulled spectra tables
# without downloading the runs. Its inputs are dvc.yaml's report deps file for file where DVC caches them
# (each run's conditioning files), so `dvc repro --pull` fetches what this rule takes.
#
# It also reads results/timing/ (measured speed, different for every training of a run), which is no input
# here nor in dvc.yaml: a retrained run's new timings make no job stale in either tool, and the report
# records the digest of the timing files it read (its compute table and provenance.json).
#
# After a `--keep-going` run in which some runs failed this rule cannot run (its inputs are incomplete): the
# Snakefile's `onerror` handler renders what exists instead, naming the failed runs and their logs (the same
# as `ngptlab report --params params.yaml` by hand).


rule report:
    input:
        tokens_meta=settled(TOKENS[2]),
        summaries=settled([GRID.train_outputs(run)["summary"] for run in RUNS]),
        metrics=settled([GRID.train_outputs(run)["metrics"] for run in RUNS]),
        conditioning=settled([layout.conditioning_files(run)["json"] for run in RUNS]),
        spectra=settled([layout.conditioning_files(run)["spectra"] for run in RUNS]),
        speedups=settled([layout.speedup_file(cell) for cell in CELLS]),
        evaluations=settled([layout.evaluate_file(cell) for cell in CELLS]),
        lineage=lineage_input("report", "all"),
    output:
        markdown="reports/report.md",
        html="reports/report.html",
        provenance="reports/provenance.json",
        metrics=directory("reports/metrics"),  # per cell and arm, its headline numbers: dvc.yaml's metrics
        figures=directory("reports/figures"),
        tables=directory("reports/tables"),
    log:
        "logs/report/report.log",
    params:
        file=PARAMS,
    resources:
        runtime=JOBS.stage_runtime("report"),
    conda:
        CONDA_ENV
    shell:
        "ngptlab report --params {params.file} > {log} 2>&1"
