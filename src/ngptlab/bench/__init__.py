"""Benchmarks: scripts that print speed ratios, never timed tests (the machines are shared and noisy)."""
