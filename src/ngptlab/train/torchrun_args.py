"""torchrun's options that not every supported torch has, kept where the installed torchrun knows them.

workflow/scripts/launch.sh asks before it starts an agent:

    python -m ngptlab.train.torchrun_args --shutdown-timeout 120

prints `--shutdown-timeout 120` where this torch's torchrun parses that option (torch 2.13's does), and
nothing where it does not (torch 2.11's), with a note on stderr naming the option left out, so the agent
runs with torchrun's own default there instead of failing on an unknown option. The answer comes from the
installed torchrun's argument parser (torch.distributed.run.get_args_parser), not from a version string.
"""

from __future__ import annotations

import argparse
import sys


def torchrun_parser() -> argparse.ArgumentParser:
    from torch.distributed.run import get_args_parser  # imports torch: only when launch.sh asks

    return get_args_parser()


def known(pairs: list[tuple[str, str]], parser: argparse.ArgumentParser) -> tuple[list[str], list[str]]:
    """(the arguments of the (option, value) pairs the parser knows, in order; the options it does not)."""
    # argparse keeps no public list of option strings; _option_string_actions is the map it parses with
    options = parser._option_string_actions
    kept = [word for option, value in pairs if option in options for word in (option, value)]
    return kept, [option for option, _ in pairs if option not in options]


def main(argv: list[str] | None = None, parser: argparse.ArgumentParser | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) % 2 or any(not word or any(c.isspace() for c in word) for word in argv):
        # launch.sh splits the answer on whitespace: words with none, in (option, value) pairs
        print("torchrun_args: usage: python -m ngptlab.train.torchrun_args OPTION VALUE [OPTION VALUE...] "
              "(no blanks in a word)", file=sys.stderr)
        return 2
    kept, dropped = known(list(zip(argv[::2], argv[1::2], strict=True)), parser or torchrun_parser())
    if dropped:
        import torch

        print(f"launch.sh: torchrun of torch {torch.__version__} has no {', '.join(dropped)}: its own "
              "default applies", file=sys.stderr)
    print(" ".join(kept))
    return 0


if __name__ == "__main__":
    sys.exit(main())
