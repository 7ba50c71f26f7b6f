#!/usr/bin/env bash
# Install and prepare what the cluster, server and browser tests need on a fresh Debian 12 machine (as root,
# or with sudo). Called by .ci/run before pytest; safe to re-run. Takes ~30 s (apt ~120 MB, mostly chromium).
#
#   tests/test_cluster.py  slurmctld slurmd slurm-client munge  (tests/cluster/start.sh starts them per session)
#   tests/test_server.py   mlflow (already a dependency)
#   tests/test_ui.py       chromium (Debian's) + the playwright Python package, which drives it through
#                          executable_path: no `playwright install`, no browser download.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3}"
PLAYWRIGHT_VERSION="1.65.2"
SUDO=""
[[ "$(id -u)" == 0 ]] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive

$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends \
    slurmctld slurmd slurm-client munge \
    chromium fonts-dejavu-core
"$PYTHON" -m pip install -q "playwright==${PLAYWRIGHT_VERSION}"

# The munge package creates /etc/munge/munge.key on install; start.sh creates one if a minimal image lacks it.
# Check once that the test cluster comes up and goes down (clear failure here rather than in pytest).
run_dir="$(mktemp -d)"
if [[ "$(id -u)" == 0 ]]; then
    tests/cluster/start.sh "$run_dir"
    tests/cluster/stop.sh "$run_dir"
else
    echo "services.sh: not root; the cluster tests will skip (munged must be started as root)" >&2
fi
rm -rf "$run_dir"
chromium --headless --no-sandbox --disable-gpu --dump-dom about:blank >/dev/null 2>&1 ||
    { echo "services.sh: chromium does not start headless" >&2; exit 1; }
"$PYTHON" -c "import playwright.sync_api" && echo "services.sh: SLURM, munge, chromium and playwright ready"
