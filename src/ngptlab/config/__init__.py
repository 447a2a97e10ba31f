"""The params file: its schema (schema.yaml), reading and validating it once (load.py), the messages that
name the key at fault (messages.py), and the checks across fields that the schema cannot express
(checks.py). An optional key's default is read through ngptlab.settings."""
