"""One exception family, so the CLI can print a single clear line for any bad input."""


class NgptlabError(Exception):
    """Bad input or a broken artifact; the message names the key, file or value at fault."""


class ParamsError(NgptlabError):
    """params.yaml (or a preset) is malformed or names something unknown."""


class DataError(NgptlabError):
    """A text source or a token shard is missing, corrupt or inconsistent with its meta.json."""


class CheckpointError(NgptlabError):
    """A checkpoint is missing, corrupt, or does not match the run that loads it."""


class DivergedError(NgptlabError):
    """Training produced a non-finite or exploding loss."""


class ResultsError(NgptlabError):
    """A train result (summary.json, metrics.jsonl) or an analysis result is missing or malformed."""


class UntunedError(NgptlabError):
    """A step that grows the grid from a sweep whose best learning rate sits at its edge (untuned)."""
