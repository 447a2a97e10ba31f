"""The report's sections, one module each, in the report's order (report/build.py calls them): each holds
its own tables, figures and text, and imports only the kit below it (report/kit/). Settle it is two: its
evidence (settle_evidence.py) and the 2x2 read as verdicts, which places that evidence (settle.py)."""
