"""The `condition` stage: the conditioning of one trained model's weight matrices.

metrics.py   pure spectral metrics of one matrix (float64 SVD, condition number with a singular flag,
             stable and effective rank, covariance eigenvalues, anisotropy, post-hoc renormalization)
effective.py the effective matrix of every arm: one definition (the map applied to the normalised input)
analyse.py   every matrix of a model in every variant, the long spectra table, the headline numbers
run.py       one run: checkpoint in, results/conditioning/<run>.{json,spectra.csv} out
command.py   `ngptlab condition --run RUN`
"""
