"""The `report` stage: results/ + params + data meta -> reports/report.md, report.html, figures, tables,
provenance.json, metrics/<cell>/<arm>.json. Read top to bottom:

  kit/                 what every section builds on: loading, views, the document model, tables, plots,
                       rendering (kit/__init__.py lists its modules)
  sections/            one module per section, each with its own tables, figures and text: summary, what
                       was run, the speed-up, loss curves, calibration (WSD grids), zero-shot accuracy,
                       conditioning, settle it, caveats, provenance
  build.py             the table of contents: one call per section, in the report's order
  provenance.py        reports/provenance.json: the runs and hashes behind every number
  metrics.py           reports/metrics/<cell>/<arm>.json: the headline numbers, DVC's metrics
  command.py           `ngptlab report`: render in memory, then write atomically
"""
