"""The `condition` stage: the conditioning of one trained model's weight matrices.

analyse.py   every matrix of a model in every variant, the long spectra table, the headline numbers
metrics.py   the stage's metrics beyond a spectrum (norms, renormalisation, cosines): a new metric goes here
reference.py the references of every headline number: the run's step-0 matrices, Gaussian matrices
run.py       one run: checkpoint in, results/conditioning/<run>.{json,spectra.csv} out
command.py   `ngptlab condition RUN`

The pieces a training run's observer shares with it (the spectral metrics, the effective matrix of every arm,
the per-head and covariance records, the headline numbers) are in ngptlab.observe, below both stages.
"""
