"""The `speedup` stage: tokens to reach the baseline's loss, per arm, in one (scale, context) cell.

results.py    reading the train stage's summary.json and metrics.jsonl (ResultsError on anything malformed)
estimator.py  the paper's speed-up measure as pure functions: best over lr, log-token interpolation, bounds,
              seeds with a bootstrap interval, and the cheaper within-run estimate
command.py    `ngptlab speedup --cell CELL`: writes results/speedup/<cell>.json (schema in its docstring)
table.py      the cross-arm table joining runs, speed-ups and headline conditioning numbers (for the report)
"""
