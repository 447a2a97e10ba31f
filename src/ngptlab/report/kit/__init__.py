"""What every section of the report builds on, read top to bottom:

  load.py           every expected input, present or missing (no checkpoint is read)
  views.py          shared selections: the speed-up's best run per budget, each arm's representative run
  speedups.py       one speed-up entry of results/speedup/<cell>.json as text, its runs, its range
  conditioning.py   a run's conditioning result: headline numbers, matrices, spectra, references
  crossarm.py       the cross-arm table: runs x speed-ups x headline conditioning numbers
  table.py          a table (CSV + display) and the number formats
  document.py       the report as blocks, figures among them
  plot.py           deterministic SVG figures: one colour and marker per arm, labelled log axes
  render.py         markdown and self-contained HTML from the same blocks
"""
