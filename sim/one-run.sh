#!/usr/bin/env bash
# One make test, poc or kind on a host at a time. Each uses the whole host: its two cores, the sims' fixed port bases,
# /var/lib/gpupoc/sim-<port>. One started beside another waits for it to end (2026-12-06: a make test left running
# overlapped CI's, and CI failed on a port in use and the real nodes' mounts stacked under each other).
set -euo pipefail
lock=${GPUPOC_RUN_LOCK:-/run/lock/gpupoc-run.lock}
wait_s=${GPUPOC_RUN_LOCK_WAIT_S:-5400}
exec 9>>"$lock"
if ! flock -n 9; then
    echo "gpupoc: waiting for the run already on this host to end (up to ${wait_s} s): $(cat "$lock.who" 2>/dev/null || echo unknown)" >&2
    flock -w "$wait_s" 9 || { echo "gpupoc: the run already on this host still holds $lock after ${wait_s} s" >&2; exit 75; }
fi
echo "pid $$ in $PWD since $(date -u +%H:%M:%SZ): $*" > "$lock.who"
# no other run, so no quiet window open: the host's CPUs as a killed one may have left them (harness/sim/hostcpus.py)
"${PYTHON:-python3}" -m harness.sim.hostcpus || true
"$@" 9>&-
