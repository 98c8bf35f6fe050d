#!/usr/bin/env bash
# `make poc`: the main job on the sim — every suite on every backend, and the acceptance record.
# Starts the sim when it is not up (and stops it afterwards); missed thresholds are results, not
# errors: the exit status is non-zero when the run itself broke, or when an outcome differs from the
# reference sim's design (suites/expected.yaml).
set -uo pipefail
# The checkout's own harness, whatever an earlier `pip install -e` of another checkout left on PATH.
gpupoc() { "${PYTHON:-python3}" -m harness.cli "$@"; }
started=0
if ! gpupoc sim status >/dev/null 2>&1; then
  gpupoc sim up || exit 1
  started=1
fi
trap '[ "$started" = 1 ] && gpupoc sim down >/dev/null' EXIT
gpupoc sim status
gpupoc inventory
run_id="poc-$(date -u +%Y%m%d-%H%M%S)"
gpupoc run --run-id "$run_id" -- -q -rfEs
status=$?
echo "gpupoc: acceptance record: reports/$run_id/record.html (JSON and JUnit beside it)"
# pytest: 0 all criteria passed, 1 some criterion failed (a result); anything else broke the run.
[ "$status" -le 1 ] || exit "$status"
# The reference sim's designed outcomes (suites/expected.yaml): the baselines FAIL, everything else passes.
gpupoc check-designed "reports/$run_id/record.json" || exit 1
# What the runner asked of the API server stays inside its least-privilege role (manifests/rbac/).
gpupoc rbac --check "reports/$run_id/requests.json"
