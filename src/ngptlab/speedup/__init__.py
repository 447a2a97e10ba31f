"""The `speedup` stage: tokens to reach the baseline's loss, per arm, in one (scale, context) cell.

estimator.py  the paper's speed-up measure as pure functions: best over lr, log-token interpolation, bounds,
              seeds with a bootstrap interval, and the cheaper within-run estimate
command.py    `ngptlab speedup --cell CELL`: writes results/speedup/<cell>.json (schema in its docstring)
Reading the train stage's outputs and writing strict JSON is ngptlab.results, shared with condition/.
"""
