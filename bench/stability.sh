#!/usr/bin/env bash
# Zero false alarms: the suites K times (default 5) on one warm reference sim, then the outcomes and
# the spread of each measured value per criterion x backend (bench/stability.py). Starts the sim when
# it is not up (and stops it afterwards). Run from the repository root: bash bench/stability.sh [K]
set -uo pipefail
K="${1:-5}"
PY="${PYTHON:-.venv/bin/python}"
export GPUPOC_SIM_SCHEDULERS="${GPUPOC_SIM_SCHEDULERS:-kueue,volcano,kuberay,kai}"
started=0
if ! "$PY" -m harness.cli sim status >/dev/null 2>&1; then
  "$PY" -m harness.cli sim up || exit 1
  started=1
fi
trap '[ "$started" = 1 ] && "$PY" -m harness.cli sim down >/dev/null' EXIT
base="stability-$(date -u +%Y%m%d-%H%M%S)"
begin=$(date +%s)
"$PY" -m harness.cli run --repeat "$K" --run-id "$base" -- -q -p no:cacheprovider
echo "gpupoc: $K runs in $(( $(date +%s) - begin ))s"
records=()
for i in $(seq 1 "$K"); do records+=("reports/$base-$i/record.json"); done
"$PY" bench/stability.py "${records[@]}"
