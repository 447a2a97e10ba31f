#!/usr/bin/env bash
# Print the rendezvous port of Slurm job JOB_ID: derived from the job id, so that two jobs sharing a node do not
# collide, and below this machine's ephemeral port range, so that no outgoing connection the kernel numbered
# from that range (NCCL's, a DVC download's) can already hold it when torchrun binds it.
#
#   rdzv_port.sh JOB_ID [RANGE_FILE]
#
# RANGE_FILE: the kernel's ephemeral range, "LOW HIGH" (default /proc/sys/net/ipv4/ip_local_port_range; where
# it does not exist, Linux's default low end 32768 is assumed). The port is in [20000, LOW), or [1024, LOW)
# where LOW leaves fewer than 1000 ports above 20000; a LOW of 2048 or less leaves too few and is an error.
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
    echo "rdzv_port.sh: usage: rdzv_port.sh JOB_ID [RANGE_FILE] (JOB_ID a number)" >&2
    exit 2
fi
job=$1 range=${2:-/proc/sys/net/ipv4/ip_local_port_range}
ephemeral=32768
if [ -r "$range" ]; then
    read -r ephemeral _ < "$range" || true  # a last line without its newline is read too
    if ! [[ $ephemeral =~ ^[0-9]+$ ]]; then
        echo "rdzv_port.sh: $range does not start with a port number: '$(head -c 80 "$range")'" >&2
        exit 2
    fi
fi
if [ "$ephemeral" -le 2048 ]; then
    echo "rdzv_port.sh: the ephemeral port range starts at $ephemeral ($range): too low to keep a rendezvous" \
         "port below it; raise its low end (sysctl net.ipv4.ip_local_port_range)" >&2
    exit 2
fi
low=20000
if [ "$ephemeral" -lt $((low + 1000)) ]; then
    low=1024
fi
echo $((low + job % (ephemeral - low)))
