"""What the train and condition stages both measure on a model's weights, below both (neither imports the
other): the condition stage analyses a trained model with these pieces, a training run observes its own
weights at its evaluation points with the same ones.

metrics.py    pure spectral metrics of one matrix (float64 SVD, condition number with a singular flag,
              stable and effective rank, covariance eigenvalues); the condition stage's others (norms,
              anisotropy, post-hoc renormalization) are condition/metrics.py's, in no train job's code key
effective.py  the effective matrix of every arm: one definition (the map applied to the normalised input)
kappa.py      the condition-number records of one matrix (per head, an embedding's covariance), their settings
tracked.py    the condition numbers a training run records (the paper's layers 3 and 4, the input embedding)
headline.py   the headline numbers of a model's records (the condition stage's; a run records tracked.py's)
angular.py    the angular update rate of the effective matrices between two points of a run, and where the
              interval being measured starts (kept in a resume checkpoint)
step_angle.py the angle each matrix turns in one optimizer step, summed on the device over the interval
peak_angle.py that angle at the schedule's peak, read off a run's metrics rows (torch-free)
observer.py   what a training run adds to its metrics rows at its evaluation points
"""
