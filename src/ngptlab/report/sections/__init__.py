"""The report's sections, one module each, in the report's order (report/build.py calls them): each holds
its own tables, figures and text, and imports only the kit below it (report/kit/)."""
