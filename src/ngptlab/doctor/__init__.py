"""`ngptlab doctor`: what this machine runs ngptlab with, one line a fact, before a grid is sent to it.

  command.py    the verb: the lines in order, and the exit status (1: a required package or version missing)
  packages.py   pyproject's dependencies that do not import here, and how to carry each one as a wheel
  machine.py    torch's version and build, Python, the GPUs, and the peak FLOP/s MFU will divide by
  kernels.py    the attention kernel torch would pick at the presets' shapes

It imports nothing outside the standard library and torch at its top, so it runs where other packages are
missing and says which.
"""
