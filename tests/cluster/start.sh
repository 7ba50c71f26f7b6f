#!/usr/bin/env bash
# Start a single-node SLURM cluster on localhost for the tests (no systemd, no cgroups, no accounting).
#
#   tests/cluster/start.sh [RUN_DIR]      # default: tests/cluster/run (git-ignored)
#   source RUN_DIR/env.sh                 # SLURM_CONF and PATH for sbatch, squeue, srun, ...
#   tests/cluster/stop.sh [RUN_DIR]       # stops, by pid, everything this script started
#
# Needs the Debian packages slurmctld, slurmd, slurm-client and munge (.ci/services.sh installs them) and root,
# because munged runs as user munge (unless a munged already answers, which is then reused and left running).
# The node is named "localhost" (SlurmctldHost, NodeName, NodeHostname, `slurmd -N localhost`), so the
# machine's hostname does not matter. Ports: $ICML25_SLURMCTLD_PORT (6817) and $ICML25_SLURMD_PORT (6818).
#
# Clients find the configuration through wrappers in RUN_DIR/bin that set SLURM_CONF: the executor plugin's
# job step drops SLURM_* variables before calling srun inside a job, so SLURM_CONF alone would not reach it,
# and writing /etc/slurm would touch the machine's own configuration.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RUN="$(mkdir -p "${1:-$HERE/run}" && cd "${1:-$HERE/run}" && pwd)"
CTLD_PORT="${ICML25_SLURMCTLD_PORT:-6817}"
SLURMD_PORT="${ICML25_SLURMD_PORT:-6818}"
WAIT_S="${ICML25_CLUSTER_WAIT_S:-60}"

die() { echo "start.sh: $*" >&2; exit 1; }

for bin in slurmctld slurmd sbatch squeue srun scontrol sinfo scancel munge unmunge munged; do
    command -v "$bin" >/dev/null 2>&1 || [[ -x "/usr/sbin/$bin" ]] ||
        die "$bin not found: install slurmctld slurmd slurm-client munge (see .ci/services.sh)"
done
sbin() { command -v "$1" 2>/dev/null || echo "/usr/sbin/$1"; }

if [[ -f "$RUN/pids/slurmctld.pid" ]] && kill -0 "$(cat "$RUN/pids/slurmctld.pid")" 2>/dev/null; then
    die "a cluster is already running from $RUN (stop it with tests/cluster/stop.sh $RUN)"
fi

# Fresh state: job ids restart at 1, no jobs survive from a previous run.
rm -rf "$RUN/state" "$RUN/log" "$RUN/bin" "$RUN/pids"
mkdir -p "$RUN/state/ctld" "$RUN/state/slurmd" "$RUN/log" "$RUN/bin" "$RUN/pids"

# --- munge -------------------------------------------------------------------------------------------------------
if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    echo "start.sh: reusing the running munged"
else
    [[ "$(id -u)" == 0 ]] || die "munged is not running and starting it needs root (it runs as user munge)"
    id munge >/dev/null 2>&1 || die "user munge missing: install the munge package"
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge /etc/munge
    if [[ ! -s /etc/munge/munge.key ]]; then
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
    fi
    chown munge:munge /etc/munge/munge.key && chmod 0600 /etc/munge/munge.key
    runuser -u munge -- "$(sbin munged)" </dev/null >"$RUN/log/munged.out" 2>&1 ||
        die "munged failed: $(cat "$RUN/log/munged.out")"
    for _ in $(seq 50); do [[ -s /run/munge/munged.pid ]] && break; sleep 0.1; done
    cp /run/munge/munged.pid "$RUN/pids/munged.pid"
    for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
    munge -n | unmunge >/dev/null || die "munged started but does not answer"
fi

# --- configuration -------------------------------------------------------------------------------------------------
CPUS="$(nproc)"
MEM_TOTAL_MB="$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)"
MEM_MB="${ICML25_CLUSTER_MEM_MB:-$((MEM_TOTAL_MB * 85 / 100))}"   # below the machine's, else the node drains
USER_NAME="$(id -un)"
fill() {
    sed -e "s|@RUN@|$RUN|g" -e "s|@CTLD_PORT@|$CTLD_PORT|g" -e "s|@SLURMD_PORT@|$SLURMD_PORT|g" \
        -e "s|@USER@|$USER_NAME|g" -e "s|@CPUS@|$CPUS|g" -e "s|@MEM_MB@|$MEM_MB|g" "$1" >"$2"
}
fill "$HERE/slurm.conf.in" "$RUN/slurm.conf"
fill "$HERE/gres.conf.in" "$RUN/gres.conf"
: >"$RUN/cgroup.conf"

for tool in sbatch srun salloc squeue scancel scontrol sinfo sacct sacctmgr sshare sstat; do
    real="$(command -v "$tool" 2>/dev/null || true)"
    [[ -n "$real" && "$real" != "$RUN/bin/$tool" ]] || continue
    printf '#!/bin/sh\nSLURM_CONF=%q exec %q "$@"\n' "$RUN/slurm.conf" "$real" >"$RUN/bin/$tool"
    chmod +x "$RUN/bin/$tool"
done
cat >"$RUN/env.sh" <<EOF
export SLURM_CONF="$RUN/slurm.conf"
export PATH="$RUN/bin:\$PATH"
EOF
export SLURM_CONF="$RUN/slurm.conf"
export PATH="$RUN/bin:$PATH"

# --- daemons -----------------------------------------------------------------------------------------------------
# Both daemonize and write their pid files into $RUN/pids; stdio goes to files so callers that capture output
# (pytest) are not held open.
"$(sbin slurmctld)" -f "$RUN/slurm.conf" -c </dev/null >"$RUN/log/slurmctld.out" 2>&1 ||
    die "slurmctld failed: $(cat "$RUN/log/slurmctld.out"; tail -20 "$RUN/log/slurmctld.log" 2>/dev/null)"
"$(sbin slurmd)" -f "$RUN/slurm.conf" -N localhost </dev/null >"$RUN/log/slurmd.out" 2>&1 ||
    die "slurmd failed: $(cat "$RUN/log/slurmd.out"; tail -20 "$RUN/log/slurmd.log" 2>/dev/null)"

state=""
for _ in $(seq $((WAIT_S * 2))); do
    state="$(sinfo -h -n localhost -o %t 2>/dev/null || true)"
    [[ "$state" == idle ]] && break
    sleep 0.5
done
if [[ "$state" != idle ]]; then
    echo "start.sh: node localhost is '${state:-unreachable}' after ${WAIT_S}s; logs:" >&2
    tail -30 "$RUN/log/slurmctld.log" "$RUN/log/slurmd.log" >&2 || true
    "$HERE/stop.sh" "$RUN" >&2 || true
    exit 1
fi
echo "start.sh: cluster up (localhost: ${CPUS} CPUs, ${MEM_MB} MB, 1 fake GPU); source $RUN/env.sh"
