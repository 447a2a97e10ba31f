"""The report's sections, one module each, in the report's order (report/build.py calls them): each holds
its own tables, figures and text, and imports only the kit below it (report/kit/).

  summary.py        the summary at the top               what_was_run.py   the grid, data, compute, sweeps
  speedup.py        the speed-up table                   loss.py           loss curves and final losses
  settle.py         the 2x2 read as verdicts, placing its evidence (settle_evidence.py)
  accounts.py       which account: both squares and each account's predictions
  dose_response.py  each account as a line over the arms' measured kappa and angle per step
  rivals.py         the rival accounts over training     conditioning.py   each arm's matrices
  calibration.py    WSD against cosine                   zero_shot.py      zero-shot accuracy
  caveats.py        what limits every number             provenance.py     inputs, code, every run"""
