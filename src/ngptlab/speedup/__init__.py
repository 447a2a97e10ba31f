"""The `speedup` stage: tokens to reach the baseline's loss, per arm, in one (scale, context) cell.

estimate.py     a number or a one-sided bound on it (Estimate)
estimator.py    the paper's speed-up measure as pure functions: every seed at the learning rate chosen on
                the swept seeds (ngptlab.speedup.lr_policy), log-token interpolation, bounds, and the cheaper
                within-run estimate
selection.py    the seeds the speed-up is estimated on (held out from the lr's choice) and the choosing
                seeds' optimism (selection_bias)
divergence.py   diverged held-out seeds: left out of the estimate, and each arm's divergence rate
inference.py    over seeds: geometric mean and t-interval on ln S, paired contrasts of arms, verdicts
paired.py       a mean log ratio between arms (paired t, or censored with bounds)
equivalence.py  the verdict of an interval against the margin (two one-sided tests)
factorial.py    the 2x2 read as a factorial: conditioning, norm and interaction effects
reading.py      each account's reading: from the dose-response lines (measured), by construction (norm),
                or by the label patterns where no line is fitted; the primary effect beside them
common_kappa.py every arm's kappa read at one token count per cell (T_common), so arms trained to
                different budgets compare
rivals.py       the effective learning rate beside the speed-up: does it confound the reading
separation.py   whether the angle square can separate the accounts: the angle arms' kappa against both
dose_response.py each account as a line over the arms' measured kappa or angle per step, and its reading
multiplicity.py Holm's adjustment
loss_law.py     the fitted law a target is interpolated along
crossing.py     where a loss curve crosses a target (tokens to target), and the loss at given tokens
lr_policy.py    the learning rate every seed is read at, chosen on the swept seeds (speedup.lr_policy);
                the plan's --add-seeds and --prune-sweeps, the report and the design choose with it; an
                angle arm at multiplier 1 (its angle per step its matched arm's)
tuned_multiplier.py an angle arm's secondary estimate: at the multiplier the policy tunes over its sweep,
                on the swept seeds
censored.py     the mean over seeds when some seeds are bounds: censored-normal profile likelihood
interpolate.py  the best loss between learning-rate grid points (a parabola in ln lr) and its speed-up
tuning.py       whether each arm's best learning rate is inside the learning rates run at its budget
cell.py         one cell's estimate, written to results/speedup/<cell>.json (schema in its docstring)
command.py      `ngptlab speedup CELL`
document.py     the one typed reader of that file, for the report, the design and evaluate (its records:
                arm_records.py, effect_records.py)
across_cells.py the primary effect across the cells of a params file: Holm's adjustment and the reading
                again, for the report and the design
Reading the train stage's outputs and writing strict JSON is ngptlab.results, shared with condition/.
"""
