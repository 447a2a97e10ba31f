"""The grid a params file describes: its runs and cells (runs.py, enumeration.py), the learning rates swept
(sweeps.py), the trunks that WSD runs share (trunks.py), and where each run trains (resources.py)."""
