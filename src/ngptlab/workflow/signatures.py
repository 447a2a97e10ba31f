"""Function signatures declared to Snakemake once, not read again for every job.

Snakemake reads a function's parameters (inspect.signature) each time it calls an input, params or resource
function, to know which of wildcards, input, threads, attempt... to pass: on the paper preset, a tenth of
`snakemake -n`. It skips that for a function that carries its parameters already, as Snakemake's own
wrappers (snakemake.ioutils) declare theirs; `per_job` declares ours the same way.

Snakemake also evaluates every resource of every job, threads and its default `tmpdir` included, through the
method Resource.evaluate, and reads that method's signature twice each time. No setting or resource form
avoids it (a constant, a function, default-resources and set-resources all go through that method), so
`declare_resource_signature` declares it once, as `per_job` does: the same parameters, a bound method's,
which Snakemake would read. Measured on the paper preset's `snakemake -n` (5213 jobs, under cProfile): 34166
signature reads, 6.4% of the time, without it; 5503, 1.1%, with it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from snakemake.common import FUNC_OVERWRITE_PARAMS_ATTR, overwrite_function_params
from snakemake.resources import Resource


def per_job(function: Callable) -> Callable:
    """An input, params or resource function with its signature read once."""
    overwrite_function_params(function, inspect.signature(function).parameters)
    return function


def declare_resource_signature() -> None:
    """Resource.evaluate's signature, declared once per process."""
    if not hasattr(Resource.evaluate, FUNC_OVERWRITE_PARAMS_ATTR):
        bound = Resource("name", 0).evaluate
        overwrite_function_params(Resource.evaluate, inspect.signature(bound).parameters)
