"""The collective libraries' settings from the environment (NCCL_*, TORCH_NCCL_*, GLOO_*), for the logs and
`ngptlab doctor`: on a machine with several networks, NCCL_SOCKET_IFNAME (the interface for its bootstrap and
socket transport) and NCCL_IB_HCA (the InfiniBand adapters) decide which network a run's all-reduces take,
and NCCL otherwise picks by itself (docs/gpus.md, "Which network NCCL takes")."""

from __future__ import annotations

import socket
from collections.abc import Mapping

PREFIXES = ("NCCL_", "TORCH_NCCL_", "GLOO_")
# The two that choose the network; the doctor says of each whether it is set.
NETWORK_KEYS = ("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA")


def settings(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of the collective libraries that are set, by name."""
    return {key: environ[key] for key in sorted(environ) if key.startswith(PREFIXES)}


def describe(environ: Mapping[str, str]) -> str:
    """'NCCL_IB_HCA=mlx5_0 NCCL_SOCKET_IFNAME=ib0', or that none is set: for each rank's log line."""
    found = settings(environ)
    if not found:
        return f"no {'/'.join(p + '*' for p in PREFIXES)} set"
    return " ".join(f"{key}={value}" for key, value in found.items())


def interfaces() -> list[str]:
    """This machine's network interfaces (what NCCL_SOCKET_IFNAME names); none where it cannot list them."""
    try:
        return [name for _, name in socket.if_nameindex()]
    except OSError:
        return []


def doctor_text(environ: Mapping[str, str], names: list[str]) -> str:
    """The doctor's line: what is set, which network keys are not, and the interfaces to choose from."""
    unset = [key for key in NETWORK_KEYS if key not in environ]
    text = describe(environ)
    if unset:
        text += f"; {' and '.join(unset)} unset: NCCL chooses by itself"
    if names:
        text += f" (interfaces here: {', '.join(names)})"
    return text
