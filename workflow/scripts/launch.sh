#!/usr/bin/env bash
# Start `ngptlab ARGS...` as one process, as torchrun's processes on one node, or over several nodes.
# The one place that says how a run is launched: the train rule and the tests call it.
#
#   launch.sh NODES PROCESSES MAX_RESTARTS ARGS...
#
# NODES x PROCESSES (per node) processes in all (train.resources.<scale>; MAX_RESTARTS: train.max_restarts).
# - 1 x 1: `ngptlab ARGS`.
# - 1 x P: `torchrun --standalone --nproc_per_node P` on this machine.
# - N x P, N > 1, inside a Slurm allocation of N nodes: `srun` starts one torchrun agent per node (this
#   script again, with NGPTLAB_RDZV_ENDPOINT set); the agents meet at a c10d rendezvous on the allocation's
#   first node (its NodeAddr, a port derived from the job id so that two jobs sharing a node do not
#   collide, below the ephemeral port range: rdzv_port.sh), with the job id as the rendezvous id.
# - N x P with NGPTLAB_RDZV_ENDPOINT=HOST:PORT (and NGPTLAB_RDZV_ID) set: this node's torchrun agent; start
#   one on each of the N nodes (or N times on one machine, to try a multi-node run without Slurm).
# torchrun gives ngptlab RANK (global over all nodes: rank 0 alone writes outputs), LOCAL_RANK and
# WORLD_SIZE = N x P. Each training process sets its own compute threads (src/ngptlab/train/threads.py: one
# per process), so how a run is launched never changes its bytes.
#
# Time: NGPTLAB_JOB_STARTED (seconds since the epoch) is set once, here, unless an enclosing launch set it,
# so the run's own clock (train.max_job_minutes, src/ngptlab/jobclock.py) counts from the job's start across
# torchrun restarts and nodes. On SIGTERM torchrun gives its processes NGPTLAB_SHUTDOWN_TIMEOUT seconds
# (train.signal_lead_s: enough for a checkpoint; default 120) to checkpoint and exit before it kills them,
# where its torch has --shutdown-timeout (2.13 has, 2.11 has not: there it gives them its fixed 30 s; the
# option is passed only where torchrun parses it, src/ngptlab/train/torchrun_args.py).
# Slurm signals every process of the step at once, this script included: it ignores SIGTERM and waits for its
# agent, and since a signalled agent exits 1 whatever its processes did, it exits 75 where they stopped with a
# checkpoint (they say so in NGPTLAB_RESUMABLE_MARK, src/ngptlab/jobclock.py), so the job reads as resumable.
#
# Faults: a process that dies makes its agent stop its other processes and the other agents restart theirs
# too; torchrun restarts the whole group up to MAX_RESTARTS times (counted per agent), each time resuming
# from the last checkpoint. Past that it fails with the failed rank, host, exit code and traceback at the
# end of the log, srun --kill-on-bad-exit ends the other nodes, and the workflow's retry resumes from the
# last checkpoint.
set -euo pipefail

if [ $# -lt 4 ]; then
    echo "launch.sh: usage: launch.sh NODES PROCESSES MAX_RESTARTS NGPTLAB-ARGS..." >&2
    exit 2
fi
nodes=$1 processes=$2 restarts=$3
shift 3

# Each rendezvous round gets a fresh store for the processes: torchrun's default shares the agents' store
# across rounds, and after a restart the processes can read the dead round's gloo addresses and hang.
export TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1
if [ -z "${NGPTLAB_JOB_STARTED:-}" ]; then
    export NGPTLAB_JOB_STARTED=$(date +%s)
    echo "launch.sh: $(date -Is) start on $(hostname -s) (Slurm job ${SLURM_JOB_ID:-none}," \
         "restart ${SLURM_RESTART_COUNT:-0})" >&2
fi
shutdown=${NGPTLAB_SHUTDOWN_TIMEOUT:-120}

agent() {  # torchrun ARGS...: this node's agent, waited for; exit 75 where its processes stopped resumably
    local mark status=0 answer optional
    # the options not every torch's torchrun has, kept where this one has them (python: the environment's,
    # whose bin/ holds torchrun)
    answer=$(python -m ngptlab.train.torchrun_args --shutdown-timeout "$shutdown")
    read -ra optional <<< "$answer"
    mark=$(mktemp)
    trap '' TERM
    NGPTLAB_RESUMABLE_MARK=$mark torchrun "${optional[@]}" "$@" || status=$?
    if [ "$status" -ne 0 ] && [ -s "$mark" ]; then
        status=$(cat "$mark")
    fi
    rm -f "$mark"
    exit "$status"
}

if [ "$nodes" -eq 1 ] && [ "$processes" -eq 1 ]; then
    exec ngptlab "$@"
fi
if [ "$nodes" -eq 1 ]; then
    agent --standalone --nproc_per_node "$processes" --max-restarts "$restarts" -m ngptlab.cli "$@"
fi
if [ -n "${NGPTLAB_RDZV_ENDPOINT:-}" ]; then  # one node's agent
    agent --nnodes "$nodes" --nproc_per_node "$processes" --rdzv_backend c10d \
        --rdzv_endpoint "$NGPTLAB_RDZV_ENDPOINT" --rdzv_id "${NGPTLAB_RDZV_ID:-ngptlab}" \
        --max-restarts "$restarts" -m ngptlab.cli "$@"
fi

if [ -z "${SLURM_JOB_ID:-}" ]; then
    echo "launch.sh: a run over $nodes nodes runs inside a Slurm allocation of $nodes nodes" \
         "(snakemake --profile slurm, sbatch or salloc), but SLURM_JOB_ID is not set; set nodes: 1 in" \
         "train.resources to train on this machine, or NGPTLAB_RDZV_ENDPOINT to start one node's agent" >&2
    exit 2
fi
# The allocation as the controller sees it: inside a job step (the Snakemake Slurm plugin runs every job
# in one) the SLURM_* variables describe that one-node step, not the job, and a nested srun would read them.
nodelist=$(squeue -h -j "$SLURM_JOB_ID" -o %N)
allocated=$(squeue -h -j "$SLURM_JOB_ID" -o %D)
cpus=$(squeue -h -j "$SLURM_JOB_ID" -o %c)  # CPUs per node
if [ "$allocated" != "$nodes" ]; then
    echo "launch.sh: the run asks for $nodes nodes but Slurm job $SLURM_JOB_ID has $allocated ($nodelist)" >&2
    exit 2
fi
first=$(scontrol show hostnames "$nodelist" | head -n 1)
address=$(scontrol show node "$first" | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2)
# The port below this machine's ephemeral range (the allocation's nodes are taken to share the kernel setting).
port=$(bash "$(dirname "${BASH_SOURCE[0]}")/rdzv_port.sh" "$SLURM_JOB_ID")
export NGPTLAB_RDZV_ENDPOINT="${address:-$first}:$port"
export NGPTLAB_RDZV_ID=$SLURM_JOB_ID
for var in $(compgen -e); do
    case $var in
        SLURM_JOB_ID | SLURM_CONF) ;;
        SLURM_* | SRUN_* | SBATCH_*) unset "$var" ;;
    esac
done
echo "launch.sh: $nodes nodes ($nodelist) x $processes processes; rendezvous at $first" \
     "($NGPTLAB_RDZV_ENDPOINT); max restarts $restarts" >&2
# One task per node with all of its CPUs (and, by default, its GPUs); --overlap: the step that runs this
# script (the plugin's) already holds the first node's CPUs.
exec srun --overlap --kill-on-bad-exit=1 --nodes "$nodes" --ntasks "$nodes" --ntasks-per-node 1 \
    --cpus-per-task "$cpus" bash "${BASH_SOURCE[0]}" "$nodes" "$processes" "$restarts" "$@"
