"""evaluate: zero-shot accuracy of selected runs through lm-evaluation-harness.

selection.py  which runs of a cell: each arm's best learning rate per budget, from the cell's speed-up
tasks.py      the offline tasks, built from the validation tokens
adapter.py    an ngptlab model as lm-eval's LM
harness.py    the requested tasks, built and found, and one model's accuracies through lm-eval
partial.py    each run's finished entry, kept for the next job
cell.py       one cell's job, written to results/evaluate/<cell>.json (schema in its docstring)
command.py    `ngptlab evaluate CELL`
"""
