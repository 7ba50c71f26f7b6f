#!/usr/bin/env bash
# Stop the test cluster started by tests/cluster/start.sh [RUN_DIR]: cancel its jobs, then stop slurmd,
# slurmctld and (if start.sh started it) munged, each by the pid recorded in RUN_DIR/pids. Idempotent.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RUN="${1:-$HERE/run}"
[[ -d "$RUN/pids" ]] || { echo "stop.sh: nothing to stop in $RUN"; exit 0; }
RUN="$(cd "$RUN" && pwd)"

alive() { [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null; }
pid_of() { [[ -s "$RUN/pids/$1.pid" ]] && tr -dc '0-9' <"$RUN/pids/$1.pid"; }

# Cancel every job first so that slurmd takes its job steps down with it.
if [[ -x "$RUN/bin/squeue" ]] && alive "$(pid_of slurmctld)"; then
    jobs="$("$RUN/bin/squeue" -h -o %A -t PENDING,RUNNING,SUSPENDED,COMPLETING 2>/dev/null || true)"
    if [[ -n "$jobs" ]]; then
        # shellcheck disable=SC2086
        "$RUN/bin/scancel" $jobs 2>/dev/null || true
        for _ in $(seq 30); do
            [[ -z "$("$RUN/bin/squeue" -h -o %A -t PENDING,RUNNING,SUSPENDED,COMPLETING 2>/dev/null)" ]] && break
            sleep 0.5
        done
    fi
fi

stop_pid() {  # name pid: SIGTERM, wait up to 10 s, then SIGKILL
    local name="$1" pid="$2"
    alive "$pid" || return 0
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 100); do alive "$pid" || { echo "stop.sh: stopped $name ($pid)"; return 0; }; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
    echo "stop.sh: killed $name ($pid)"
}

for name in slurmd slurmctld munged; do
    stop_pid "$name" "$(pid_of "$name")"
    rm -f "$RUN/pids/$name.pid"
done
