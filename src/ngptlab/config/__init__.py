"""The params file: its schema (schema.yaml), reading and validating it once into typed settings (load.py),
the messages that name the key at fault (messages.py), and the checks across fields that the schema cannot
express (checks.py). What each key does to the results, as the schema classes it, is settings/roles.py."""
