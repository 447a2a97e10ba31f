"""What Snakemake's rules (workflow/rules/*.smk) ask of the params file, as plain Python: the grid and every
job's files and lineage key (grid.py), each job's Slurm resources, time limit and retries (jobs.py), the
one place where the workflow declares function signatures to Snakemake (signatures.py), and the truncated
shards and checkpoints that stop it before any job (damage.py)."""
