"""The `report` stage: results/ + params + data meta -> reports/report.md, report.html, figures, tables,
provenance.json. Read top to bottom:

  paper_numbers.yaml / paper.py   the nGPT paper's numbers, each with its citation
  load.py                         every expected input, present or missing (no checkpoint is read)
  crossarm.py                     the cross-arm table: runs x speed-ups x headline conditioning numbers
  views.py                        shared selections: best run per budget, each arm's representative run
  table.py / tables.py            a table (CSV + display) and the tables of the sections without a module
  figures.py                      deterministic SVG figures
  sweeps.py                       which learning rates and seeds ran at each budget, and why others stopped
  schedule.py                     the schedule: its grid row, WSD's loss curves (a trunk, its branches), and
                                  the calibration section (WSD against cosine, per arm)
  speedup.py                      the speed-up section: the geometric mean over seeds with its t-interval on
                                  ln S, per-seed S and ln S, and the speed-up between the grid's learning
                                  rates (interpolated minima)
  settle.py                       the settle-it section: the 2x2 against the baseline and the paired
                                  contrasts, each with the speed-up stage's verdict and the seeds a 1.5x
                                  difference needs, and what they say about the conditioning account
  document.py / build.py          the report as blocks, in the report's section order, with guarded claims
  render.py                       markdown and self-contained HTML from the same blocks
  provenance.py                   reports/provenance.json: the runs and hashes behind every number
  command.py                      `ngptlab report`: render in memory, then write atomically
  synthetic.py                    a synthetic results/ tree for the tests and a demo
"""
