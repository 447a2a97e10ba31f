#!/usr/bin/env bash
# Start a real Slurm cluster on this machine (Debian slurm-wlm + munge), for `snakemake --profile slurm`
# and tests/test_slurm.py. Idempotent: rerunning restarts the daemons with a fresh config. Needs root. No
# systemd is assumed (containers, CI): the daemons are started directly.
#
# Two nodes on one machine: this host in the default partition (where every job goes unless told
# otherwise), and a second node, $host-2, that joins it in the partition MULTI_PARTITION for jobs over two
# nodes (multi-node training). Each node is its own slurmd (`slurmd -N NAME`) with its own port, spool
# directory and pid file; Debian's build refuses two nodes with the same NodeHostname string, so the
# second one names this machine as localhost (NodeAddr 127.0.0.1).
#
# What is particular to this setup (see "Facts about this environment" in DESIGN.md):
# - ProctrackType=proctrack/pgid and TaskPlugin=task/none: no cgroups needed;
# - GPUs are faked (gres.conf AutoDetect=off, File= stand-in device files) so that GPU requests in the profile
#   are scheduled and checked, on a machine with none;
# - no slurmdbd, so the Snakemake plugin queries job states with squeue, which needs finished jobs to
#   stay visible for a while: MinJobAge=600.
set -euo pipefail

FAKE_GPUS=${FAKE_GPUS:-2}
PARTITION=${PARTITION:-main}
MULTI_PARTITION=${MULTI_PARTITION:-multi}
STATE=/var/lib/slurm
LOGS=/var/log/slurm

if [ "$(id -u)" != 0 ]; then
    echo "setup-slurm: must run as root (installs packages and starts daemons)" >&2
    exit 1
fi

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
    echo "setup-slurm: installing slurm-wlm and munge"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
fi

# munge: the key authenticates slurmctld <-> slurmd <-> clients.
mkdir -p /etc/munge /run/munge /var/log/munge /var/lib/munge
if [ ! -s /etc/munge/munge.key ]; then
    if command -v mungekey >/dev/null; then mungekey --create --keyfile=/etc/munge/munge.key --force
    else dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none; fi
fi
chown -R munge:munge /etc/munge /run/munge /var/log/munge /var/lib/munge
chmod 0700 /etc/munge /var/log/munge /var/lib/munge
chmod 0755 /run/munge
chmod 0400 /etc/munge/munge.key
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged --force
    for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.2; done
fi
munge -n | unmunge >/dev/null || { echo "setup-slurm: munged did not start" >&2; exit 1; }

# The node as this machine describes itself; memory leaves room for the OS.
host=$(hostname -s)
second=$host-2
cpus=$(nproc)
mem_mb=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
mkdir -p /etc/slurm "$STATE/slurmctld" "$STATE/slurmd" "$STATE/fake-gpus" "$LOGS"
for i in $(seq 0 $((FAKE_GPUS - 1))); do
    # A character device like /dev/null (1, 3) passes slurmd's device check, so the GPU plugin also sets
    # CUDA_VISIBLE_DEVICES; where mknod is not allowed an empty file still gets the GPUs scheduled.
    for f in "$STATE/fake-gpus/gpu$i" "$STATE/fake-gpus/$second-gpu$i"; do
        [ -e "$f" ] || mknod "$f" c 1 3 2>/dev/null || touch "$f"
    done
done

cat > /etc/slurm/slurm.conf <<EOF
# Written by .ci/setup-slurm.sh: a test cluster of two nodes on one machine.
ClusterName=ngptlab
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
ReturnToService=2
MinJobAge=600
KillWait=30
StateSaveLocation=$STATE/slurmctld
SlurmdSpoolDir=$STATE/slurmd-%n
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd-%n.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd-%n.log
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
NodeName=$host CPUs=$cpus RealMemory=$mem_mb Gres=gpu:$FAKE_GPUS Port=6818 State=UNKNOWN
NodeName=$second NodeHostname=localhost NodeAddr=127.0.0.1 Port=6828 CPUs=$cpus RealMemory=$mem_mb Gres=gpu:$FAKE_GPUS State=UNKNOWN
PartitionName=$PARTITION Nodes=$host Default=YES MaxTime=INFINITE State=UP
PartitionName=$MULTI_PARTITION Nodes=$host,$second Default=NO MaxTime=INFINITE State=UP
EOF

cat > /etc/slurm/gres.conf <<EOF
# Fake GPUs: empty files stand in for device nodes, so GPU requests are scheduled on a GPU-less machine.
AutoDetect=off
NodeName=$host Name=gpu File=$STATE/fake-gpus/gpu[0-$((FAKE_GPUS - 1))]
NodeName=$second Name=gpu File=$STATE/fake-gpus/$second-gpu[0-$((FAKE_GPUS - 1))]
EOF

# (Re)start the daemons with this config. Only the daemons' own pid files are used to stop them (slurmd.pid:
# the single slurmd of an earlier version of this script).
for pidfile in /run/slurmd.pid /run/slurmd-*.pid /run/slurmctld.pid; do
    pid=$(cat "$pidfile" 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    fi
done
/usr/sbin/slurmctld -c  # -c: start clean, forget jobs of an earlier cluster with another config
for _ in $(seq 50); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.2; done
/usr/sbin/slurmd -N "$host"
/usr/sbin/slurmd -N "$second"

# Wait until both nodes take jobs.
for node in "$host" "$second"; do
    for _ in $(seq 100); do
        state=$(sinfo -h -N -o %t -n "$node" 2>/dev/null | head -n 1 || true)
        case "$state" in idle*|mix*|alloc*) break ;; esac
        sleep 0.3
    done
    state=$(sinfo -h -N -o %t -n "$node" 2>/dev/null | head -n 1 || true)
    case "$state" in
        idle*|mix*|alloc*) ;;
        *) echo "setup-slurm: node $node is '$state', not idle; see $LOGS/" >&2
           tail -n 20 "$LOGS/slurmctld.log" "$LOGS/slurmd-$node.log" >&2 || true
           exit 1 ;;
    esac
done

# A trivial job proves the whole chain (munge, controller, node, srun) works.
out=$(srun --partition="$PARTITION" --time=1 --mem=100 -n1 echo slurm-ok)
[ "$out" = slurm-ok ] || { echo "setup-slurm: trivial srun job printed '$out'" >&2; exit 1; }
# ... and one task on each of the two nodes.
out=$(srun --partition="$MULTI_PARTITION" --time=1 --mem=100 -N2 --ntasks-per-node=1 \
      bash -c 'echo "$SLURMD_NODENAME"' | sort | tr '\n' ' ')
[ "$out" = "$(printf '%s\n' "$host" "$second" | sort | tr '\n' ' ')" ] || {
    echo "setup-slurm: a two-node srun job printed '$out'" >&2; exit 1; }
echo "setup-slurm: node $host up ($cpus CPUs, ${mem_mb} MB, $FAKE_GPUS fake GPUs, partition $PARTITION);" \
     "with $second, partition $MULTI_PARTITION for jobs over two nodes"
