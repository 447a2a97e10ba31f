"""`ngptlab design`: a design checked on planted worlds before any GPU-hour is spent.

  command.py         the command: the table, optionally with the seed noise a pilot measured
  loss_model.py      the planted loss of a run (a Chinchilla-style law, a learning-rate parabola, noise)
  truths.py          the planted truths: each arm's speed-up over gpt, its mechanism at its place
  placements.py      where each arm sits in ln kappa and ln angle per step, in every planted world
  mechanisms.py      the dose-response worlds: each arm's ln kappa and ln angle per step beside its speed-up
  world.py           one planted world: every run's result drawn under one truth
  protocol.py        the protocol played out on a world through the stages' own functions
  simulate.py        every truth over many worlds, spread over processes
  outcome.py         what one world's documents say, beside its truth
  table.py           how often each reading comes out, coverage, bias, per truth and cell
  dose_table.py      the dose-response worlds' readings, slopes' coverage and thresholds, at x1 and x2 noise
  printout.py        the table in words
  policies.py        --compare-policies: the design under each learning-rate rule, side by side
  gaps.py            what the learning-rate policy costs a speed-up on the planted law (the report quotes it)
  measured_noise.py  the seed noise from a pilot's speed-ups (--noise-from)
  resolution.py      the range of ngpt speed-ups the design reads right (--resolution)
"""
