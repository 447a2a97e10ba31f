#!/usr/bin/env bash
# Start a real SSH server on 127.0.0.1 (Debian openssh-server, a non-default port, key auth only) that
# tests/test_dvc.py uses as a DVC remote through dvc-ssh. Idempotent; needs root. No systemd assumed.
#
# It writes $STATE/remote.env, which the test reads (and a person can source):
#   NGPTLAB_SSH_HOST, NGPTLAB_SSH_PORT, NGPTLAB_SSH_USER, NGPTLAB_SSH_KEY, NGPTLAB_SSH_ROOT
set -euo pipefail

PORT=${NGPTLAB_SSH_PORT:-2222}
REMOTE_USER=${NGPTLAB_SSH_USER:-dvc}
STATE=/var/lib/ngptlab-sshd
REMOTE_ROOT=/srv/dvc-remote

if [ "$(id -u)" != 0 ]; then
    echo "setup-sshd: must run as root (installs packages, adds a user, starts sshd)" >&2
    exit 1
fi

if [ ! -x /usr/sbin/sshd ] || ! command -v ssh-keygen >/dev/null || ! command -v ssh >/dev/null; then
    echo "setup-sshd: installing openssh-server"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends openssh-server openssh-client >/dev/null
fi

# A dedicated login that owns the remote's storage, so the test does not log in as root.
if ! id "$REMOTE_USER" >/dev/null 2>&1; then
    useradd --create-home --shell /bin/sh "$REMOTE_USER"
fi
# sshd refuses a locked account (a '!' password) even for key auth; '*' means "no password" instead.
usermod -p '*' "$REMOTE_USER"
home=$(getent passwd "$REMOTE_USER" | cut -d: -f6)

mkdir -p "$STATE" /run/sshd "$REMOTE_ROOT"
chmod 0755 /run/sshd
chown "$REMOTE_USER": "$REMOTE_ROOT"
[ -s "$STATE/host_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -f "$STATE/host_ed25519"
[ -s "$STATE/client_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C ngptlab-dvc-test -f "$STATE/client_ed25519"
install -d -m 0700 -o "$REMOTE_USER" -g "$REMOTE_USER" "$home/.ssh"
install -m 0600 -o "$REMOTE_USER" -g "$REMOTE_USER" "$STATE/client_ed25519.pub" "$home/.ssh/authorized_keys"

cat > "$STATE/sshd_config" <<EOF
# Written by .ci/setup-sshd.sh: loopback only, keys only, one user.
ListenAddress 127.0.0.1
Port $PORT
HostKey $STATE/host_ed25519
PidFile $STATE/sshd.pid
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
AllowUsers $REMOTE_USER
UsePAM no
Subsystem sftp internal-sftp
MaxSessions 32
MaxStartups 32:30:64
EOF

/usr/sbin/sshd -t -f "$STATE/sshd_config"
pid=$(cat "$STATE/sshd.pid" 2>/dev/null || true)
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
fi
/usr/sbin/sshd -f "$STATE/sshd_config"

cat > "$STATE/remote.env" <<EOF
NGPTLAB_SSH_HOST=127.0.0.1
NGPTLAB_SSH_PORT=$PORT
NGPTLAB_SSH_USER=$REMOTE_USER
NGPTLAB_SSH_KEY=$STATE/client_ed25519
NGPTLAB_SSH_ROOT=$REMOTE_ROOT
EOF

ok=""
for _ in $(seq 50); do
    if ssh -q -i "$STATE/client_ed25519" -p "$PORT" -o BatchMode=yes -o StrictHostKeyChecking=no \
        -o UserKnownHostsFile=/dev/null "$REMOTE_USER@127.0.0.1" "test -w $REMOTE_ROOT" 2>/dev/null; then
        ok=1; break
    fi
    sleep 0.2
done
[ -n "$ok" ] || { echo "setup-sshd: cannot log in as $REMOTE_USER@127.0.0.1:$PORT with the key" >&2; exit 1; }
echo "setup-sshd: sshd on 127.0.0.1:$PORT, user $REMOTE_USER, key $STATE/client_ed25519, remote $REMOTE_ROOT"
