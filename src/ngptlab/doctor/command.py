"""`ngptlab doctor`: one line a fact about this machine, in the order a first contact needs them: torch and
its build, Python, the GPUs, the NCCL settings of the environment, pyproject's dependencies that do not
import (and the pip commands that carry them as wheels), the peak FLOP/s of the MFU, and the attention
kernel at the presets' shapes.

Exit status 0, or 1 where a declared dependency does not import or is outside its declared version, or this
Python is outside requires-python: the lines starting `missing`, `version` and `python` say which. It runs
without the params validation (jsonschema may be what is missing): torch, and the other packages, are
imported only after the declared list is read, each under its own check.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
from pathlib import Path

from ngptlab import options
from ngptlab.doctor import packages
from ngptlab.layout import REPO_ROOT

PRESETS = REPO_ROOT / "workflow" / "presets"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = options.examples(
        "ngptlab doctor  # on a GPU machine, before its first run",
        "ngptlab doctor --params workflow/presets/first-light.yaml  # its shapes too (every preset's anyway)")


def line(label: str, text: str) -> None:
    print(f"{label:<9} {text}", flush=True)


def run(args: argparse.Namespace, params: None) -> int:
    """The lines; params is None (cli.UNVALIDATED): the file is read as YAML, for its shapes only."""
    declared = packages.declared()
    failed: list[str] = []
    try:
        import torch
    except Exception as err:  # any failure: torch is the finding, and nothing below runs without it
        torch = None
        line("torch", f"does not import ({type(err).__name__}: {err})")
    if torch is not None:
        from ngptlab.doctor import machine

        torch_wanted = next((r.specifier for r in declared.requirements if r.name == "torch"), "")
        line("torch", f"{torch.__version__}, build {machine.torch_build()}"
                      + (f"; declared {torch_wanted}" if torch_wanted else ""))
    python_ok = packages.satisfies(platform.python_version(), declared.requires_python)
    line("python", f"{machine.python_line() if torch is not None else platform.python_version()}; declared "
                   f"{declared.requires_python or 'any'}{'' if python_ok else ': OUTSIDE the range'}")
    if not python_ok:
        failed.append(f"python {platform.python_version()}")
    if torch is not None:
        gpus = machine.gpus()
        for index, gpu in enumerate(gpus):
            line(f"gpu {index}", gpu)
        if not gpus:
            line("gpu", "none (torch sees no CUDA device)")
        from ngptlab.train import nccl_env

        line("nccl", nccl_env.doctor_text(os.environ, nccl_env.interfaces()))

    problems = packages.problems(declared.requirements)
    for problem in problems:
        line(problem.kind, f"{problem.requirement.name}: {problem.why}")
    if problems:
        wanted = [shlex.quote(p.requirement.name + p.requirement.specifier) for p in problems]
        line("carry", f"on a machine with network: {packages.download_command(wanted)}")
        line("", f"then, with wheels/ copied here: {packages.install_command(wanted)}")
        failed += [p.requirement.name for p in problems]
    else:
        line("packages", f"all {len(declared.requirements)} dependencies import ({declared.source})")

    if torch is not None:
        line("peak", machine.peak_line())
        attention_lines(Path(args.params))
    if failed:
        print(f"ngptlab doctor: {len(failed)} problem{'s' if len(failed) > 1 else ''}: {', '.join(failed)}")
        return 1
    return 0


def attention_lines(params_file: Path) -> None:
    """One line per (scale, context) of the presets and the params file: the SDPA kernel torch picks."""
    from ngptlab.doctor import kernels

    files = sorted(PRESETS.glob("*.yaml")) if PRESETS.is_dir() else []
    if params_file.is_file() and params_file.resolve() not in {f.resolve() for f in files}:
        files.append(params_file)
    try:
        cases = kernels.cases(files)
    except ImportError as err:
        line("sdpa", f"the presets' shapes need pyyaml to read ({err})")
        return
    device, dtype = kernels.device_and_dtype()
    where = "on the GPU" if device.type == "cuda" else "on the CPU (no GPU: CPU kernels only)"
    line("sdpa", f"{where}, {str(dtype).removeprefix('torch.')}, causal, as a run calls it:")
    for case in cases:
        line("", kernels.describe(case, kernels.chosen(case, device, dtype)))
    if not cases:
        line("", "no preset or params file found to read shapes from")
