"""evaluate: zero-shot accuracy of selected runs through lm-evaluation-harness (command.py)."""
