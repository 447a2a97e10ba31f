"""HF `datasets`, imported only when documents are read, and without its torch integration."""

from __future__ import annotations

import os
import sys


def import_datasets():
    """HF `datasets`, imported without its torch integration unless the user asked for it.

    A streaming IterableDataset makes itself a subclass of torch's IterableDataset when torch is installed,
    which imports torch: about 1.5 s and 250 MB for nothing in this stage. USE_TORCH is datasets' own switch,
    read once at import; it is set only for that import, so subprocesses do not inherit it."""
    if "datasets" not in sys.modules and "USE_TORCH" not in os.environ:
        os.environ["USE_TORCH"] = "0"
        try:
            import datasets
        finally:
            del os.environ["USE_TORCH"]
    import datasets

    return datasets
