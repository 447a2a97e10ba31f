"""The params file: its schema (schema.yaml), reading and validating it once into typed settings (load.py),
the messages that name the key at fault (messages.py), the checks across fields that the schema cannot
express (checks.py), and what each key does to the results, as the schema classes it (roles.py)."""
